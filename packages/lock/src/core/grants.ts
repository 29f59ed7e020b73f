/**
 * Where a try becomes a {@link Lock}: one try through the backend, its outcome turned into what
 * the wait queues see ({@link Attempt}), the locks granted and not yet released or lost (the
 * held set that `close()` releases), the tries still in flight (a grant that lands after
 * `close()` is given back), and the order of the tokens seen (the `token-regressed` event).
 */
import type { AcquireOutcome, LockBackend, LockResource, QueueMode } from '../backend/backend.js'
import { InFlightCalls } from '../backend/in-flight.js'
import type { Deadlines } from '../deadline.js'
import { asError } from '../errors.js'
import { Lock, type LockHost } from '../lock.js'
import type { ResolvedAcquire, TtlFloor } from '../options.js'
import type { Attempt } from '../waiting/wait-queues.js'
import type { EventHub } from './event-hub.js'

/** What the grants need from the core they belong to. */
export interface GrantsHost {
  readonly backend: LockBackend
  readonly deadlines: Deadlines
  readonly commandTimeoutMs: number
  readonly ttlFloor: TtlFloor
  readonly events: EventHub
  /** True once the core is closed: a grant that lands then is given back. */
  readonly closed: boolean
  /** Runs `fn` in an async context where `lock` counts as held (reentrancy), or just runs it. */
  runHolding<T>(lock: Lock, fn: () => T): T
  /** The resource may be free now: let the oldest local waiter try. */
  wake(resource: string): void
}

/** Tokens remembered per resource for the `token-regressed` check before the map starts over. */
const TOKEN_MEMORY = 1_024

export class Grants {
  readonly #host: GrantsHost
  readonly #lockHost: LockHost
  /** Locks granted and not yet released or lost, by serial (a number key: no identity hash). */
  readonly #held = new Map<number, Lock>()
  #serial = 0
  /** The last token granted per resource (while someone listens): see the `token-regressed` event. */
  readonly #lastTokens = new Map<string, bigint>()
  /** Tries in flight, until their outcome is handled (a grant after close() is given back then). */
  readonly #tries = new InFlightCalls()

  constructor(host: GrantsHost) {
    this.#host = host
    const events = host.events
    const backend = host.backend
    this.#lockHost = {
      backend,
      deadlines: host.deadlines,
      commandTimeoutMs: host.commandTimeoutMs,
      ttlFloor: host.ttlFloor,
      get listening() {
        return events.listening
      },
      emit: events.emit,
      onLockEnd: (serial) => {
        this.#held.delete(serial)
      },
      runHolding: (lock, fn) => host.runHolding(lock, fn),
      wake: (resource, handedTo) => {
        if (handedTo === undefined || handedTo === backend.lockerId) host.wake(resource)
      },
    }
  }

  /** How many locks granted here are held now. */
  get heldCount(): number {
    return this.#held.size
  }

  /** One try through the backend; a grant becomes a {@link Lock}. Never rejects. */
  attempt(
    resource: LockResource,
    o: ResolvedAcquire,
    sentAt: number,
    waitUntil: number | undefined,
    first: boolean,
    queue: QueueMode,
  ): Promise<Attempt> {
    const tries = this.#tries
    tries.begin()
    return this.#host.backend.acquire(resource, { ttlMs: o.ttlMs, sentAt, waitUntil, first, queue }).then(
      (outcome) => {
        const attempt = this.#toAttempt(resource, o, sentAt, outcome)
        tries.end()
        return attempt
      },
      // Backends answer with outcomes; should one throw, the try failed like a Redis call.
      (error: unknown) => {
        const attempt = this.#toAttempt(resource, o, sentAt, { granted: false, error: asError(error), cut: false })
        tries.end()
        return attempt
      },
    )
  }

  /**
   * For `close()`: every lock still held is told (its signal aborts with reason `closed`) and
   * released, and the tries in flight are waited for (up to `commandTimeoutMs`).
   */
  releaseAll(): Promise<unknown> {
    const releases = Promise.allSettled([...this.#held.values()].map((lock) => lock.releaseOnClose()))
    return Promise.all([releases, this.#tries.idle(this.#host.commandTimeoutMs)])
  }

  #toAttempt(resource: LockResource, o: ResolvedAcquire, sentAt: number, outcome: AcquireOutcome): Attempt {
    const host = this.#host
    if (!outcome.granted) {
      // Running out of the caller's own wait is not a Redis failure.
      if (outcome.error && !outcome.cut)
        host.events.emit({ type: 'error', resource: resource.name, operation: 'acquire', error: outcome.error })
      return outcome
    }
    if (host.closed) {
      // Granted after close(): nobody is there to hold it.
      host.backend.release(resource, outcome.ownerId).catch(() => {})
      return { granted: false, error: new Error('the locker was closed'), cut: false }
    }
    const serial = ++this.#serial
    const lock = new Lock(this.#lockHost, {
      serial,
      resource,
      ownerId: outcome.ownerId,
      token: outcome.token,
      ttlMs: o.ttlMs,
      sentAt,
      validUntil: outcome.validUntil,
      autoExtend: o.autoExtend,
    })
    this.#held.set(serial, lock)
    if (host.events.listening) this.#checkTokenOrder(resource.name, outcome.token)
    return { granted: true, lock }
  }

  /** Tells the listeners when a grant's token is not above the last one seen here for the resource. */
  #checkTokenOrder(resource: string, token: bigint): void {
    const previous = this.#lastTokens.get(resource)
    if (previous !== undefined && token <= previous) {
      this.#host.events.emit({ type: 'token-regressed', resource, token, previous })
      return
    }
    if (this.#lastTokens.size >= TOKEN_MEMORY) this.#lastTokens.clear()
    this.#lastTokens.set(resource, token)
  }
}
