/**
 * prometheus/alerts.yml passes `promtool check rules`, and its unit tests (alerts.test.yml: each
 * alert firing on an unhealthy series and silent on a healthy one) pass `promtool test rules`.
 * prometheus/alerts-otel.yml, the same alerts for the OpenTelemetry path, passes the same unit
 * tests with every input series renamed as @opentelemetry/exporter-prometheus names it.
 */
import { spawnSync } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { toOtelSeries } from './support/otel-mapping.js'
import { assertInstalled, PROMTOOL_BIN } from './support/prometheus-server.js'

const dir = join(import.meta.dirname, '..', 'prometheus')

function promtool(...args: string[]) {
  assertInstalled(PROMTOOL_BIN)
  const run = spawnSync(PROMTOOL_BIN, args, { cwd: dir, encoding: 'utf8', timeout: 60_000 })
  if (run.error) throw run.error
  return { status: run.status, output: `${run.stdout}${run.stderr}` }
}

describe('prometheus/alerts.yml', () => {
  it('passes promtool check rules', () => {
    const { status, output } = promtool('check', 'rules', 'alerts.yml')
    expect(output).toContain('SUCCESS')
    expect(status, output).toBe(0)
  })

  it('passes its promtool unit tests (promtool test rules alerts.test.yml)', () => {
    const { status, output } = promtool('test', 'rules', 'alerts.test.yml')
    expect(output).toContain('SUCCESS')
    expect(status, output).toBe(0)
  })

  it('has the six alerts, each with for:, a severity label, summary, description and a runbook_url to its section of docs/METRICS.md', () => {
    const text = readFileSync(join(dir, 'alerts.yml'), 'utf8')
    const metricsDoc = readFileSync(join(dir, '..', '..', '..', 'docs', 'METRICS.md'), 'utf8')
    const alerts = [
      'FenceLockLowAcquireSuccess',
      'FenceLockHighWaitP99',
      'FenceLockHighExpiryRate',
      'FenceLockFencingRejectionsRising',
      'FenceLockNoLeader',
      'FenceLockLeaderFlapping',
    ]
    expect([...text.matchAll(/- alert: (\w+)/g)].map((m) => m[1])).toEqual(alerts)
    for (const alert of alerts) {
      const block = text.slice(text.indexOf(`- alert: ${alert}`)).split(/\n {6}- alert: /)[0]!
      expect(block, alert).toMatch(/\n {8}for: \d+m\n/)
      expect(block, alert).toMatch(/\n {10}severity: (critical|warning)\n/)
      expect(block, alert).toMatch(/\n {10}summary: "/)
      expect(block, alert).toMatch(/\n {10}description: "/)
      expect(block, alert).toContain(
        `\n          runbook_url: "https://github.com/fencelock/fencelock/blob/main/docs/METRICS.md#${alert.toLowerCase()}"`,
      )
      expect(metricsDoc, alert).toContain(`### ${alert}\n`)
      // Every alert is tested both ways in alerts.test.yml.
      const tests = readFileSync(join(dir, 'alerts.test.yml'), 'utf8')
      expect(tests.match(new RegExp(`alertname: ${alert}\\n`, 'g'))?.length ?? 0, alert).toBeGreaterThanOrEqual(2)
    }
  })

  it('fails loudly, naming the package, when promtool is missing', () => {
    expect(() => assertInstalled('/nonexistent/promtool')).toThrow(/apt-get install prometheus/)
  })
})

describe('prometheus/alerts-otel.yml (the OpenTelemetry path)', () => {
  const scratch = mkdtempSync(join(tmpdir(), 'fencelock-otel-rules-'))
  afterAll(() => rmSync(scratch, { recursive: true, force: true }))

  /**
   * alerts.test.yml with every input series renamed for the OpenTelemetry path and its rule file
   * replaced: the expectations (recorded series, alerts, their labels and annotations) unchanged.
   */
  function otelUnitTests(ruleFile: string): string {
    const text = readFileSync(join(dir, 'alerts.test.yml'), 'utf8')
    const renamed = text.replace(
      /^(\s*- series: )'([^']+)'$/gm,
      (_, lead: string, series: string) => `${lead}'${toOtelSeries(series)}'`,
    )
    const file = join(scratch, `${ruleFile.replace(/\W/g, '-')}.test.yml`)
    writeFileSync(file, renamed.replace(/^rule_files:\n {2}- alerts\.yml$/m, `rule_files:\n  - ${join(dir, ruleFile)}`))
    return file
  }

  it('passes promtool check rules', () => {
    const { status, output } = promtool('check', 'rules', 'alerts-otel.yml')
    expect(output).toContain('SUCCESS')
    expect(status, output).toBe(0)
  })

  it('passes alerts.test.yml on the series the OpenTelemetry path exposes: each alert fires and stays silent as on the prom-client path', () => {
    const file = otelUnitTests('alerts-otel.yml')
    expect(readFileSync(file, 'utf8')).toContain(
      '\'fencelock_lock_acquires_total{job="shop",instance="a:9464",fencelock_lock_group="order",fencelock_lock_acquire_outcome="acquired"}\'',
    )
    const { status, output } = promtool('test', 'rules', file)
    expect(output).toContain('SUCCESS')
    expect(status, output).toBe(0)
  })

  it('is needed: alerts.yml on those series records nothing and fires nothing, so its unit tests fail', () => {
    const { status, output } = promtool('test', 'rules', otelUnitTests('alerts.yml'))
    expect(status, output).not.toBe(0)
    expect(output).toContain('FAILED')
  })

  it('has the alerts of alerts.yml, byte for byte: only the recording rules differ', () => {
    const alertsOf = (file: string) => {
      const text = readFileSync(join(dir, file), 'utf8')
      return text.slice(text.indexOf('  - name: fencelock.alerts'))
    }
    expect(alertsOf('alerts-otel.yml')).toBe(alertsOf('alerts.yml'))
    const records = (file: string) =>
      [...readFileSync(join(dir, file), 'utf8').matchAll(/- record: (\S+)/g)].map((m) => m[1])
    expect(records('alerts-otel.yml')).toEqual(records('alerts.yml'))
  })
})
