/**
 * prometheus/alerts.yml passes `promtool check rules`, and its unit tests (alerts.test.yml: each
 * alert firing on an unhealthy series and silent on a healthy one) pass `promtool test rules`.
 */
import { spawnSync } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
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
      expect(block, alert).toContain(`\n          runbook_url: "https://github.com/fencelock/fencelock/blob/main/docs/METRICS.md#${alert.toLowerCase()}"`)
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
