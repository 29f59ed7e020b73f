import type { LockLostReason } from './errors.js'

/**
 * Typed events emitted through the `onEvent` option. The metrics package subscribes to these;
 * this package never imports a metrics library.
 */
export type LockEvent =
  /** A lock was granted after `waitedMs` (0 when it was free) and `attempts` tries. */
  | { type: 'acquired'; resource: string; token: bigint; ttlMs: number; waitedMs: number; attempts: number }
  /** The first try of an acquire found the lock held; `holderTtlMs` is the holder's remaining PTTL. */
  | { type: 'contended'; resource: string; holderTtlMs: number }
  /** An acquire gave up after `waitedMs` with the lock still held by someone else. */
  | { type: 'timeout'; resource: string; waitedMs: number }
  /** An acquire gave up because the caller's signal aborted. */
  | { type: 'aborted'; resource: string; waitedMs: number }
  /**
   * One Redis call failed or timed out (a diagnostic: a blocked acquire may retry after it).
   * `token` is set for the calls of a granted lock (renew, extend, release).
   */
  | {
      type: 'error'
      resource: string
      operation: 'acquire' | 'renew' | 'extend' | 'release'
      error: Error
      token?: bigint
    }
  /** An acquire or tryAcquire ended with LockUnavailableError: its outcome, emitted once per call. */
  | { type: 'unavailable'; resource: string; waitedMs: number; error: Error }
  /** The lease was renewed (`auto`: by the watchdog). */
  | { type: 'extended'; resource: string; token: bigint; ttlMs: number; auto: boolean }
  /**
   * A held lock stopped being ours; `lock.signal` has aborted with a LockLostError. Also when its
   * lease ran out on our clock before it was released (`reason` `expired`). `autoExtend`: the
   * watchdog was renewing it (so a renewal failed for good).
   */
  | { type: 'lost'; resource: string; token: bigint; heldMs: number; reason: LockLostReason; autoExtend: boolean }
  /**
   * `release()` ran. `outcome` is `released` when it deleted our lock, `expired` when the lock had
   * already expired or been taken. `wasLost` is true when a `lost` event came first.
   */
  | {
      type: 'released'
      resource: string
      token: bigint
      heldMs: number
      outcome: 'released' | 'expired'
      wasLost: boolean
    }

  /**
   * A grant's token is not above one this Locker was granted for the resource before: the token
   * counter went back — a failover to a replica that had not seen the latest grants (the
   * `replicas` option prevents it), or clocks beyond docs/LOCK.md's assumption. The lock is
   * granted; the stores that check tokens refuse its writes (`StaleFencingTokenError`) until a
   * grant's token is above `previous` again. (Checked while someone listens, against the last 1 024
   * resources this Locker was granted.)
   */
  | { type: 'token-regressed'; resource: string; token: bigint; previous: bigint }
  /**
   * An acquire re-entered a lock its async context holds (reentrancy): no round trip, the same
   * token. `holds`: the handles of the grant not yet released, this one included. No `acquired`
   * or `released` event comes for a re-entry: the grant is held once.
   */
  | { type: 'reentered'; resource: string; token: bigint; holds: number }

  /** `locker.lead()`: this process became the leader of `resource`; `term` is its lease's token. */
  | { type: 'elected'; resource: string; term: bigint; waitedMs: number }
  /** `locker.lead()`: this process's term ended after `ledMs` (`reason`: lost, stopped, closed, failed). */
  | { type: 'demoted'; resource: string; term: bigint; ledMs: number; reason: 'lost' | 'stopped' | 'closed' | 'failed' }
  /**
   * `locker.runOnce()`: what this instance did with one tick (`resource` is the job's key). A tick no
   * instance reports as `ran` was not run; each instance reports it as skipped, failed, lost or missed.
   */
  | {
      type: 'tick'
      resource: string
      tick: number
      outcome: 'ran' | 'skipped' | 'failed' | 'lost' | 'missed'
      token?: bigint
    }

export type LockEventType = LockEvent['type']
