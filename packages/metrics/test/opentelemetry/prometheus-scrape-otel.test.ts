/**
 * End to end on the OpenTelemetry path: the real SDK's MeterProvider with
 * @opentelemetry/exporter-prometheus, served by a test HTTP server and scraped every second by a
 * real Prometheus running prometheus/alerts-otel.yml, while real contended locks run on Redis.
 * What Prometheus computes from the exporter's series (wait P99 by histogram_quantile, the acquire
 * success ratio) and what the shipped recording rules record agree with what the test measured
 * around each acquire, within the histogram's bucket resolution — as prometheus-scrape.test.ts
 * shows for the prom-client path with alerts.yml. Run twice: the wait and hold histograms recorded
 * into the SDK's histograms, and handed to the exporter by a `lockHistogramProducer()`.
 */
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { join } from 'node:path'
import { PrometheusExporter } from '@opentelemetry/exporter-prometheus'
import { MeterProvider } from '@opentelemetry/sdk-metrics'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import {
  instrumentOpenTelemetry,
  lockHistogramProducer,
  type OpenTelemetryLockInstrumentation,
} from '../../src/opentelemetry/index.js'
import {
  contendedWorkload,
  expectPrometheusAgrees,
  scalar,
  scrapeConfig,
  until,
} from '../support/contended-workload.js'
import { HISTOGRAM_PATHS } from '../support/otel.js'
import { startPrometheus, type PrometheusServer } from '../support/prometheus-server.js'
import { connect, connectShared, makeLocker, uniqueGroup } from '../support/redis.js'

