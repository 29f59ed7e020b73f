/**
 * A hold of a read-write lock (family/read-write.ts): one reader's or the writer's lease, with its
 * token, watchdog and `signal`, as a {@link Lock} has them. Its round trips are the host's
 * ({@link HoldCalls}), so the handle knows no client.
 */
import { LockLostError, LockUnavailableError, type LockLostReason } from '../errors.js'
import type { LockEvent } from '../events.js'
import { checkTtl, type TtlFloor } from '../options.js'
import { asyncDispose } from './async-dispose.js'

/** Whether a hold is a reader's or the writer's. */
export type ReadWriteMode = 'read' | 'write'

/** The round trips of one hold, each with its deadline. */
export interface HoldCalls {
  /** Owner-checked renewal to `ttlMs`: true when renewed, false when the lease is not ours any more. */
  extend(ttlMs: number): Promise<boolean>
  /** Owner-checked release: true when our lease was still live. */
  release(): Promise<boolean>
  /**
   * Of a lease of `ttlMs` from when its request was sent, how long is ours for certain (less the
   * clock drift in quorum mode).
   */
  validMs(ttlMs: number): number
  /** The Locker's shortest lease. */
  readonly ttlFloor: TtlFloor
  emit(event: LockEvent): void
  /** Called once when the hold ends (released or lost). */
  ended(hold: ReadWriteHold): void
}

/**
 * A reader's or the writer's hold of a read-write lock. Obtained from `rw.read()` / `rw.write()`;
 * never built by hand. Its `signal` aborts with a {@link LockLostError} as soon as the lease is
 * known not to be ours: Redis says so at a renewal, or it ran out on our clock. `await using`
 * releases it at the end of the block.
 */
export class ReadWriteHold implements AsyncDisposable {
  /** The read-write lock's name. */
  readonly resource: string
  readonly mode: ReadWriteMode
  /**
   * A writer: a fresh token, above every earlier reader's and writer's. A reader: the token of
   * the last write granted before this read (docs/LOCK.md, "Read-write lock").
   */
  readonly token: bigint
  readonly #calls: HoldCalls
  readonly #acquiredAt: number
  #ttlMs: number
  #validUntil: number
  #state: 'held' | 'lost' | 'released' = 'held'
  #controller: AbortController | undefined
  #lostWith: LockLostError | undefined
  #expiry: NodeJS.Timeout | undefined
  #watchdog: NodeJS.Timeout | undefined
  readonly #autoExtend: boolean
  #renewal: Promise<void> | undefined
  #release: Promise<boolean> | undefined

