/**
 * The seam under the Locker: a {@link LockBackend} owns the Redis client(s), the scripts and the
 * formats of what they write, and does each round trip with its deadline. The Locker, its wait
 * queues and its locks see only outcomes. One backend runs on a single Redis (also Sentinel or
 * Cluster through ioredis: redis-backend.ts); the quorum backend over N independent masters
 * (quorum/quorum-backend.ts) implements the same interface, doing each call on every node with a
 * per-node deadline and answering with the majority's outcome. The contract suite
 * (test/contract) runs the same Locker tests over every backend.
 */
import type { LockInspection } from '../family/inspect.js'
import type { ResourceKeys } from '../keys.js'

/** A resource as a backend knows it: its name, checked, and its key names (the same on every node). */
export interface LockResource {
  readonly name: string
  readonly keys: ResourceKeys
}

/**
 * How a try treats the resource's queue in Redis (the fair queue across lockers):
 * - `none`: a single try; it never joins the queue (but takes a lock handed to our locker);
 * - `join`: on a miss, join the queue (or keep our place) and mark the holder, so that the
 *   holder's release hands the lock on; a grant takes our locker out of the queue;
 * - `stay`: as `join`, and more of our waiters wait: keep our place after a grant too.
 */
export type QueueMode = 'none' | 'join' | 'stay'

/** One acquire attempt. */
export interface AcquireRequest {
  readonly ttlMs: number
  /** performance.now() when the attempt is sent; the lease's validity is measured from here. */
  readonly sentAt: number
  /**
   * performance.now() by which the caller stops waiting for a held lock; undefined when it does
   * not wait at all. Each call gets `commandTimeoutMs` at most, and no more than this, except
   * that the first attempt of an acquire always gets time for its round trip.
   */
  readonly waitUntil: number | undefined
  /** The first attempt of an acquire: it gets its round trip whatever the wait (see above). */
  readonly first: boolean
  readonly queue: QueueMode
}

/** What an acquire attempt came to. */
export type AcquireOutcome =
  | {
      readonly granted: true
      /** Proves ownership to extend and release; never leaves the backend's users. */
      readonly ownerId: string
      readonly token: bigint
      /**
       * performance.now() until which the lease is ours for sure: from the send time (single
       * Redis), or less the elapsed time and clock drift (quorum).
       */
      readonly validUntil: number
      /** The lock had been handed to our locker (the fair queue's turn came). */
      readonly handedOver: boolean
    }
  | {
      readonly granted: false
      /** The holder's remaining lease in ms (-1: no expiry, or unknown). */
      readonly holderTtlMs: number
      readonly error?: undefined
    }
  | {
      readonly granted: false
      /**
       * Why the attempt failed. A `LockError` (a misconfiguration only I/O could show, such as
       * quorum nodes that are one server) ends the acquire at once; any other is a Redis failure
       * the caller may wait out.
       */
      readonly error: Error
      /**
       * The attempt ran out of the caller's remaining wait, not of `commandTimeoutMs`. That says
       * nothing about Redis (a loaded event loop does it too), so it never turns a held lock
       * seen before into "unavailable".
       */
      readonly cut: boolean
    }

/** What a release did: nothing (the lock was not ours), freed it, or handed it to a queued locker. */
export type ReleaseOutcome = { readonly freed: false } | { readonly freed: true; readonly handedTo: string | undefined }

/** What a backend reports to its Locker, from its subscription(s). */
export interface BackendListener {
  /**
   * A release was announced (by another locker). `handedTo`: the locker it was handed to, and
   * only that one should try; undefined when it was freed for anyone. `handoffMs`: how long the
   * hand-off holds. `next`: the locker queued behind `handedTo`, which should try when the
   * hand-off runs out, in case `handedTo` never comes.
   */
  released(resource: string, handedTo: string | undefined, handoffMs: number, next: string | undefined): void
  /** The subscription was (re)established: messages may have been missed meanwhile. */
  reconnected(): void
}

/**
 * The round trips of a lock. Every call has a deadline (`commandTimeoutMs` unless said
 * otherwise); none ever rejects with anything but an Error, and nothing a late reply brings is
 * left behind: a grant that answers after its deadline is released again, a queue joined by a
 * late reply is left when nobody here waits for it.
 */
export interface LockBackend {
  /** The id of this locker in the resource queues and release messages. Not a secret. */
  readonly lockerId: string
  /**
   * The resource's checked name and keys (cached).
   * @throws InvalidLockOptionError for a bad name, before any I/O.
   */
  resource(name: string): LockResource
  acquire(resource: LockResource, request: AcquireRequest): Promise<AcquireOutcome>
  /**
   * Owner-checked renewal of the lease to `ttlMs`, within `timeoutMs`.
   * @returns the new validity (performance.now() ms), or undefined when the lock is not ours.
   * @throws on a failed call or a missed deadline.
   */
  extend(resource: LockResource, ownerId: string, ttlMs: number, timeoutMs: number): Promise<number | undefined>
  /**
   * Owner-checked release; when lockers wait in the resource's queue, hands the lock to the one
   * that waited longest. A hand-off whose first step answers late is still completed.
   * `handOnAtOnce`: one call that hands on or frees by itself (the hand-off script), where the
   * usual release is a lean first call and, for a key a waiter marked, a second one.
   * @throws on a failed call or a missed deadline (the lock then expires, or is handed on late).
   */
  release(resource: LockResource, ownerId: string, handOnAtOnce?: boolean): Promise<ReleaseOutcome>
  /**
   * Nobody here waits for the resource any more: leave its queue, passing on a lock handed to
   * us. A no-op when our locker cannot be in it.
   */
  leave(resource: LockResource): void
  /**
   * Starts delivering the resource's release messages to the listener. Resolves or rejects within
   * `commandTimeoutMs`.
   */
  subscribe(resource: LockResource): Promise<void>
  unsubscribe(resource: LockResource): void
  /**
   * What Redis holds for the resource, read-only, in one round trip (one per node, in parallel,
   * in quorum mode), within `commandTimeoutMs`.
   * @throws on a failed call or a missed deadline (quorum mode: fewer than a majority answered).
   */
  inspect(resource: LockResource): Promise<LockInspection>
  /**
   * Records that the holder `ownerId` finished its work under the grant of `token` (a run-once
   * tick), for `ttlMs`, only while the lock is still ours (quorum mode: on a majority), within
   * `commandTimeoutMs`.
   * @returns true when recorded; false when the lock is not ours.
   * @throws on a failed call or a missed deadline.
   */
  markDone(resource: LockResource, ownerId: string, token: bigint, ttlMs: number): Promise<boolean>
  /**
   * The token of a grant whose holder recorded it done ({@link markDone}), or undefined (quorum
   * mode: any node that answered, of a majority), within `commandTimeoutMs`.
   * @throws on a failed call or a missed deadline.
   */
  readDone(resource: LockResource): Promise<bigint | undefined>
  /**
   * Leaves every queue our locker may be in, waits until every call it sent has been answered
   * (tries in flight and their clean-up included; bounded by `until` on the performance.now()
   * clock, default `commandTimeoutMs` from now), and closes the connections the backend opened.
   * Calls made afterwards (a late grant's release) still work: the clients given to it are the
   * caller's.
   */
  close(until?: number): Promise<void>
  /**
   * The error a try would fail with now without being sent, because the client knows Redis is
   * unreachable (down, and a reconnection failed: refused, unresolvable); undefined while it may
   * answer — also between a close and the reconnection after it (a failover), which a waiter
   * rides out. Quorum mode does not say (a majority of
   * nodes decides, try by try).
   */
  connectionDown?(): Error | undefined
}