const RULES = join(import.meta.dirname, '..', '..', 'prometheus', 'alerts-otel.yml')
describe.each(HISTOGRAM_PATHS)(
  'Prometheus scraping the OpenTelemetry path (histograms through %s), real contended locks, alerts-otel.yml',
  (path) => {
    const GROUP = uniqueGroup('otelscrape')
    const G = `fencelock_lock_group="${GROUP}"`
    let server: Server
    let prometheus: PrometheusServer
    let meterProvider: MeterProvider
    const lockers: ReturnType<typeof makeLocker>[] = []
    let telemetry: OpenTelemetryLockInstrumentation
    let target = ''

    beforeAll(async () => {
      await connectShared()
      const histograms = path === 'the SDK' ? undefined : lockHistogramProducer()
      const exporter = new PrometheusExporter({
        preventServerStart: true,
        metricProducers: histograms ? [histograms] : [],
      })
      meterProvider = new MeterProvider({ readers: [exporter] })
      for (let i = 0; i < 3; i++) {
        const locker = makeLocker(connect(), { ttlMs: 5_000 })
        lockers.push(locker)
        // `groups`/`models`: their counters are reported at zero before the first scrape, so every
        // rate() below starts from a zero sample and counts the whole run.
        telemetry = instrumentOpenTelemetry(locker, {
          meterProvider,
          histograms,
          traces: false,
          groups: [GROUP],
          models: ['Product'],
        })
      }
      server = createServer((req, res) => exporter.getMetricsRequestHandler(req, res))
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
      target = `127.0.0.1:${(server.address() as AddressInfo).port}`
      prometheus = await startPrometheus({ config: scrapeConfig(target, RULES) })
    })

    afterAll(async () => {
      await prometheus?.stop()
      await new Promise((resolve) => server?.close(resolve))
      await meterProvider?.shutdown()
    })

    it('agrees with the measured wait P99 and success ratio, raw and through the shipped recording rules, and loads every rule healthy', async () => {
      await until('two scrapes of the zero series', async () => {
        const n = await scalar(
          prometheus,
          `count_over_time(fencelock_lock_acquires_total{${G},fencelock_lock_acquire_outcome="acquired"}[1m])`,
        )
        return n >= 2 ? n : undefined
      })
      setTimeout(() => {
        for (let i = 0; i < 3; i++)
          telemetry.onFencingRejection({ model: 'Product', operation: 'update', token: 1n, storedToken: 2n })
      }, 3_000)
      const measured = await contendedWorkload({
        lockers,
        group: GROUP,
        resources: 4,
        workersPerResource: 4,
        runMs: 6_000,
      })
      const { acquired, timeouts, unavailable } = measured
      const total = acquired + timeouts + unavailable
      const ratio = acquired / total
      expect(total).toBeGreaterThan(200)
      expect(ratio).toBeGreaterThan(0.3)
      expect(ratio).toBeLessThan(0.99)

      await until('the final scrape', async () =>
        (await scalar(prometheus, `sum(fencelock_lock_acquires_total{${G}})`)) === total ? true : undefined,
      )
      expect(
        await scalar(prometheus, `sum(fencelock_lock_acquires_total{${G},fencelock_lock_acquire_outcome="acquired"})`),
      ).toBe(acquired)
      expect(await scalar(prometheus, `sum(fencelock_lock_wait_time_count{${G}})`)).toBe(total)
      expect(
        await scalar(prometheus, `sum(fencelock_lock_acquires_total{${G},fencelock_lock_acquire_outcome="error"})`),
      ).toBe(unavailable)

      // alerts-otel.yml's recording rules record alerts.yml's series, with the `group` label.
      await expectPrometheusAgrees(prometheus, GROUP, measured, {
        waitP99: `histogram_quantile(0.99, sum(rate(fencelock_lock_wait_time_bucket{${G}}[1m])) by (le))`,
        successRatio: `sum(rate(fencelock_lock_acquires_total{${G},fencelock_lock_acquire_outcome="acquired"}[1m])) / sum(rate(fencelock_lock_acquires_total{${G}}[1m]))`,
      })
      expect(await scalar(prometheus, `job_group:fencelock_acquire:rate5m{group="${GROUP}"}`)).toBeGreaterThan(0)
      expect(await scalar(prometheus, `job_group:fencelock_lock_end:rate5m{group="${GROUP}"}`)).toBeGreaterThan(0)
      expect(await scalar(prometheus, `job_group:fencelock_expiry:ratio_rate5m{group="${GROUP}"}`)).toBe(0)
      expect(await scalar(prometheus, `job_group:fencelock_is_leader:sum{group="${GROUP}"}`)).toBe(0)
      expect(await scalar(prometheus, `sum(fencelock_lock_held{${G}})`)).toBe(0)
      expect(
        await scalar(
          prometheus,
          'sum(fencelock_fencing_writes_total{fencelock_fencing_model="Product",fencelock_fencing_outcome="refused"})',
        ),
      ).toBe(3)
      await until('the rejection rule', async () =>
        (await scalar(prometheus, 'job_model:fencelock_fencing_rejections:rate5m{model="Product"}')) > 0
          ? true
          : undefined,
      )

      // The exposition as the exporter writes it: names without a unit suffix, the unit in a
      // comment, the scope as labels, and target_info.
      const exposition = await (await fetch(`http://${target}/metrics`)).text()
      expect(exposition).toContain('# TYPE fencelock_lock_wait_time histogram')
      expect(exposition).toContain('# UNIT fencelock_lock_wait_time s')
      expect(exposition).toContain('# TYPE fencelock_lock_acquires_total counter')
      expect(exposition).toContain('# TYPE fencelock_lock_held gauge')
      expect(exposition).toMatch(
        new RegExp(
          `fencelock_lock_acquires_total\\{${G},fencelock_lock_acquire_outcome="acquired",otel_scope_name="@fencelock/metrics",otel_scope_version="[^"]+"\\} ${acquired}\\n`,
        ),
      )
      expect(exposition).toMatch(/^target_info\{/m)

      const rules = await prometheus.api<{
        groups: { rules: { name: string; health: string; lastError?: string }[] }[]
      }>('rules')
      const loaded = rules.data!.groups.flatMap((g) => g.rules)
      expect(loaded.map((r) => r.name)).toEqual(
        expect.arrayContaining(['FenceLockLowAcquireSuccess', 'FenceLockHighWaitP99', 'FenceLockHighExpiryRate']),
      )
      for (const r of loaded) expect(r.health, `${r.name} ${r.lastError ?? ''}`).toBe('ok')
    })
  },
)
