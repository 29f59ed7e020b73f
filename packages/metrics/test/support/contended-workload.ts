/**
 * The workload of the end-to-end scrape tests, and what they compare Prometheus with: resources
 * contended by workers spread over several Lockers (each its own connection), holds of 1-20 ms,
 * half the workers waiting at most 40 ms (so some time out), the others up to 3 s; every wait
 * measured around the call.
 */
import { LockTimeoutError, LockUnavailableError, type Locker } from '@fencelock/lock'
import { expect } from 'vitest'
import { WAIT_BUCKETS_SECONDS } from '../../src/measurements.js'
import type { PrometheusServer } from './prometheus-server.js'
import { sleep } from './redis.js'

export interface WorkloadResult {
  /** Every call's wait, seconds, whatever its outcome. */
  readonly waits: number[]
  readonly acquired: number
  readonly timeouts: number
  /** Calls that ended unavailable (Redis slow under load): outcome error, their wait observed. */
  readonly unavailable: number
}

/** Runs `resources` × `workersPerResource` workers over `lockers` on `${group}:<i>` for `runMs`. */
export async function contendedWorkload(options: {
  readonly lockers: readonly Locker[]
  readonly group: string
  readonly resources: number
  readonly workersPerResource: number
  readonly runMs: number
}): Promise<WorkloadResult> {
  const { lockers, group, resources, workersPerResource, runMs } = options
  const waits: number[] = []
  let acquired = 0
  let timeouts = 0
  let unavailable = 0
  const stopAt = performance.now() + runMs
  const worker = async (index: number) => {
    const locker = lockers[index % lockers.length]!
    const resource = `${group}:${index % resources}`
    const waitMs = index % 2 === 0 ? 40 : 3_000
    while (performance.now() < stopAt) {
      const start = performance.now()
      try {
        const lock = await locker.acquire(resource, { waitMs })
        waits.push((performance.now() - start) / 1000)
        acquired++
        await sleep(1 + Math.random() * 19)
        await lock.release()
      } catch (error) {
        if (error instanceof LockUnavailableError) {
          waits.push((performance.now() - start) / 1000)
          unavailable++
          continue
        }
        if (!(error instanceof LockTimeoutError)) throw error
        waits.push((performance.now() - start) / 1000)
        timeouts++
      }
    }
  }
  await Promise.all(Array.from({ length: resources * workersPerResource }, (_, i) => worker(i)))
  return { waits, acquired, timeouts, unavailable }
}

/** Index of the wait bucket a value falls in: 0 for ≤ 0.5 ms, ..., the last for > 30 s (+Inf). */
export function bucketOf(seconds: number): number {
  const i = WAIT_BUCKETS_SECONDS.findIndex((le) => seconds <= le)
  return i === -1 ? WAIT_BUCKETS_SECONDS.length : i
}

/** The q-quantile of sorted values, by nearest rank (what a histogram_quantile estimates). */
export function quantile(sorted: number[], q: number): number {
  return sorted[Math.max(0, Math.ceil(q * sorted.length) - 1)]!
}

/** The value of an instant query that must return exactly one sample. */
export async function scalar(prometheus: PrometheusServer, expr: string): Promise<number> {
  const result = await prometheus.query(expr)
  if (result.length !== 1) throw new Error(`${expr}: expected one sample, got ${JSON.stringify(result)}`)
  return Number(result[0]!.value[1])
}

/** Polls `probe` (every 200 ms; a failed probe counts as not yet) until it returns a value. */
export async function until<T>(what: string, probe: () => Promise<T | undefined>, ms = 10_000): Promise<T> {
  const end = performance.now() + ms
  for (;;) {
    const value = await probe().catch(() => undefined)
    if (value !== undefined) return value
    if (performance.now() > end) throw new Error(`${what}: not within ${ms} ms`)
    await sleep(200)
  }
}

/** A prometheus.yml that scrapes `target` every second and loads `rules`. */
export function scrapeConfig(target: string, rules: string): string {
  return [
    'global:',
    '  scrape_interval: 1s',
    '  evaluation_interval: 1s',
    'rule_files:',
    `  - ${JSON.stringify(rules)}`,
    'scrape_configs:',
    '  - job_name: fencelock-it',
    '    static_configs:',
    `      - targets: ['${target}']`,
  ].join('\n')
}

/**
 * What both scrape tests (prom-client's and OpenTelemetry's exporter) check against the real
 * Prometheus, each with its own series names: the wait P99 by `histogram_quantile` within one
 * bucket of the measured one, the acquire success ratio within 0.01, and the shipped recording
 * rules' ratio and P99 (`job_group:*`, recorded under the `group` label) the same.
 * @param queries the PromQL of the wait histogram's rate of buckets and of the success ratio, over `[1m]`.
 */
export async function expectPrometheusAgrees(
  prometheus: PrometheusServer,
  group: string,
  measured: WorkloadResult,
  queries: { readonly waitP99: string; readonly successRatio: string },
): Promise<void> {
  const { waits, acquired, timeouts, unavailable } = measured
  const ratio = acquired / (acquired + timeouts + unavailable)
  const trueP99 = quantile(
    [...waits].sort((a, b) => a - b),
    0.99,
  )
  const promP99 = await scalar(prometheus, queries.waitP99)
  const promRatio = await scalar(prometheus, queries.successRatio)
  const report = `measured p99 ${trueP99.toFixed(4)} s (bucket ${bucketOf(trueP99)}), Prometheus ${promP99.toFixed(4)} s (bucket ${bucketOf(promP99)}); ratio measured ${ratio.toFixed(4)}, Prometheus ${promRatio.toFixed(4)}; ${acquired} acquired, ${timeouts} timeouts, ${unavailable} unavailable`
  console.log(report)
  expect(Math.abs(bucketOf(trueP99) - bucketOf(promP99)), report).toBeLessThanOrEqual(1)
  expect(Math.abs(promRatio - ratio), report).toBeLessThan(0.01)
  // The recording rules, evaluated by Prometheus itself on the same data.
  const ruleRatio = await until('the recording rules', async () => {
    const r = await prometheus.query(`job_group:fencelock_acquire_success:ratio_rate5m{group="${group}"}`)
    const v = Number(r[0]?.value[1])
    return Math.abs(v - promRatio) < 1e-9 ? v : undefined
  })
  expect(Math.abs(ruleRatio - ratio)).toBeLessThan(0.01)
  const ruleP99 = await scalar(prometheus, `job_group:fencelock_wait_seconds:p99_rate5m{group="${group}"}`)
  expect(Math.abs(bucketOf(trueP99) - bucketOf(ruleP99)), `rule p99 ${ruleP99}`).toBeLessThanOrEqual(1)
}
