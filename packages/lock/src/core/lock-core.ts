/**
 * The machinery under a Locker, over one {@link LockBackend}: option checks, re-entry, the wait
 * queues (waiting/wait-queues.ts), the grants (grants.ts), inspection and closing. It knows no
 * client and no engine — the backend it is given does — and implements {@link LockSource}, the
 * interface the lock family is built on. A Locker composes one for its locks and, on first use,
 * another under the semaphore prefix for its semaphores' permits.
 */
import type { BackendListener, LockBackend, LockResource } from '../backend/backend.js'
import { Deadlines, DeadlineExceededError, withinDeadline } from '../deadline.js'
import { asError, LockError, LockUnavailableError } from '../errors.js'
import type { LockInspection } from '../family/inspect.js'
import type { HeldInContext } from '../family/reentrancy.js'
import type { Lock } from '../lock.js'
import {
  resolveAcquireOptions,
  type AcquireOptions,
  type OptionsOf,
  type ResolvedAcquire,
  type ResolvedLockerOptions,
  type TryAcquireOptions,
  type TtlFloor,
} from '../options.js'
import { WaitQueues, type WaitHost } from '../waiting/wait-queues.js'
import { aborted, giveUp, unavailable } from './acquire-errors.js'
import type { EventHub } from './event-hub.js'
import { Grants } from './grants.js'
import type { LockSource } from './lock-source.js'

/** What a {@link LockCore} is made of. */
export interface LockCoreParts {
  /** The Locker's options, resolved (the backend's own among them). */
  readonly options: ResolvedLockerOptions
  /** The shortest lease the engine takes. */
  readonly ttlFloor: TtlFloor
  /** What error messages call the store (`Redis`, `etcd`). */
  readonly store: string
  /** Where its events go. */
  readonly events: EventHub
  /** Makes the backend, given the core's clock of deadlines and the listener of its release messages. */
  backend(deadlines: Deadlines, listener: BackendListener): LockBackend
  /** The locks held per async context, for re-entry; undefined: not reentrant. */
  readonly context: HeldInContext | undefined
}

export class LockCore implements LockSource {
  readonly ttlFloor: TtlFloor
  readonly #backend: LockBackend
  readonly #deadlines = new Deadlines()
  readonly #options: ResolvedLockerOptions
  /** `acquire()` options when none are given: resolved once, not per call. */
  readonly #defaultAcquire: ResolvedAcquire
  readonly #events: EventHub
  readonly #context: HeldInContext | undefined
  readonly #queues: WaitQueues
  readonly #grants: Grants
  /** What error messages call the store (`Redis`, `etcd`). */
  readonly #store: string
  #closed = false

