import { onAbort } from '../abort-listeners.js'
import type { ElectionSource } from '../core/lock-source.js'
import { LeadershipEndedError, LockAbortedError, LockLostError, LockTimeoutError } from '../errors.js'
import type { Lock } from '../lock.js'
import type { DemotionReason, ResolvedLead } from './election-options.js'
import { pause } from './pause.js'

/** A campaign's wait per acquire: long, since a candidate waits for as long as the leader leads. */
const CAMPAIGN_WAIT_MS = 60_000

/**
 * The handle `locker.lead()` returns. The process campaigns until `stop()`: it waits for the lease
 * of `name`, leads while the watchdog renews it, and campaigns again once its term ends.
 */
export interface Leadership {
  /** The election's name (its lock resource). */
  readonly name: string
  /** True while this process leads (its term has not ended as far as it knows). */
  readonly isLeader: boolean
  /** The current term while leading, else undefined. */
  readonly term: bigint | undefined
  /**
   * Milliseconds of the leader's lease still sure on our clock (0 when not leading): the time
   * within which no other candidate can be elected, whatever happens to this process.
   */
  remainingMs(): number
  /**
   * Resigns at once when leading (the lease is released and the next candidate, woken by the
   * release message, is elected), stops campaigning, and resolves when the campaign has ended.
   */
  stop(): Promise<void>
}

/** One term: the lease, the signal handed to `onElected`, when it began. */
interface Term {
  readonly lock: Lock
  readonly controller: AbortController
  readonly startedAt: number
  ended: boolean
  reason: DemotionReason
}

/** Runs one process's campaign for `o.name`. */
export class Campaign implements Leadership {
  readonly name: string
  readonly #host: ElectionSource
  readonly #o: ResolvedLead
  readonly #stop = new AbortController()
  #term: Term | undefined
  /** Settles when a term ends: the loop waits on it while leading. */
  #termEnded: (() => void) | undefined
  readonly #done: Promise<void>

  constructor(host: ElectionSource, options: ResolvedLead) {
    this.#host = host
    this.#o = options
    this.name = options.name
    this.#done = this.#run()
  }

  get isLeader(): boolean {
    return this.#term !== undefined && !this.#term.ended
  }

  get term(): bigint | undefined {
    return this.isLeader ? this.#term?.lock.token : undefined
  }

  remainingMs(): number {
    return this.isLeader ? (this.#term?.lock.remainingMs() ?? 0) : 0
  }

  async stop(): Promise<void> {
    if (!this.#stop.signal.aborted) {
      this.#stop.abort()
      if (this.#term) await this.#end(this.#term, 'stopped')
    }
    await this.#done
  }

  async #run(): Promise<void> {
    const stop = this.#stop.signal
    while (!stop.aborted && !this.#host.closed) {
      const start = performance.now()
      let lock: Lock
      try {
        lock = await this.#host.acquire(this.name, {
          ttlMs: this.#o.ttlMs,
          waitMs: CAMPAIGN_WAIT_MS,
          signal: stop,
          autoExtend: true,
        })
      } catch (error) {
        if (error instanceof LockAbortedError || this.#host.closed) return
        // A wait that ran out campaigns again at once; Redis unavailable: after retryMs.
        if (!(error instanceof LockTimeoutError)) await pause(this.#o.retryMs, stop)
        continue
      }
      if (stop.aborted) {
        await lock.release().catch(() => false)
        return
      }
      const reason = await this.#lead(lock, start)
      if (reason === 'failed') await pause(this.#o.retryMs, stop)
    }
  }

  /** Leads one term; resolves with why it ended, once the lease was given up. */
  async #lead(lock: Lock, start: number): Promise<DemotionReason> {
    const term: Term = {
      lock,
      controller: new AbortController(),
      startedAt: performance.now(),
      ended: false,
      reason: 'lost',
    }
    this.#term = term
    const ended = new Promise<void>((resolve) => (this.#termEnded = resolve))
    const stopListening = onAbort(lock.signal, () => {
      const lost: unknown = lock.signal.reason
      void this.#end(term, lost instanceof LockLostError && lost.reason === 'closed' ? 'closed' : 'lost', lost)
    })
    this.#host.emit({ type: 'elected', resource: this.name, term: lock.token, waitedMs: term.startedAt - start })
    try {
      const result = this.#o.onElected(lock.token, term.controller.signal)
      if (isPromiseLike(result)) {
        result.then(undefined, (error: unknown) => void this.#end(term, 'failed', error))
      }
    } catch (error) {
      void this.#end(term, 'failed', error)
    }
    // Lost before the listener was added (a grant whose validity ran out at once).
    if (lock.signal.aborted) void this.#end(term, 'lost', lock.signal.reason)
    await ended
    stopListening()
    return term.reason
  }

  /** Ends a term once: the leader's signal aborts, then the events and `onDemoted`, then the lease is given up. */
  async #end(term: Term, reason: DemotionReason, cause?: unknown): Promise<void> {
    if (term.ended) return
    term.ended = true
    term.reason = reason
    const token = term.lock.token
    term.controller.abort(new LeadershipEndedError(this.name, token, reason, cause))
    this.#host.emit({
      type: 'demoted',
      resource: this.name,
      term: token,
      ledMs: performance.now() - term.startedAt,
      reason,
    })
    try {
      this.#o.onDemoted?.(reason, token)
    } catch {
      // The user's callback must not stop the campaign.
    }
    // A lost lease may still be ours in Redis (expired on our clock first): give it back anyway.
    await term.lock.release().catch(() => false)
    if (this.#term === term) this.#term = undefined
    const wake = this.#termEnded
    this.#termEnded = undefined
    wake?.()
  }
}

function isPromiseLike(value: unknown): value is PromiseLike<unknown> {
  return (
    value !== null &&
    (typeof value === 'object' || typeof value === 'function') &&
    typeof (value as { then?: unknown }).then === 'function'
  )
}