  /** @internal */
  constructor(
    calls: HoldCalls,
    grant: {
      resource: string
      mode: ReadWriteMode
      token: bigint
      ttlMs: number
      sentAt: number
      autoExtend: boolean
    },
  ) {
    this.#calls = calls
    this.resource = grant.resource
    this.mode = grant.mode
    this.token = grant.token
    this.#ttlMs = grant.ttlMs
    this.#acquiredAt = grant.sentAt
    // Measured from when the grant was sent: the lease began no earlier in Redis.
    this.#validUntil = grant.sentAt + calls.validMs(grant.ttlMs)
    this.#autoExtend = grant.autoExtend
    this.#armExpiry()
    if (this.#autoExtend) this.#scheduleRenewal()
  }

  /** Aborts, with a `LockLostError` as its reason, when the hold is lost. Not aborted by release(). */
  get signal(): AbortSignal {
    if (!this.#controller) {
      this.#controller = new AbortController()
      if (this.#lostWith) this.#controller.abort(this.#lostWith)
    }
    return this.#controller.signal
  }

  /** The lease time the hold was granted or last extended with, in ms. */
  get ttlMs(): number {
    return this.#ttlMs
  }

  /** True while the hold is ours as far as we can know: not released or lost, validity left. */
  isHeld(): boolean {
    return this.#state === 'held' && performance.now() < this.#validUntil
  }

  /** Milliseconds of local validity left (0 once released or lost). */
  remainingMs(): number {
    return this.#state === 'held' ? Math.max(0, this.#validUntil - performance.now()) : 0
  }

  /**
   * Renews the lease to `ttlMs` (default: the one it has) from now.
   * @throws LockLostError when the hold is not ours any more (its signal aborts too).
   * @throws LockUnavailableError when Redis did not answer in time.
   * @throws InvalidLockOptionError for a bad `ttlMs`, before any I/O.
   */
  async extend(ttlMs: number = this.#ttlMs): Promise<void> {
    const ttl = checkTtl(ttlMs, this.#calls.ttlFloor)
    if (this.#state !== 'held') throw this.#lostWith ?? new LockLostError(this.resource, this.token, 'not-owner')
    await this.#renewal
    const sentAt = performance.now()
    let renewed: boolean
    try {
      renewed = await this.#calls.extend(ttl)
    } catch (error) {
      throw new LockUnavailableError(this.resource, 'extend', `could not extend "${this.resource}"`, error)
    }
    if (!renewed) {
      this.#lose('not-owner')
      throw this.#lostWith!
    }
    if (this.#state !== 'held') throw this.#lostWith!
    this.#renewed(sentAt, ttl, false)
  }

  /**
   * Stops the watchdog, waits for a renewal in flight, and gives the lease back.
   * @returns true when it released our lease; false when it had already run out or been lost.
   * @throws LockUnavailableError when Redis did not answer in time (the lease then runs out).
   */
  release(): Promise<boolean> {
    this.#release ??= this.#doRelease()
    return this.#release
  }

  async [asyncDispose](): Promise<void> {
    await this.release().catch(() => {})
  }

  async #doRelease(): Promise<boolean> {
    const wasLost = this.#state === 'lost'
    this.#stopTimers()
    await this.#renewal
    if (this.#state === 'held') this.#state = 'released'
    let released = false
    try {
      released = wasLost ? false : await this.#calls.release()
    } catch (error) {
      throw new LockUnavailableError(this.resource, 'release', `could not release "${this.resource}"`, error)
    } finally {
      this.#end()
      this.#calls.emit({
        type: 'released',
        resource: this.resource,
        token: this.token,
        heldMs: performance.now() - this.#acquiredAt,
        outcome: released ? 'released' : 'expired',
        wasLost,
      })
    }
    return released
  }

  #scheduleRenewal(): void {
    this.#watchdog = setTimeout(() => {
      this.#watchdog = undefined
      this.#renewal = this.#autoRenew()
    }, this.#ttlMs / 3)
    this.#watchdog.unref()
  }

  async #autoRenew(): Promise<void> {
    const sentAt = performance.now()
    let renewed: boolean | undefined
    try {
      renewed = await this.#calls.extend(this.#ttlMs)
    } catch {
      // Redis did not answer: try again at the next period; the expiry timer ends the hold if
      // no renewal succeeds within the validity.
      renewed = undefined
    }
    this.#renewal = undefined
    if (this.#state !== 'held') {
      // Lost on our clock while the renewal was out, and Redis renewed it anyway: nobody here holds
      // it any more, so give it back rather than keep others out for another lease.
      if (renewed === true && this.#state === 'lost') this.#calls.release().catch(() => {})
      return
    }
    if (renewed === false) return this.#lose('not-owner')
    if (renewed) this.#renewed(sentAt, this.#ttlMs, true)
    this.#scheduleRenewal()
  }

  #renewed(sentAt: number, ttlMs: number, auto: boolean): void {
    this.#ttlMs = ttlMs
    this.#validUntil = sentAt + this.#calls.validMs(ttlMs)
    this.#armExpiry()
    this.#calls.emit({ type: 'extended', resource: this.resource, token: this.token, ttlMs, auto })
  }

  #armExpiry(): void {
    if (this.#expiry) clearTimeout(this.#expiry)
    this.#expiry = setTimeout(
      () => {
        if (performance.now() >= this.#validUntil) this.#lose('expired')
        else this.#armExpiry()
      },
      Math.max(0, this.#validUntil - performance.now()),
    )
    this.#expiry.unref()
  }

  #lose(reason: LockLostReason): void {
    if (this.#state !== 'held') return
    this.#state = 'lost'
    this.#stopTimers()
    this.#lostWith = new LockLostError(this.resource, this.token, reason)
    this.#controller?.abort(this.#lostWith)
    this.#calls.emit({
      type: 'lost',
      resource: this.resource,
      token: this.token,
      heldMs: performance.now() - this.#acquiredAt,
      reason,
      autoExtend: this.#autoExtend,
    })
    this.#end()
  }

  /**
   * @internal The Locker is closing with this hold still held: its signal aborts (a
   * `LockLostError`, reason `closed`) and the lease is given back.
   */
  async close(): Promise<void> {
    if (this.#state === 'held' && !this.#release) {
      this.#lostWith = new LockLostError(this.resource, this.token, 'closed')
      this.#controller?.abort(this.#lostWith)
    }
    await this.release().catch(() => {})
  }

  #stopTimers(): void {
    if (this.#watchdog) clearTimeout(this.#watchdog)
    if (this.#expiry) clearTimeout(this.#expiry)
    this.#watchdog = undefined
    this.#expiry = undefined
  }

  #ended = false
  #end(): void {
    if (this.#ended) return
    this.#ended = true
    this.#calls.ended(this)
  }
}
