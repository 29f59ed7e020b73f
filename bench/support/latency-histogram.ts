// Latencies in a fixed amount of memory: buckets 1 % wide on a log scale from 1 µs to ~30 min.
// The fault runs record into these rather than into growing arrays, so the harness itself does
// not grow the RSS it measures, and a percentile costs one pass over the buckets, not a sort.

/** Bucket i holds values in [MIN_MS × GROWTH^i, MIN_MS × GROWTH^(i+1)). */
const MIN_MS = 0.001
const GROWTH = 1.01
const BUCKETS = Math.ceil(Math.log(1_800_000 / MIN_MS) / Math.log(GROWTH)) + 1

export class LatencyHistogram {
  readonly #counts = new Uint32Array(BUCKETS)
  #count = 0
  #max = Number.NaN

  get count(): number {
    return this.#count
  }

  /** The largest value recorded, exactly; NaN when empty. */
  get max(): number {
    return this.#max
  }

  record(ms: number): void {
    const i = ms <= MIN_MS ? 0 : Math.min(BUCKETS - 1, Math.floor(Math.log(ms / MIN_MS) / Math.log(GROWTH)))
    this.#counts[i]!++
    this.#count++
    if (!(ms <= this.#max)) this.#max = ms
  }

  /** A copy with `more` values recorded too. */
  with(more: readonly number[]): LatencyHistogram {
    const copy = new LatencyHistogram()
    copy.#counts.set(this.#counts)
    copy.#count = this.#count
    copy.#max = this.#max
    for (const ms of more) copy.record(ms)
    return copy
  }

  /** The q-quantile (0..1): the middle of its bucket (within 0.5 %), capped at the max; NaN when empty. */
  quantile(q: number): number {
    if (this.#count === 0) return Number.NaN
    const rank = Math.min(this.#count, Math.max(1, Math.ceil(q * this.#count)))
    let seen = 0
    for (let i = 0; i < BUCKETS; i++) {
      seen += this.#counts[i]!
      if (seen >= rank) return Math.min(this.#max, MIN_MS * GROWTH ** (i + 0.5))
    }
    return this.#max
  }
}
