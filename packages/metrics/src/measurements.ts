/**
 * What the lock's events are counted as, whichever library exports it (prom-client from the main
 * entry, OpenTelemetry from `@fencelock/metrics/opentelemetry`): the outcomes, the buckets and the
 * counts of one group. Imports nothing at run time, so both entries can share it.
 */

/**
 * Buckets of the wait histogram, in seconds. An uncontended acquire is one Redis round trip
 * (0.1-0.5 ms on a LAN), so 0.5 ms is the first bucket and 1-5 ms still tells a free lock from a
 * short queue; contended waits are a holder's critical section (tens of ms to seconds). 1 s is a
 * boundary because the `FenceLockHighWaitP99` alert compares the P99 with it: the estimate
 * exceeds 1 exactly when more than 1 % of waits were longer than 1 s, whatever the interpolation
 * inside a bucket. 10 s is the lock's default `waitMs`, so default timeouts land in (10, 30];
 * a wait past 30 s is outside what a lease lock is for, and +Inf catches it.
 * prom-client's defaults (5 ms to 10 s, for web requests) would put every uncontended acquire in
 * the first bucket and make the P50 of a healthy system meaningless; OpenTelemetry's (0 to 10 000,
 * meant for milliseconds) would put every wait under 5 s in one bucket.
 */
export const WAIT_BUCKETS_SECONDS: readonly number[] = Object.freeze([
  0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30,
])

/**
 * Buckets of the hold histogram, in seconds: from a 1 ms critical section to 5 minutes.
 * 30 s is the lock's default TTL; longer holds exist only with the watchdog (`using()`), so the
 * buckets past it are coarse.
 */
export const HOLD_BUCKETS_SECONDS: readonly number[] = Object.freeze([
  0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300,
])

/**
 * The bucket of `value` among ascending upper `bounds` (inclusive, as Prometheus' `le` and
 * OpenTelemetry's explicit buckets): the first bound it does not exceed, or `bounds.length` above
 * them all. A linear search: the lock's histograms have 15 and 16 bounds, and most values land in
 * the first few.
 */
export function bucketIndex(bounds: readonly number[], value: number): number {
  let i = 0
  while (i < bounds.length && value > bounds[i]!) i++
  return i
}

/** Outcomes of an acquire. */
export const ACQUIRE_OUTCOMES = Object.freeze(['acquired', 'timeout', 'aborted', 'error'] as const)
/** Outcomes of a release of a held lock. */
export const RELEASE_OUTCOMES = Object.freeze(['released', 'expired'] as const)
/** Outcomes of a watchdog renewal. */
export const RENEW_OUTCOMES = Object.freeze(['ok', 'lost', 'error'] as const)

export type AcquireOutcome = (typeof ACQUIRE_OUTCOMES)[number]
export type ReleaseOutcome = (typeof RELEASE_OUTCOMES)[number]
export type RenewOutcome = (typeof RENEW_OUTCOMES)[number]

/**
 * The counts of one group that the lock's events change. The events only add to these plain
 * numbers (and observe the two histograms); each exporter reads them when it is collected. What a
 * counter field holds is the exporter's choice: prom-client's path hands the increments to its
 * counters and zeroes them, OpenTelemetry's path reports them as they are (cumulative). `held` and
 * `leading` are absolute in both.
 */
export interface GroupTally {
  readonly acquire: Record<AcquireOutcome, number>
  readonly release: Record<ReleaseOutcome, number>
  readonly renew: Record<RenewOutcome, number>
  lost: number
  /** Locks granted and not yet ended. */
  held: number
  /** Elections won (`locker.lead()`). */
  elected: number
  /** Names of the group this process leads now. */
  leading: number
  /** Records one acquire's wait, in seconds. */
  observeWait(seconds: number): void
  /** Records one lock's hold, in seconds. */
  observeHold(seconds: number): void
}

/** A group's counts, at zero, whatever exports them (prom-client or OpenTelemetry): each exporter's state adds how it records the histograms. */
export abstract class GroupCounts implements GroupTally {
  readonly group: string
  readonly acquire: Record<AcquireOutcome, number> = { acquired: 0, timeout: 0, aborted: 0, error: 0 }
  readonly release: Record<ReleaseOutcome, number> = { released: 0, expired: 0 }
  readonly renew: Record<RenewOutcome, number> = { ok: 0, lost: 0, error: 0 }
  lost = 0
  held = 0
  /** Elections won, not yet handed to the counter. */
  elected = 0
  /** Names of the group this process leads now (absolute). */
  leading = 0

  constructor(group: string) {
    this.group = group
  }

  abstract observeWait(seconds: number): void
  abstract observeHold(seconds: number): void
}
