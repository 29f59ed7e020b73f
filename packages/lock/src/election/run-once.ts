import type { TickSource } from '../core/lock-source.js'
import { asError, LockAbortedError, LockTimeoutError } from '../errors.js'
import type { Lock } from '../lock.js'
import type { ResolvedRunOnce, TickOutcome } from './election-options.js'
import { pause } from './pause.js'

/**
 * The handle `locker.runOnce()` returns: this instance takes part in every tick until `stop()`.
 */
export interface Schedule {
  /** The job's key. */
  readonly key: string
  /**
   * Stops taking part: a wait for a tick is given up and a running job is awaited. Resolves when
   * the ticks this instance ran have been released, after their window (plus one lease) ended.
   */
  stop(): Promise<void>
}

/**
 * One instance's part in a job that every instance schedules and one runs per tick.
 *
 * Tick n is the window `[n × everyMs, (n + 1) × everyMs)` of the wall clock (instances agree on
 * it to within their clock skew; deadlines inside a tick use the monotonic clock). In each window
 * every instance asks for the tick's own lock `<key>:<n>`, waiting until the window ends. The one
 * granted runs the job with the tick's token, the watchdog renewing its lease, records the tick as
 * done (scripts/mark-done.ts: only while the lease is still ours) and reports `ran`, then keeps the
 * lock until the window has ended plus one lease: those waiting give up at the window's end
 * (`skipped`). A holder that finds the tick recorded done (its runner then lost the lease, frozen
 * past it) does not run it again (`skipped`). A runner that pauses past its lease during the job
 * cannot record it: it reports `lost`, a waiter gets the lock and runs the tick again with a larger
 * token, and the fenced writes of the paused runner are refused. A job that throws releases the
 * lock at once, so another instance may still run the tick in its window.
 */
export class TickRunner implements Schedule {
  readonly key: string
  readonly #host: TickSource
  readonly #o: ResolvedRunOnce
  readonly #stop = new AbortController()
  /** Ticks run here whose lock is kept until their window has ended. */
  readonly #kept = new Set<Promise<void>>()
  readonly #done: Promise<void>

  constructor(host: TickSource, options: ResolvedRunOnce) {
    this.#host = host
    this.#o = options
    this.key = options.key
    this.#done = this.#run()
  }

  async stop(): Promise<void> {
    this.#stop.abort()
    await this.#done
    await Promise.all([...this.#kept])
  }

  async #run(): Promise<void> {
    const stop = this.#stop.signal
    const every = this.#o.everyMs
    let last = -1
    while (!stop.aborted && !this.#host.closed) {
      const tick = Math.floor(Date.now() / every)
      if (tick <= last) {
        // Tried already: sleep to the next window.
        await pause((tick + 1) * every - Date.now(), stop)
        continue
      }
      last = tick
      await this.#tryTick(tick)
    }
  }

  async #tryTick(tick: number): Promise<void> {
    const every = this.#o.everyMs
    const resource = `${this.key}:${tick}`
    const windowEnd = (tick + 1) * every
    let lock: Lock
    try {
      lock = await this.#host.acquire(resource, {
        ttlMs: this.#o.leaseMs,
        waitMs: Math.max(0, windowEnd - Date.now()),
        signal: this.#stop.signal,
        autoExtend: true,
      })
    } catch (error) {
      if (error instanceof LockAbortedError || this.#host.closed) return
      if (error instanceof LockTimeoutError) return this.#report(tick, 'skipped')
      return this.#report(tick, 'missed', undefined, asError(error))
    }
    if (Date.now() >= windowEnd) {
      // Free only after its window: whoever had it did not finish, and the tick is over.
      await lock.release().catch(() => false)
      return this.#report(tick, 'missed', lock.token)
    }
    // An earlier holder may have run the tick and then lost its lease (frozen past it while it kept
    // the lock): the tick is done, not to be run again (issue 33: it was, and both said `ran`).
    let done: bigint | undefined
    try {
      done = await this.#host.readDone(resource)
    } catch (error) {
      await lock.release().catch(() => false)
      return this.#report(tick, 'missed', lock.token, asError(error))
    }
    if (done !== undefined) {
      this.#report(tick, 'skipped', lock.token)
      return this.#keep(lock, windowEnd + this.#o.leaseMs)
    }
    try {
      await this.#o.job({ tick, resource, token: lock.token, signal: lock.signal })
    } catch (error) {
      await lock.release().catch(() => false)
      return this.#report(tick, lock.signal.aborted ? 'lost' : 'failed', lock.token, asError(error))
    }
    // `ran` only once the tick is recorded done while the lease is still ours (checked in Redis,
    // in the same script): a runner whose lease ran out meanwhile reports `lost`, and the next
    // holder runs the tick; one that recorded it keeps the next holder from running it again.
    let recorded = false
    let failure: Error | undefined
    if (!lock.signal.aborted) {
      try {
        recorded = await lock.markDone(Math.max(1, windowEnd - Date.now()) + this.#o.leaseMs + this.#o.everyMs)
      } catch (error) {
        failure = asError(error)
      }
    }
    if (!recorded) {
      await lock.release().catch(() => false)
      return this.#report(tick, 'lost', lock.token, failure)
    }
    this.#report(tick, 'ran', lock.token)
    this.#keep(lock, windowEnd + this.#o.leaseMs)
  }

  /** Holds a tick that ran until `until` (wall clock), so nobody runs it again in its window. */
  #keep(lock: Lock, until: number): void {
    // Not cut short by stop(): a tick released inside its window would be run again.
    const kept = pause(until - Date.now(), new AbortController().signal)
      .then(() => lock.release())
      .then(
        () => {},
        () => {},
      )
      .finally(() => this.#kept.delete(kept))
    this.#kept.add(kept)
  }

  #report(tick: number, outcome: TickOutcome, token?: bigint, error?: Error): void {
    this.#host.emit(
      token === undefined
        ? { type: 'tick', resource: this.key, tick, outcome }
        : { type: 'tick', resource: this.key, tick, outcome, token },
    )
    try {
      this.#o.onTick?.({
        key: this.key,
        tick,
        outcome,
        ...(token === undefined ? {} : { token }),
        ...(error === undefined ? {} : { error }),
      })
    } catch {
      // The user's callback must not stop the schedule.
    }
  }
}
