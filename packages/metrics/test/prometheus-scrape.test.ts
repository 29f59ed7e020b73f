/**
 * End to end: a real Prometheus scrapes (every second) a test HTTP server that serves a registry
 * filled by real contended locks on Redis. What Prometheus then computes (wait P99 by
 * histogram_quantile, the acquire success ratio, and the shipped recording rules) agrees with
 * what the test measured itself around each acquire, within the histogram's bucket resolution.
 * Every dashboard query returns data from the same scrape.
 */
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { join } from 'node:path'
import { Registry } from 'prom-client'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { instrument, metricsHandler } from '../src/index.js'
import { contendedWorkload, expectPrometheusAgrees, scalar, scrapeConfig, until } from './support/contended-workload.js'
import { loadDashboard, panelQueries, substituteTemplateVars } from './support/dashboard.js'
import { startPrometheus, type PrometheusServer } from './support/prometheus-server.js'
import { connect, connectShared, makeLocker, uniqueGroup } from './support/redis.js'

const RULES = join(import.meta.dirname, '..', 'prometheus', 'alerts.yml')
const GROUP = uniqueGroup('scrape')
const RESOURCES = 4
const WORKERS_PER_RESOURCE = 4
const LOCKERS = 3
const RUN_MS = 6_000

describe('Prometheus scraping real contended locks', () => {
  const registry = new Registry()
  let server: Server
  let prometheus: PrometheusServer

  beforeAll(async () => {
    await connectShared()
    const metrics = Array.from({ length: LOCKERS }, () => {
      const locker = makeLocker(connect(), { ttlMs: 5_000 })
      // `groups` creates the group's series at zero before the first scrape, so every rate()
      // below starts from a zero sample and counts the whole run.
      return { locker, metrics: instrument(locker, { registry, groups: [GROUP], models: ['Product'] }) }
    })
    workers.lockers = metrics.map((m) => m.locker)
    fencing.onRejection = metrics[0]!.metrics.onFencingRejection
    server = createServer(metricsHandler(registry))
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    const target = `127.0.0.1:${(server.address() as AddressInfo).port}`
    prometheus = await startPrometheus({ config: scrapeConfig(target, RULES) })
  })

  afterAll(async () => {
    await prometheus?.stop()
    await new Promise((resolve) => server?.close(resolve))
  })

  const workers = { lockers: [] as ReturnType<typeof makeLocker>[] }
  const fencing = {
    onRejection: (_: { model: string; operation: string; token: bigint; storedToken: bigint | undefined }) => {},
  }

  it('agrees with the measured wait P99 and success ratio', async () => {
    // Zeros first: at least two scrapes of the empty group before any lock is taken.
    await until('two scrapes of the zero series', async () => {
      const n = await scalar(
        prometheus,
        `count_over_time(fencelock_acquire_total{group="${GROUP}",outcome="acquired"}[1m])`,
      )
      return n >= 2 ? n : undefined
    })

    // The workload: RESOURCES resources, each contended by WORKERS_PER_RESOURCE workers spread
    // over LOCKERS lockers (each its own connection). Holds of 1-20 ms. Half the workers wait at
    // most 40 ms and time out now and then; the others wait up to 3 s. Under heavy load a call
    // can still end unavailable (outcome error, its wait observed): counted apart, and compared
    // one to one with the error series.
    // A few stale writes rejected by the fence, so the dashboard's rejection panel has data.
    setTimeout(() => {
      for (let i = 0; i < 3; i++)
        fencing.onRejection({ model: 'Product', operation: 'update', token: 1n, storedToken: 2n })
    }, RUN_MS / 2)
    const measured = await contendedWorkload({
      lockers: workers.lockers,
      group: GROUP,
      resources: RESOURCES,
      workersPerResource: WORKERS_PER_RESOURCE,
      runMs: RUN_MS,
    })
    const { acquired, timeouts, unavailable } = measured

    const total = acquired + timeouts + unavailable
    const ratio = acquired / total
    expect(total).toBeGreaterThan(200)
    expect(ratio).toBeGreaterThan(0.3)
    expect(ratio).toBeLessThan(0.99)

    // Wait until Prometheus has scraped the final values.
    await until('the final scrape', async () =>
      (await scalar(prometheus, `sum(fencelock_acquire_total{group="${GROUP}"})`)) === total ? true : undefined,
    )
    expect(await scalar(prometheus, `sum(fencelock_acquire_total{group="${GROUP}",outcome="acquired"})`)).toBe(acquired)
    expect(await scalar(prometheus, `sum(fencelock_wait_seconds_count{group="${GROUP}"})`)).toBe(total)
    // One `unavailable` event per call that failed so: the error series counts calls, not round trips.
    const errors = await scalar(prometheus, `sum(fencelock_acquire_total{group="${GROUP}",outcome="error"})`)
    expect(errors).toBe(unavailable)

    await expectPrometheusAgrees(prometheus, GROUP, measured, {
      waitP99: `histogram_quantile(0.99, sum(rate(fencelock_wait_seconds_bucket{group="${GROUP}"}[1m])) by (le))`,
      successRatio: `sum(rate(fencelock_acquire_total{group="${GROUP}",outcome="acquired"}[1m])) / sum(rate(fencelock_acquire_total{group="${GROUP}"}[1m]))`,
    })
    // Nothing expired or was lost: every lock was released in time.
    expect(await scalar(prometheus, `job_group:fencelock_expiry:ratio_rate5m{group="${GROUP}"}`)).toBe(0)
    expect(await scalar(prometheus, `sum(fencelock_held{group="${GROUP}"})`)).toBe(0)
    expect(await scalar(prometheus, 'sum(fencelock_fencing_rejections_total{model="Product"})')).toBe(3)

    // Every dashboard query has data.
    for (const { panel, refId, expr } of panelQueries(loadDashboard())) {
      const result = await prometheus.query(substituteTemplateVars(expr))
      expect(result.length, `${panel} ${refId} returned no series`).toBeGreaterThan(0)
    }

    // The rules loaded without error.
    const rules = await prometheus.api<{ groups: { rules: { name: string; health: string }[] }[] }>('rules')
    const loaded = rules.data!.groups.flatMap((g) => g.rules)
    expect(loaded.map((r) => r.name)).toEqual(
      expect.arrayContaining(['FenceLockLowAcquireSuccess', 'FenceLockHighWaitP99', 'FenceLockHighExpiryRate']),
    )
    for (const r of loaded) expect(r.health, r.name).toBe('ok')
  })
})