  constructor(parts: LockCoreParts) {
    const o = parts.options
    this.#options = o
    this.ttlFloor = parts.ttlFloor
    this.#store = parts.store
    this.#events = parts.events
    this.#context = parts.context
    this.#defaultAcquire = resolveAcquireOptions(undefined, o, 'acquire', parts.ttlFloor)
    const listener: BackendListener = {
      released: (resource, handedTo, handoffMs, next) => {
        const me = this.#backend.lockerId
        if (handedTo === undefined || handedTo === me) this.#queues.wake(resource)
        // Next in line: take over if the locker it was handed to never comes.
        else if (next === me) this.#queues.handedElsewhere(resource, handoffMs)
      },
      reconnected: () => this.#queues.wakeAll(),
    }
    this.#backend = parts.backend(this.#deadlines, listener)
    const context = parts.context
    const isClosed = () => this.#closed
    this.#grants = new Grants({
      backend: this.#backend,
      deadlines: this.#deadlines,
      commandTimeoutMs: o.commandTimeoutMs,
      ttlFloor: parts.ttlFloor,
      events: parts.events,
      get closed() {
        return isClosed()
      },
      runHolding: (lock, fn) => (context ? context.run(lock, fn) : fn()),
      wake: (resource) => this.#queues.wake(resource),
    })
    this.#queues = new WaitQueues(this.#waitHost())
  }

  get closed(): boolean {
    return this.#closed
  }

  /** How many locks granted here are held now. */
  get heldCount(): number {
    return this.#grants.heldCount
  }

  /** The options of one call, resolved (the defaults, resolved once, when none are given). */
  resolve(options: AcquireOptions | undefined, call: OptionsOf): ResolvedAcquire {
    return options === undefined
      ? this.#defaultAcquire
      : resolveAcquireOptions(options, this.#options, call, this.ttlFloor)
  }

  /**
   * The resource's checked name and keys.
   * @throws InvalidLockOptionError for a bad name, before any I/O.
   */
  resource(name: string): LockResource {
    return this.#backend.resource(name)
  }

  /** @throws LockUnavailableError once closed. */
  assertOpen(resource: string): void {
    if (this.#closed) throw new LockUnavailableError(resource, 'acquire', 'the locker was closed')
  }

  acquire(resource: string, options?: AcquireOptions): Promise<Lock> {
    return this.acquireWith(resource, this.resolve(options, 'acquire'), false)
  }

  /**
   * An acquire, options resolved: a re-entry when the current async context holds the resource
   * (family/reentrancy.ts; `turn`: it runs a routine, `using()`, and takes a turn), else the wait
   * queue.
   */
  async acquireWith(resource: string, o: ResolvedAcquire, turn: boolean): Promise<Lock> {
    const r = this.#backend.resource(resource)
    this.assertOpen(resource)
    const start = performance.now()
    const emit = this.#events.emit
    if (o.signal?.aborted) throw aborted(emit, resource, start, o.signal)
    const held = this.#context?.find(resource)
    if (held) {
      const reentry = await this.#context!.enter(held, turn, {
        until: start + o.waitMs,
        signal: o.signal,
        timedOut: () => giveUp(emit, resource, start, undefined),
        aborted: () => aborted(emit, resource, start, o.signal),
      })
      if (reentry) return this.#reentered(reentry)
    }
    return this.#queues.acquire(r, o, start)
  }

  async tryAcquire(resource: string, options?: TryAcquireOptions): Promise<Lock | null> {
    const r = this.#backend.resource(resource)
    const o = this.resolve(options, 'tryAcquire')
    this.assertOpen(resource)
    const emit = this.#events.emit
    const held = this.#context?.find(resource)
    if (held) {
      const reentry = this.#context!.tryEnter(held, false)
      if (reentry === 'busy') {
        // Another branch of this context is inside the lock: it is held, for now, by someone else.
        emit({ type: 'contended', resource, holderTtlMs: held.remainingMs() })
        return null
      }
      if (reentry) return this.#reentered(reentry)
    }
    const start = performance.now()
    const attempt = await this.#grants.attempt(r, o, start, undefined, true, 'none')
    if (attempt.granted) {
      this.#acquired(attempt.lock, start, 1)
      return attempt.lock
    }
    if (attempt.error instanceof LockError) throw attempt.error
    if (attempt.error) throw unavailable(emit, resource, start, attempt.error, this.#store)
    emit({ type: 'contended', resource, holderTtlMs: attempt.holderTtlMs })
    return null
  }

  async inspect(resource: string): Promise<LockInspection> {
    const r = this.#backend.resource(resource)
    if (this.#closed) throw new LockUnavailableError(resource, 'inspect', 'the locker was closed')
    try {
      return await this.#backend.inspect(r)
    } catch (error) {
      const cause = asError(error)
      const why = cause instanceof DeadlineExceededError ? 'Redis did not answer in time' : 'the Redis call failed'
      throw new LockUnavailableError(
        resource,
        'inspect',
        `could not inspect lock "${resource}": ${why} (${cause.message})`,
        cause,
      )
    }
  }

  readDone(resource: string): Promise<bigint | undefined> {
    return this.#backend.readDone(this.#backend.resource(resource))
  }

  /**
   * Rejects blocked acquires, releases the locks still held, waits for the tries in flight and
   * everything the backend sent, and closes the backend's connections — all by `until`
   * (performance.now()).
   */
  async close(until: number): Promise<void> {
    if (this.#closed) return
    this.#closed = true
    this.#queues.closeAll()
    await withinDeadline(this.#grants.releaseAll(), until)
    await this.#backend.close(until)
  }

  /**
   * A re-entry of a resource the current async context holds here, a handle on the same grant,
   * no round trip: emits `reentered`.
   */
  #reentered(lock: Lock): Lock {
    if (this.#events.listening)
      this.#events.emit({ type: 'reentered', resource: lock.resource, token: lock.token, holds: lock.holds })
    return lock
  }

  #acquired(lock: Lock, start: number, attempts: number): void {
    if (this.#events.listening)
      this.#events.emit({
        type: 'acquired',
        resource: lock.resource,
        token: lock.token,
        ttlMs: lock.ttlMs,
        waitedMs: performance.now() - start,
        attempts,
      })
  }

  #waitHost(): WaitHost {
    const isClosed = () => this.#closed
    const emit = this.#events.emit
    const grants = this.#grants
    return {
      backend: this.#backend,
      pollMs: this.#options.pollMs,
      get closed() {
        return isClosed()
      },
      attempt: (resource, o, sentAt, waitUntil, first, queue) =>
        grants.attempt(resource, o, sentAt, waitUntil, first, queue),
      contended: (resource, holderTtlMs) => emit({ type: 'contended', resource, holderTtlMs }),
      acquired: (lock, start, attempts) => this.#acquired(lock, start, attempts),
      giveUp: (resource, start, lastError) => giveUp(emit, resource, start, lastError, this.#store),
      aborted: (resource, start, signal) => aborted(emit, resource, start, signal),
      closedError: (resource) => new LockUnavailableError(resource, 'acquire', 'the locker was closed'),
    }
  }
}
