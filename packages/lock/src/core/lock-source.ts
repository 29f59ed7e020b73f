/**
 * What the lock family and the election are built on: a few operations by resource name, as
 * small interfaces, never the Locker itself. A family member takes the part it needs (a
 * semaphore: {@link PermitSource}; leader election: {@link ElectionSource}; run-once jobs:
 * {@link TickSource}), so it runs on whatever grants the locks — a Locker over one Redis, over a
 * quorum, or any other engine of the `LockBackend` seam (backend/backend.ts) — and no two modules
 * import each other. `LockCore` (lock-core.ts) implements all of it over one backend.
 */
import type { LockEvent } from '../events.js'
import type { LockInspection } from '../family/inspect.js'
import type { Lock } from '../lock.js'
import type { AcquireOptions, TryAcquireOptions } from '../options.js'

/** Where a family member reports its events, and whether the Locker it belongs to was closed. */
export interface EventSink {
  emit(event: LockEvent): void
  /** True when someone listens: a hot path skips building an event otherwise. */
  readonly listening: boolean
}

/** The operations a lock engine offers by resource name, options as `Locker.acquire()` takes them. */
export interface LockSource {
  /**
   * Acquires `resource`, waiting up to `waitMs`, first come first served.
   * @throws LockTimeoutError, LockAbortedError, LockUnavailableError, InvalidLockOptionError.
   */
  acquire(resource: string, options?: AcquireOptions): Promise<Lock>
  /** One attempt, no waiting: the lock, or null when it is held. */
  tryAcquire(resource: string, options?: TryAcquireOptions): Promise<Lock | null>
  /** What the engine holds for `resource` now, read-only. */
  inspect(resource: string): Promise<LockInspection>
  /**
   * The token of a grant of `resource` whose holder recorded its work done (`lock.markDone()`),
   * or undefined.
   */
  readDone(resource: string): Promise<bigint | undefined>
  /** True once the Locker was closed: nothing more is granted. */
  readonly closed: boolean
}

/** What a semaphore grants its queue lock and its permits with. */
export type PermitSource = Pick<LockSource, 'acquire' | 'tryAcquire' | 'inspect'>

/** What a leader election campaigns with. */
export type ElectionSource = Pick<LockSource, 'acquire' | 'closed'> & Pick<EventSink, 'emit'>

/** What a run-once schedule takes its ticks with: an election's, and the record of ticks done. */
export type TickSource = ElectionSource & Pick<LockSource, 'readDone'>
