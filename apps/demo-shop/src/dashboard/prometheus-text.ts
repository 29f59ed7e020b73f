/**
 * Reads the few FenceLock series the dashboard needs out of an instance's `/metrics` (Prometheus
 * text format 0.0.4, as prom-client writes it), summed over the `group` and `model` labels.
 */

/** Buckets of `fencelock_wait_seconds`: upper bound in seconds (`Infinity` for +Inf) → cumulative count. */
export type WaitBuckets = Map<number, number>

/** One instance's FenceLock counters at one scrape, summed over groups. All are monotonic. */
export interface LockCounters {
  readonly acquired: number
  /** Acquires of every outcome (acquired, timeout, aborted, error). */
  readonly acquires: number
  readonly released: number
  readonly expired: number
  readonly lost: number
  readonly fencingRejections: number
  readonly waitBuckets: WaitBuckets
}

const SAMPLE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)(?:\s+\d+)?$/
const LABEL = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g

function parseValue(raw: string): number {
  if (raw === '+Inf') return Infinity
  if (raw === '-Inf') return -Infinity
  return Number(raw)
}

/**
 * Parses `text` into the counters the dashboard uses. Unknown series are skipped; a line that
 * does not parse is skipped too (a scrape is best-effort, the next one comes in a second).
 */
export function parseLockCounters(text: string, prefix = 'fencelock_'): LockCounters {
  let acquired = 0
  let acquires = 0
  let released = 0
  let expired = 0
  let lost = 0
  let fencingRejections = 0
  const waitBuckets: WaitBuckets = new Map()
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#') || !line.startsWith(prefix)) continue
    const m = SAMPLE.exec(line)
    if (m === null) continue
    const name = (m[1] as string).slice(prefix.length)
    const value = parseValue(m[3] as string)
    if (!Number.isFinite(value)) continue
    const labels = new Map<string, string>()
    for (const l of (m[2] ?? '').matchAll(LABEL)) labels.set(l[1] as string, l[2] as string)
    switch (name) {
      case 'acquire_total':
        acquires += value
        if (labels.get('outcome') === 'acquired') acquired += value
        break
      case 'release_total':
        if (labels.get('outcome') === 'released') released += value
        else if (labels.get('outcome') === 'expired') expired += value
        break
      case 'lost_total':
        lost += value
        break
      case 'fencing_rejections_total':
        fencingRejections += value
        break
      case 'wait_seconds_bucket': {
        const le = labels.get('le')
        if (le === undefined) break
        const bound = parseValue(le)
        if (Number.isNaN(bound)) break
        waitBuckets.set(bound, (waitBuckets.get(bound) ?? 0) + value)
        break
      }
    }
  }
  return { acquired, acquires, released, expired, lost, fencingRejections, waitBuckets }
}

/**
 * The `q` quantile (0..1) of cumulative `buckets`, the way PromQL's `histogram_quantile` does it:
 * linear inside the bucket the rank falls in, the lower bound of the first bucket taken as 0, and
 * the highest finite bound when the rank falls in +Inf. Null when there is no observation.
 */
export function bucketQuantile(q: number, buckets: WaitBuckets): number | null {
  const bounds = [...buckets.keys()].sort((a, b) => a - b)
  const total = buckets.get(Infinity) ?? (bounds.length > 0 ? (buckets.get(bounds[bounds.length - 1] as number) as number) : 0)
  if (!(total > 0)) return null
  const rank = q * total
  let lower = 0
  let below = 0
  for (const bound of bounds) {
    const count = buckets.get(bound) as number
    if (count >= rank) {
      if (bound === Infinity) return lower
      const inBucket = count - below
      return inBucket <= 0 ? bound : lower + (bound - lower) * ((rank - below) / inBucket)
    }
    lower = bound
    below = count
  }
  return lower
}
