import type { LockBackend, LockResource, ReleaseOutcome } from './backend/backend.js'
import type { Deadlines, Pending } from './deadline.js'
import { NotReplicatedError } from './backend/replication.js'
import {
  asError,
  InvalidLockOptionError,
  LockLostError,
  LockReplicationError,
  LockUnavailableError,
  type LockLostReason,
} from './errors.js'
import type { LockEvent } from './events.js'
import { checkTtl, type TtlFloor } from './options.js'
import { asyncDispose } from './family/async-dispose.js'

/** What a {@link Lock} needs from the {@link Locker} that granted it. */
export interface LockHost {
  readonly backend: LockBackend
  /** The Locker's clock of deadlines; a lock keeps the end of its validity on it. */
  readonly deadlines: Deadlines
  readonly commandTimeoutMs: number
  /** The shortest lease `extend(ttlMs)` takes (longer in quorum mode). */
  readonly ttlFloor: TtlFloor
  /** True when someone listens to events: hot paths skip building the event otherwise. */
  readonly listening: boolean
  emit(event: LockEvent): void
  /** Called exactly once when the lock stops being held (released or lost). */
  onLockEnd(serial: number): void
  /** Runs `fn` in an async context where `lock` counts as held, for reentrancy (family/reentrancy.ts). */
  runHolding<T>(lock: Lock, fn: () => T): T
  /**
   * The resource may be free now: let the oldest local waiter try. `handedTo`: the locker the
   * release handed the lock to (only that one should try), undefined when it was just freed.
   */
  wake(resource: string, handedTo?: string): void
}

/** What a grant gave a {@link Lock}. */
export interface LockGrant {
  /** Numbers the locks of one Locker (its held set is keyed by it). */
  readonly serial: number
  readonly resource: LockResource
  readonly ownerId: string
  readonly token: bigint
  readonly ttlMs: number
  /** performance.now() when the winning acquire was sent. */
  readonly sentAt: number
  /** performance.now() until which the lease is ours for sure (from the backend). */
  readonly validUntil: number
  readonly autoExtend: boolean
}

type State = 'held' | 'lost' | 'released'

/**
 * A granted lock. Obtained from `Locker.acquire()`, `tryAcquire()` or `using()`; never built by
 * hand. Its `signal` aborts with a {@link LockLostError} as soon as we know the lock is not ours:
 * Redis says so, or its lease ran out on our clock without a renewal.
 *
 * A re-entry (an acquire of the resource inside `using()` or `lock.run()` of the same Locker, in
 * the same async context) is a handle of its own on the same grant: the same token and `signal`;
 * the grant is released when every handle has been released (nested code: by the outermost).
 * `await using lock = await locker.acquire(r)` releases it at the end of the block.
 */
export class Lock implements AsyncDisposable {
  /** The locked resource, as given to `acquire()`. */
  readonly resource: string
  /** The fencing token of this grant: strictly greater than every earlier grant's on the resource. */
  readonly token: bigint

  readonly #host: LockHost
  readonly #resource: LockResource
  readonly #ownerId: string
  readonly #serial: number
  // Made on first use: an AbortController costs more than the rest of an uncontended acquire's
  // client work, and most locks are released without anyone reading their signal.
  #controller: AbortController | undefined
  #lostWith: LockLostError | undefined
  readonly #acquiredAt: number
  #ttlMs: number
  #validUntil: number
  /** The end of the validity on the Locker's deadline clock: the lock is lost then, unless renewed. */
  #expiry: Pending | undefined
  #state: State = 'held'
  #watchdog: NodeJS.Timeout | undefined
  #autoExtend: boolean
  #renewal: Promise<void> | undefined
  /** The release of the grant itself (once no handle holds it). */
  #release: Promise<boolean> | undefined
  /** The grant of which this is a re-entry; undefined for the grant's own (outermost) handle. */
  readonly #root: Lock | undefined
  /** On the grant's own handle: how many handles (itself and its re-entries) are not released yet. */
  #holds = 1
  /** This handle's own release (it drops one hold). */
  #handleRelease: Promise<boolean> | undefined
  /**
   * Its release hands the lock on in one call, sent at once, without waiting for a renewal in
   * flight: the semaphore's queue lock (family/semaphore.ts), whose holder may then block its
   * event loop for long.
   */
  #handOnAtOnce = false
  /** Told when this handle is released (a re-entry's turn ends then: family/reentrancy.ts). */
  #onHandleRelease: (() => void) | undefined

