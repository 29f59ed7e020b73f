/**
 * Turns the counters scraped from every instance, once a second, into the dashboard's points:
 * rates, ratios and wait quantiles over a short sliding window, summed over instances — what the
 * recording rules of `packages/metrics/prometheus/alerts.yml` compute over 5 minutes, here over
 * a few seconds so a run's effect shows at once.
 *
 * Counters are per instance and monotonic, so each instance's increase is taken on its own and
 * then summed (summing first would turn one instance's restart into a drop of the total):
 * - an instance seen for the first time started from zero (the watched instances are processes
 *   the demo has just started), so its whole value is its first increase;
 * - a value lower than the previous one is a restart: the new value is the increase (PromQL's
 *   reset rule);
 * - an instance that does not answer (frozen by the pause chaos) keeps its last values, and its
 *   next answer carries everything it counted meanwhile.
 */
import type { MetricsPoint } from './wire.js'
import { bucketQuantile, type LockCounters, type WaitBuckets } from './prometheus-text.js'

/** Defaults of a {@link MetricsWindow}. */
export const METRICS_WINDOW_DEFAULTS = Object.freeze({
  /** Samples in the sliding window of rates, ratios and quantiles (about seconds). */
  windowSamples: 5,
})

interface Increase {
  acquired: number
  acquires: number
  released: number
  expired: number
  lost: number
  fencingRejections: number
  waitBuckets: WaitBuckets
  elapsedMs: number
}

const zero = (): Increase => ({ acquired: 0, acquires: 0, released: 0, expired: 0, lost: 0, fencingRejections: 0, waitBuckets: new Map(), elapsedMs: 0 })

const increaseOf = (current: number, previous: number | undefined) => (previous === undefined || current < previous ? current : current - previous)

/** The sliding window over every watched instance. */
export class MetricsWindow {
  readonly #windowSamples: number
  readonly #last = new Map<string, LockCounters>()
  readonly #samples: Increase[] = []
  #lastAtMs: number | undefined

  constructor(options: { windowSamples?: number } = {}) {
    this.#windowSamples = options.windowSamples ?? METRICS_WINDOW_DEFAULTS.windowSamples
    if (!Number.isInteger(this.#windowSamples) || this.#windowSamples < 1) throw new RangeError('windowSamples must be a positive integer')
  }

  /**
   * Adds one sample. `scrapes` has an entry for every watched instance (keyed by something that
   * changes when the process does, e.g. url and pid): its counters, or undefined when it did not
   * answer. Instances no longer watched are forgotten.
   * @example
   * ```ts
   * const window = new MetricsWindow()
   * const point = window.add(Date.now(), new Map([['http://127.0.0.1:3001#4242', parseLockCounters(text)]]))
   * ```
   */
  add(atMs: number, scrapes: ReadonlyMap<string, LockCounters | undefined>): MetricsPoint {
    const sample = zero()
    sample.elapsedMs = this.#lastAtMs === undefined ? 1_000 : Math.max(1, atMs - this.#lastAtMs)
    this.#lastAtMs = atMs
    let up = 0
    for (const [key, counters] of scrapes) {
      if (counters === undefined) continue
      up++
      const previous = this.#last.get(key)
      sample.acquired += increaseOf(counters.acquired, previous?.acquired)
      sample.acquires += increaseOf(counters.acquires, previous?.acquires)
      sample.released += increaseOf(counters.released, previous?.released)
      sample.expired += increaseOf(counters.expired, previous?.expired)
      sample.lost += increaseOf(counters.lost, previous?.lost)
      sample.fencingRejections += increaseOf(counters.fencingRejections, previous?.fencingRejections)
      for (const [bound, count] of counters.waitBuckets) {
        sample.waitBuckets.set(bound, (sample.waitBuckets.get(bound) ?? 0) + increaseOf(count, previous?.waitBuckets.get(bound)))
      }
      this.#last.set(key, counters)
    }
    for (const key of [...this.#last.keys()]) if (!scrapes.has(key)) this.#last.delete(key)
    this.#samples.push(sample)
    if (this.#samples.length > this.#windowSamples) this.#samples.shift()

    const w = zero()
    for (const s of this.#samples) {
      w.acquired += s.acquired
      w.acquires += s.acquires
      w.released += s.released
      w.expired += s.expired
      w.lost += s.lost
      w.elapsedMs += s.elapsedMs
      for (const [bound, count] of s.waitBuckets) w.waitBuckets.set(bound, (w.waitBuckets.get(bound) ?? 0) + count)
    }
    const ended = w.released + w.expired + w.lost
    const p50 = bucketQuantile(0.5, w.waitBuckets)
    const p99 = bucketQuantile(0.99, w.waitBuckets)
    return {
      atMs,
      acquireRate: w.acquires / (w.elapsedMs / 1000),
      successRatio: w.acquires > 0 ? w.acquired / w.acquires : null,
      waitP50Ms: p50 === null ? null : p50 * 1000,
      waitP99Ms: p99 === null ? null : p99 * 1000,
      expiryRatio: ended > 0 ? (w.expired + w.lost) / ended : null,
      lostLocks: sample.lost,
      fencingRejections: sample.fencingRejections,
      instancesUp: up,
      instancesWatched: scrapes.size,
    }
  }
}
