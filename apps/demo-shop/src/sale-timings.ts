/**
 * Where the time of a sale goes (issue 23): an instance started with `SHOP_SALE_TIMERS=1` times
 * each purchase that ordered a unit, in consecutive phases on the monotonic clock:
 *
 * - `lock`: from the purchase's start to the lock granted (the wait for the holder before it and
 *   the acquire's own round trips; `unsafe`: nothing);
 * - `read`: the stock row read (in `fenced` mode the `UPDATE ... RETURNING` that raises its fence);
 * - `gateway`: the gateway's authorization call;
 * - `write`: the transaction that writes the stock and creates the order;
 * - `release`: from the work's end to the lock released (the release's round trip).
 *
 * `lock` and `release` are lock time, the rest is held time: a hot product sells at most one unit
 * per `read + gateway + write` (plus the hand-over to the next waiter) per segment.
 *
 * With segments (segments.ts), `lock` runs from the purchase's start to the grant of the segment
 * that sold, so it includes the one-try probes of busy segments, the race's wait and the reads
 * of segments found empty; `release` runs until every racer of the purchase has settled.
 */

/** The phases, in order. */
export const SALE_PHASES = Object.freeze(['lock', 'read', 'gateway', 'write', 'release'] as const)
export type SalePhase = (typeof SALE_PHASES)[number]

/** Sums of the timed sales' phases, in ms. */
export type SaleTimingTotals = { sales: number } & Record<SalePhase, number>

/**
 * One sale being timed: `mark(phase)` closes the phase that ran since the previous mark, at
 * `at` (a `performance.now()` taken earlier, for a phase known to have ended before the mark) or now.
 */
export interface SaleTimer {
  mark(phase: SalePhase, at?: number): void
  /** Counts the sale (a purchase that did not order a unit is never done, so never counted). */
  done(): void
}

/** The totals of one process. */
export class SaleTimings {
  readonly #totals: SaleTimingTotals = { sales: 0, lock: 0, read: 0, gateway: 0, write: 0, release: 0 }

  start(): SaleTimer {
    const phases: Partial<Record<SalePhase, number>> = {}
    let last = performance.now()
    return {
      mark: (phase, at) => {
        const now = at ?? performance.now()
        phases[phase] = (phases[phase] ?? 0) + (now - last)
        last = now
      },
      done: () => {
        this.#totals.sales++
        for (const phase of SALE_PHASES) this.#totals[phase] += phases[phase] ?? 0
      },
    }
  }

  totals(): SaleTimingTotals {
    return { ...this.#totals }
  }
}

/** The sum of several processes' totals. */
export function sumSaleTimings(all: readonly SaleTimingTotals[]): SaleTimingTotals {
  const sum: SaleTimingTotals = { sales: 0, lock: 0, read: 0, gateway: 0, write: 0, release: 0 }
  for (const t of all) {
    sum.sales += t.sales
    for (const phase of SALE_PHASES) sum[phase] += t[phase]
  }
  return sum
}