  /** @internal */
  constructor(host: LockHost, grant: LockGrant | Lock) {
    this.#host = host
    if (grant instanceof Lock) {
      // A re-entry: a handle on the same grant; everything but its own release is the grant's.
      this.#root = grant
      this.resource = grant.resource
      this.token = grant.token
      this.#resource = grant.#resource
      this.#ownerId = ''
      this.#serial = grant.#serial
      this.#ttlMs = grant.#ttlMs
      this.#acquiredAt = performance.now()
      this.#validUntil = 0
      this.#autoExtend = false
      grant.#holds++
      return
    }
    this.#root = undefined
    this.resource = grant.resource.name
    this.token = grant.token
    this.#resource = grant.resource
    this.#ownerId = grant.ownerId
    this.#serial = grant.serial
    this.#ttlMs = grant.ttlMs
    this.#acquiredAt = grant.sentAt
    this.#validUntil = grant.validUntil
    this.#autoExtend = grant.autoExtend
    this.#expiry = host.deadlines.track(grant.validUntil - grant.sentAt, this.#expire, grant.sentAt)
    if (this.#autoExtend) this.#scheduleRenewal()
  }

  /** Aborts, with a `LockLostError` as its reason, when the lock is lost. Not aborted by release(). */
  get signal(): AbortSignal {
    if (this.#root) return this.#root.signal
    if (!this.#controller) {
      this.#controller = new AbortController()
      if (this.#lostWith) this.#controller.abort(this.#lostWith)
    }
    return this.#controller.signal
  }

  /** The lease time the lock was granted or last extended with, in ms. */
  get ttlMs(): number {
    return this.#root ? this.#root.ttlMs : this.#ttlMs
  }

  /**
   * True while the lock is ours as far as we can know: this handle not released, the grant not
   * released or lost, validity left.
   */
  isHeld(): boolean {
    if (this.#handleRelease) return false
    const grant = this.#root ?? this
    return grant.#state === 'held' && performance.now() < grant.#validUntil
  }

  /** Milliseconds of local validity left (0 once this handle is released, or the grant lost or run out). */
  remainingMs(): number {
    if (this.#handleRelease) return 0
    const grant = this.#root ?? this
    return grant.#state === 'held' ? Math.max(0, grant.#validUntil - performance.now()) : 0
  }

  /**
   * Runs `fn` with this lock counted as held in its async context: inside, an `acquire()`,
   * `tryAcquire()` or `using()` of the same resource on the same Locker re-enters it (the same
   * token and signal) instead of waiting for itself. `locker.using()` does this for you; this is
   * for a lock taken by hand. The lock is not released when `fn` ends.
   */
  async run<T>(fn: (lock: Lock) => Promise<T> | T): Promise<T> {
    if (typeof fn !== 'function') throw new InvalidLockOptionError('fn', 'must be a function', fn)
    return this.#host.runHolding(this, () => fn(this))
  }

  /**
   * @internal A handle for a re-entry of this grant, or undefined when the grant is no longer
   * held (then the caller acquires as anyone would).
   */
  reenter(): Lock | undefined {
    const grant = this.#root ?? this
    if (grant.#state !== 'held' || grant.#release || performance.now() >= grant.#validUntil) return undefined
    return new Lock(this.#host, grant)
  }

  /**
   * @internal Records that the work under this grant is done (a run-once tick), for `ttlMs`, only
   * while the lock is still ours in Redis (scripts/mark-done.ts).
   * @returns true when recorded; false when the lock is no longer ours.
   * @throws on a failed call or a missed deadline.
   */
  markDone(ttlMs: number): Promise<boolean> {
    const grant = this.#root ?? this
    if (grant.#state !== 'held') return Promise.resolve(false)
    return grant.#host.backend.markDone(grant.#resource, grant.#ownerId, grant.token, ttlMs)
  }

  /** @internal How many handles of this grant are not released yet (1 without re-entries). */
  get holds(): number {
    return (this.#root ?? this).#holds
  }

  /**
   * Resets the lease to `ttlMs` (default: the current lease time) from now.
   * @throws LockLostError when the lock is no longer ours (and the lock is then lost).
   * @throws LockUnavailableError when Redis did not answer in time; the lock's state is unchanged.
   */
  async extend(ttlMs: number = this.ttlMs): Promise<void> {
    if (this.#root) {
      checkTtl(ttlMs, this.#host.ttlFloor)
      if (this.#handleRelease) throw this.#root.#notOwned()
      return this.#root.extend(ttlMs)
    }
    checkTtl(ttlMs, this.#host.ttlFloor)
    if (this.#state !== 'held') throw this.#notOwned()
    let validUntil: number | undefined
    try {
      validUntil = await this.#host.backend.extend(this.#resource, this.#ownerId, ttlMs, this.#host.commandTimeoutMs)
    } catch (error) {
      this.#host.emit({
        type: 'error',
        resource: this.resource,
        operation: 'extend',
        error: asError(error),
        token: this.token,
      })
      const message = `could not extend lock "${this.resource}": ${asError(error).message}`
      if (error instanceof NotReplicatedError) {
        throw new LockReplicationError(
          this.resource,
          'extend',
          error.replicas,
          error.acknowledged,
          message,
          error,
          error.connectedReplicas,
        )
      }
      throw new LockUnavailableError(this.resource, 'extend', message, error)
    }
    if (validUntil === undefined) {
      this.#lose('not-owner')
      throw this.#notOwned()
    }
    if (this.#state !== 'held') throw this.#notOwned()
    // Its reply read after the lease it grants ran out (a frozen or starved process): not extended.
    if (validUntil <= performance.now()) {
      this.#lose('expired')
      throw this.#notOwned()
    }
    this.#ttlMs = ttlMs
    this.#renewed(validUntil)
    this.#host.emit({ type: 'extended', resource: this.resource, token: this.token, ttlMs, auto: false })
    if (this.#autoExtend) this.#scheduleRenewal()
  }

  /**
   * Stops the watchdog, waits for a renewal in flight, then deletes the key if it still holds our
   * owner id and wakes the next waiter. Calling it again returns the first call's result.
   * @returns true when it released our lock; false when the lock had already expired or been taken.
   * @throws LockUnavailableError when Redis did not answer; the key then expires after its TTL,
   * or, when others wait for it, is handed on as soon as Redis answers.
   */
  release(): Promise<boolean> {
    if (this.#handleRelease) return this.#handleRelease
    this.#handleRelease = (this.#root ?? this).#dropHold()
    const released = this.#onHandleRelease
    this.#onHandleRelease = undefined
    released?.()
    return this.#handleRelease
  }

  /**
   * @internal Makes the release one call that hands the lock on (or frees it) by itself, sent
   * before `release()` returns: nothing of the hand-on then depends on this process's event loop.
   */
  handOnAtOnce(): this {
    this.#handOnAtOnce = true
    return this
  }

  /** @internal Calls `listener` once, when this handle is released. */
  onHandleRelease(listener: () => void): void {
    this.#onHandleRelease = listener
  }

  /**
   * Releases the lock like {@link release}, and never throws: for `await using`. A lock that had
   * expired or been lost is reported as the `released` event with outcome `expired`; Redis not
   * answering as an `error` event (the lock then expires after its TTL), as `using()` does.
   */
  async [asyncDispose](): Promise<void> {
    await this.release().catch(() => {})
  }

  /** One handle let go of the grant; the last one releases it. */
  #dropHold(): Promise<boolean> {
    if (--this.#holds > 0) return Promise.resolve(this.#state === 'held')
    this.#release ??= this.#doRelease()
    return this.#release
  }

  async #doRelease(): Promise<boolean> {
    const wasLost = this.#state === 'lost'
    this.#state = 'released'
    clearTimeout(this.#watchdog)
    this.#settleExpiry()
    // A renewal in flight lands first anyway (one connection keeps the order; a late one finds the
    // key not ours and changes nothing): waiting for it only matters to a release that must not
    // depend on this event loop, which does not wait.
    if (this.#renewal && !this.#handOnAtOnce) await this.#renewal
    const heldMs = performance.now() - this.#acquiredAt
    let outcome: ReleaseOutcome
    try {
      outcome = await this.#host.backend.release(this.#resource, this.#ownerId, this.#handOnAtOnce)
    } catch (error) {
      this.#host.emit({
        type: 'error',
        resource: this.resource,
        operation: 'release',
        error: asError(error),
        token: this.token,
      })
      if (!wasLost) this.#host.onLockEnd(this.#serial)
      throw new LockUnavailableError(
        this.resource,
        'release',
        `could not release lock "${this.resource}": ${asError(error).message}`,
        error,
      )
    }
    if (this.#host.listening) {
      this.#host.emit({
        type: 'released',
        resource: this.resource,
        token: this.token,
        heldMs,
        outcome: outcome.freed ? 'released' : 'expired',
        wasLost,
      })
    }
    if (!wasLost) this.#host.onLockEnd(this.#serial)
    // Our own release message is ignored by this locker (the echo would cost a wasted attempt),
    // so local waiters are woken here, one round trip sooner than pub/sub would.
    if (outcome.freed) this.#host.wake(this.resource, outcome.handedTo)
    return outcome.freed
  }

  #scheduleRenewal(): void {
    clearTimeout(this.#watchdog)
    const period = Math.max(1, Math.floor(this.#ttlMs / 3))
    this.#watchdog = setTimeout(() => this.#renew(), period)
    this.#watchdog.unref()
  }

  #renew(): void {
    if (this.#state !== 'held' || this.#renewal) return
    const left = this.#validUntil - performance.now()
    if (left <= 0) return this.#lose('expired')
    const ttlMs = this.#ttlMs
    this.#renewal = this.#host.backend
      .extend(this.#resource, this.#ownerId, ttlMs, Math.min(this.#host.commandTimeoutMs, left))
      .then(
        (validUntil) => {
          if (this.#state !== 'held') return
          if (validUntil === undefined) return this.#lose('not-owner')
          // A reply read after the lease it grants ran out (the process was frozen or starved with
          // the reply waiting in its socket) extends nothing: the key may be another's by now.
          if (validUntil <= performance.now()) return this.#lose('expired')
          this.#renewed(validUntil)
          this.#host.emit({ type: 'extended', resource: this.resource, token: this.token, ttlMs, auto: true })
          this.#scheduleRenewal()
        },
        (error: unknown) => {
          if (this.#state !== 'held') return
          this.#host.emit({
            type: 'error',
            resource: this.resource,
            operation: 'renew',
            error: asError(error),
            token: this.token,
          })
          const remaining = this.#validUntil - performance.now()
          if (remaining <= 0) return this.#lose('expired', error)
          // Try again soon, and in any case before the validity runs out.
          clearTimeout(this.#watchdog)
          this.#watchdog = setTimeout(() => this.#renew(), Math.max(1, Math.min(this.#ttlMs / 3, remaining / 2)))
          this.#watchdog.unref()
        },
      )
      .finally(() => {
        this.#renewal = undefined
      })
  }

  /** A renewal succeeded: the validity, and the deadline at which the lock is lost, move on. */
  #renewed(validUntil: number): void {
    this.#validUntil = validUntil
    this.#settleExpiry()
    const now = performance.now()
    this.#expiry = this.#host.deadlines.track(validUntil - now, this.#expire, now)
  }

  #settleExpiry(): void {
    if (this.#expiry) this.#host.deadlines.settle(this.#expiry)
    this.#expiry = undefined
  }

  /** The validity ran out on our clock with no renewal (no watchdog, or a renewal that stalled). */
  readonly #expire = (): void => {
    this.#expiry = undefined
    this.#lose('expired')
  }

  #lose(reason: LockLostReason, cause?: unknown): void {
    if (this.#state !== 'held') return
    this.#state = 'lost'
    clearTimeout(this.#watchdog)
    this.#settleExpiry()
    const error = new LockLostError(this.resource, this.token, reason, cause)
    this.#host.emit({
      type: 'lost',
      resource: this.resource,
      token: this.token,
      heldMs: performance.now() - this.#acquiredAt,
      reason,
      autoExtend: this.#autoExtend,
    })
    this.#host.onLockEnd(this.#serial)
    // The key may be gone (deleted or expired), so a local waiter may take it now.
    this.#host.wake(this.resource)
    this.#abort(error)
  }

  #abort(error: LockLostError): void {
    this.#lostWith ??= error
    this.#controller?.abort(error)
  }

  #notOwned(): LockLostError {
    return this.#lostWith ?? new LockLostError(this.resource, this.token, 'not-owner')
  }

  /**
   * @internal Used by `Locker.close()`: the routine still holding the lock is told (its signal
   * aborts with reason `closed`) before the lock is released from under it.
   */
  releaseOnClose(): Promise<boolean> {
    if (this.#state === 'held') this.#abort(new LockLostError(this.resource, this.token, 'closed'))
    this.#release ??= this.#doRelease()
    return this.#release
  }
}
