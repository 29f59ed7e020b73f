/**
 * The local wait queues of a Locker: its blocked acquires, per resource, oldest first. Only the
 * oldest tries at a time, and only when there is reason to: a release message (pub/sub), our own
 * release, the end of the holder's lease or of a hand-off, or the safety poll, which also renews
 * our place in the resource's queue in Redis. Waiters end by a grant, their wait running out
 * (`waitMs`), their signal, or the Locker closing.
 *
 * Each resource's queue is in one of four states:
 *
 * ```
 *   subscribing ──subscribed (or failed: the backstops still work)──▶ waiting
 *   waiting ──a wake, the poll, the holder's lease end──▶ trying ──answered──▶ waiting
 *   waiting ──no waiter left──▶ lingering ──a new waiter──▶ waiting
 *   lingering ──pollMs without a waiter──▶ closed (unsubscribed)
 * ```
 *
 * An emptied queue lingers subscribed for a while (`pollMs`), so alternating contenders do not
 * churn SUBSCRIBE. When the next try is due is schedule.ts's arithmetic. The queues know nothing
 * of Redis: tries go through the Locker, subscriptions and the Redis-side queue through the
 * backend (backend/backend.ts).
 */
import { AsyncResource } from 'node:async_hooks'
import type { LockBackend, LockResource, QueueMode } from '../backend/backend.js'
import { isConnectionDown, isUnreachable } from '../backend/connection-error.js'
import { LockError } from '../errors.js'
import type { Lock } from '../lock.js'
import type { ResolvedAcquire } from '../options.js'
import { onAbort } from '../abort-listeners.js'
import { hintAfter, NO_TRIES, nextTryAt, pollDelay, recordTry, type TryRecord } from './schedule.js'

/** What one try came to, as the queues see it. */
export type Attempt =
  | { readonly granted: true; readonly lock: Lock }
  | { readonly granted: false; readonly holderTtlMs: number; readonly error?: undefined }
  | { readonly granted: false; readonly error: Error; readonly cut: boolean }

/** What the queues need from their Locker. */
export interface WaitHost {
  readonly backend: LockBackend
  /** Mean period of the safety poll, ms. */
  readonly pollMs: number
  /** True once the Locker is closed: nothing more is tried. */
  readonly closed: boolean
  /** One try: `first` for an acquire's first, sent at `sentAt`; `waitUntil` bounds its wait. */
  attempt(
    resource: LockResource,
    o: ResolvedAcquire,
    sentAt: number,
    waitUntil: number | undefined,
    first: boolean,
    queue: QueueMode,
  ): Promise<Attempt>
  /** Events, and the errors an acquire ends with (each emits its event). */
  contended(resource: string, holderTtlMs: number): void
  acquired(lock: Lock, start: number, attempts: number): void
  giveUp(resource: string, start: number, lastError: Error | undefined): Error
  aborted(resource: string, start: number, signal: AbortSignal | undefined): Error
  closedError(resource: string): Error
}

/** One blocked acquire. */
interface Waiter {
  readonly resource: LockResource
  readonly o: ResolvedAcquire
  readonly start: number
  readonly deadline: number
  attempts: number
  /**
   * Redis has answered for this waiter (the lock was held), or it queued here behind others: it
   * keeps its place across a reconnection until its wait runs out. One that never reached Redis
   * ends at once when its try finds Redis unreachable.
   */
  reached: boolean
  /** An attempt of this waiter is in flight: its deadline waits for it (its abort does not). */
  running: boolean
  done: boolean
  timer: NodeJS.Timeout | undefined
  stopListening: (() => void) | undefined
  /**
   * The async context the acquire was called in. Its outcome (acquired, timed out, aborted) is
   * emitted in it, whatever settles the waiter — a release message, another waiter's release, a
   * timer, an abort — so a listener sees the caller's context (a tracer's active span, say).
   */
  readonly caller: AsyncResource
  resolve(lock: Lock): void
  reject(error: Error): void
}

type QueueState = 'subscribing' | 'waiting' | 'trying' | 'lingering'

/** The waiters of one resource, oldest first. */
interface ResourceQueue {
  readonly resource: LockResource
  readonly waiters: Waiter[]
  state: QueueState
  /** A wake arrived while trying: try again right after. */
  wakeAgain: boolean
  /** Counts wakes (release messages, local releases) to catch one that came during a first try. */
  wakes: number
  /** What the tries so far came to (schedule.ts). */
  tries: TryRecord
  /** Waiting: the next try, and when it fires. Lingering: the close. */
  timer: NodeJS.Timeout | undefined
  timerAt: number | undefined
}

/** A fatal attempt error (a misconfiguration only I/O could show) ends the acquire at once. */
function isFatal(attempt: Attempt): attempt is { granted: false; error: Error; cut: boolean } {
  return !attempt.granted && attempt.error instanceof LockError
}

/**
 * Redis is down for an acquire that never reached it: the client knows its connection is down
 * and failed to (re)connect (ECONNREFUSED, ENOTFOUND, …). Waiting `waitMs` would change nothing
 * the caller can see but the delay, so the acquire ends at once (`LockUnavailableError`).
 */
function isDown(attempt: Attempt): attempt is { granted: false; error: Error; cut: boolean } {
  return !attempt.granted && isUnreachable(attempt.error)
}

/** The wait queues of one Locker. */
export class WaitQueues {
  readonly #host: WaitHost
  readonly #queues = new Map<string, ResourceQueue>()

  constructor(host: WaitHost) {
    this.#host = host
  }

  /**
   * Acquires `resource`: tries at once unless others here already wait for it (then it queues
   * behind them rather than barge in), then waits its turn.
   */
  async acquire(resource: LockResource, o: ResolvedAcquire, start: number): Promise<Lock> {
    const host = this.#host
    const name = resource.name
    const deadline = start + o.waitMs
    // The client knows its connection is down: a try would not be sent, and nothing here tells
    // when it comes back. (A waiter already queued keeps its place; a new one does not wait.)
    const down = host.backend.connectionDown?.()
    if (down) throw host.giveUp(name, start, down)
    let q = this.#queues.get(name)
    if (q && q.waiters.length > 0) {
      host.contended(name, q.tries.lastHolderTtlMs)
      if (o.waitMs === 0) throw host.giveUp(name, start, q.tries.lastError)
      return this.#wait(q, resource, o, start, deadline, 0, false, true)
    }
    const wakesBefore = q?.wakes
    // The first try joins the Redis queue only where this locker has waited for the resource
    // lately (its queue is still here): elsewhere it is the lean script, as most acquires find
    // the lock free.
    const queue: QueueMode = q !== undefined && o.waitMs > 0 ? 'join' : 'none'
    const attempt = await this.#firstAttempt(resource, o, start, deadline, queue)
    if (attempt === ABORTED) throw host.aborted(name, start, o.signal)
    if (attempt.granted) return this.#take(attempt.lock, resource, o, start)
    if (host.closed) throw host.closedError(name)
    if (isFatal(attempt)) {
      this.#leaveIfIdle(resource)
      throw attempt.error
    }
    if (isDown(attempt)) {
      this.#leaveIfIdle(resource)
      throw host.giveUp(name, start, attempt.error)
    }
    if (attempt.error === undefined) host.contended(name, attempt.holderTtlMs)
    if (performance.now() >= deadline) {
      this.#leaveIfIdle(resource)
      throw host.giveUp(name, start, attempt.error)
    }
    const current = this.#queues.get(name)
    // A release announced while our attempt was in flight may have come before its reply.
    const retryAtOnce = current !== undefined && current === q && current.wakes !== wakesBefore
    if (current) this.#record(current, attempt, start)
    q = current ?? this.#open(resource, attempt, start)
    return this.#wait(q, resource, o, start, deadline, 1, retryAtOnce, attempt.error === undefined)
  }

  /** The acquire's first try, given up at once when its signal aborts (the try goes on). */
  #firstAttempt(
    resource: LockResource,
    o: ResolvedAcquire,
    start: number,
    deadline: number,
    queue: QueueMode,
  ): Promise<Attempt | typeof ABORTED> {
    const attempt = this.#host.attempt(resource, o, start, o.waitMs === 0 ? undefined : deadline, true, queue)
    const signal = o.signal
    if (!signal) return attempt
    return new Promise((resolve) => {
      let settled = false
      const stop = onAbort(signal, () => {
        settled = true
        resolve(ABORTED)
        // Whatever the try brings when it answers is not wanted any more.
        void attempt.then((a) => {
          if (a.granted) a.lock.release().catch(() => {})
          this.#leaveIfIdle(resource)
        })
      })
      void attempt.then((a) => {
        if (settled) return
        stop()
        resolve(a)
      })
    })
  }

  /** A first try's grant: still wanted unless the signal aborted meanwhile. */
  async #take(lock: Lock, resource: LockResource, o: ResolvedAcquire, start: number): Promise<Lock> {
    if (o.signal?.aborted) {
      await lock.release().catch(() => {})
      throw this.#host.aborted(resource.name, start, o.signal)
    }
    this.#host.acquired(lock, start, 1)
    return lock
  }

  #wait(
    q: ResourceQueue,
    resource: LockResource,
    o: ResolvedAcquire,
    start: number,
    deadline: number,
    attempts: number,
    retryAtOnce: boolean,
    reached: boolean,
  ): Promise<Lock> {
    return new Promise<Lock>((resolve, reject) => {
      const w: Waiter = {
        resource,
        o,
        start,
        deadline,
        attempts,
        reached,
        running: false,
        done: false,
        timer: undefined,
        stopListening: undefined,
        caller: new AsyncResource('FenceLockWaiter'),
        resolve,
        reject,
      }
      w.timer = setTimeout(() => this.#expire(q, w), Math.max(0, deadline - performance.now()))
      w.timer.unref()
      if (o.signal) w.stopListening = onAbort(o.signal, () => this.#abort(q, w))
      q.waiters.push(w)
      if (q.state === 'lingering') {
        this.#clearTimer(q)
        q.state = 'waiting'
      }
      // Only a new head needs a kick; anyone behind it is woken in turn.
      if (q.state === 'waiting' && q.waiters.length === 1) {
        if (retryAtOnce) this.#pump(q)
        else this.#arm(q, hintAfter(q.tries, this.#host.pollMs))
      }
    })
  }

  /** A release may have freed the resource (or handed it to us): the head tries now. */
  wake(name: string): void {
    const q = this.#queues.get(name)
    if (q) this.#wakeQueue(q)
  }

  /** Every queue tries (after a reconnect: messages may have been lost). */
  wakeAll(): void {
    for (const q of this.#queues.values()) this.#wakeQueue(q)
  }

  /**
   * The resource was handed to another locker for `handoffMs`: the head tries when that runs
   * out (in case that locker never comes), or sooner if it was due sooner anyway.
   */
  handedElsewhere(name: string, handoffMs: number): void {
    const q = this.#queues.get(name)
    if (!q || q.state !== 'waiting' || q.waiters.length === 0 || !Number.isFinite(handoffMs)) return
    q.tries = { ...q.tries, lastHolderTtlMs: handoffMs }
    this.#arm(q, handoffMs + 1)
  }

  /** Rejects every waiter (the Locker closes) and forgets every queue. */
  closeAll(): void {
    for (const q of this.#queues.values()) {
      this.#clearTimer(q)
      for (const w of [...q.waiters]) this.#finish(q, w, this.#host.closedError(w.resource.name))
    }
    this.#queues.clear()
  }

  #open(resource: LockResource, first: Attempt, triedAt: number): ResourceQueue {
    const q: ResourceQueue = {
      resource,
      waiters: [],
      state: 'subscribing',
      wakeAgain: false,
      wakes: 0,
      tries: NO_TRIES,
      timer: undefined,
      timerAt: undefined,
    }
    this.#record(q, first, triedAt)
    this.#queues.set(resource.name, q)
    const subscribed = () => {
      if (this.#queues.get(resource.name) !== q || q.state !== 'subscribing') return
      q.state = 'waiting'
      this.#pump(q)
    }
    // Subscribe before the next attempt: a release between our miss and the subscription is
    // then caught by that attempt, and every later one by the message. (Nothing below rejects:
    // a failed subscription is caught, and the pump handles its attempt's errors itself.)
    void this.#host.backend
      .subscribe(resource)
      .catch(() => {
        // Without the subscription the backstops (holder TTL, safety poll) still work.
      })
      .then(subscribed)
    // The connection was down: the subscription waits in the client's offline queue (ioredis keeps
    // it for 20 reconnection attempts, node-redis until it connects), and the next tries must not
    // wait for it — they are what finds Redis unreachable (the acquire ends) or back.
    if (!first.granted && isConnectionDown(first.error)) subscribed()
    return q
  }

  #wakeQueue(q: ResourceQueue): void {
    q.wakes++
    if (q.state === 'trying') q.wakeAgain = true
    else if (q.state === 'waiting') this.#pump(q)
  }

  /** Lets the oldest waiter try once (in `waiting`); arms the next try after a miss. */
  #pump(q: ResourceQueue): void {
    if (q.state !== 'waiting') return
    this.#clearTimer(q)
    const head = q.waiters[0]
    if (!head) return this.#linger(q)
    q.state = 'trying'
    q.wakeAgain = false
    head.running = true
    head.attempts++
    const sentAt = performance.now()
    const queue: QueueMode = q.waiters.length > 1 ? 'stay' : 'join'
    void this.#host.attempt(head.resource, head.o, sentAt, head.deadline, false, queue).then((attempt) => {
      head.running = false
      this.#record(q, attempt, sentAt)
      this.#settleHead(q, head, attempt)
      if (this.#queues.get(q.resource.name) !== q) return
      q.state = 'waiting'
      if (q.waiters.length === 0) return this.#linger(q)
      if (q.wakeAgain) return this.#pump(q)
      this.#arm(q, hintAfter(q.tries, this.#host.pollMs))
    })
  }

  /** What the head's try means for it: the lock, its end (aborted, timed out, fatal), or more waiting. */
  #settleHead(q: ResourceQueue, head: Waiter, attempt: Attempt): void {
    if (attempt.granted) {
      if (head.done || head.o.signal?.aborted) {
        // The waiter left while its attempt was in flight: give the lock straight back.
        void attempt.lock.release().catch(() => {})
        if (!head.done) this.#finish(q, head, this.#aborted(head))
      } else {
        this.#finish(q, head, undefined, attempt.lock)
      }
    }
    if (head.done) return
    if (!attempt.granted && attempt.error === undefined) head.reached = true
    if (head.o.signal?.aborted) this.#finish(q, head, this.#aborted(head))
    else if (isFatal(attempt)) this.#finish(q, head, attempt.error)
    else if (!head.reached && isDown(attempt)) this.#finish(q, head, this.#giveUp(q, head))
    else if (performance.now() >= head.deadline) this.#finish(q, head, this.#giveUp(q, head))
    else {
      // Its deadline timer may have fired during the attempt (timers can run a little early)
      // and stood aside for it: arm it again, or the waiter would outlive its wait.
      clearTimeout(head.timer)
      head.timer = setTimeout(() => this.#expire(q, head), head.deadline - performance.now())
      head.timer.unref()
    }
  }

  #record(q: ResourceQueue, attempt: Attempt, sentAt: number): void {
    const outcome = attempt.granted ? { granted: true as const, ttlMs: attempt.lock.ttlMs } : attempt
    q.tries = recordTry(q.tries, outcome, sentAt, pollDelay(this.#host.pollMs, Math.random()))
  }

  /** Arms the next try (schedule.ts): never later than the poll, nor than a try already armed. */
  #arm(q: ResourceQueue, hintMs: number | undefined): void {
    const now = performance.now()
    const at = nextTryAt(now, q.tries, hintMs, q.timerAt)
    if (at === undefined) return
    clearTimeout(q.timer)
    q.timerAt = at
    q.timer = setTimeout(() => this.#pump(q), Math.max(0, at - now))
    q.timer.unref()
  }

  #clearTimer(q: ResourceQueue): void {
    clearTimeout(q.timer)
    q.timer = undefined
    q.timerAt = undefined
  }

  /** No waiter left: stay subscribed for `pollMs`, then close. */
  #linger(q: ResourceQueue): void {
    this.#clearTimer(q)
    if (this.#queues.get(q.resource.name) !== q) return
    q.state = 'lingering'
    q.timer = setTimeout(() => {
      if (q.state === 'lingering') this.#close(q)
    }, this.#host.pollMs)
    q.timer.unref()
  }

  #close(q: ResourceQueue): void {
    this.#clearTimer(q)
    if (this.#queues.get(q.resource.name) !== q) return
    this.#queues.delete(q.resource.name)
    this.#host.backend.unsubscribe(q.resource)
  }

  #expire(q: ResourceQueue, w: Waiter): void {
    if (w.done || w.running) return
    // libuv runs timers on its cached loop time, which can lag: never give up early.
    const left = w.deadline - performance.now()
    if (left > 0) {
      w.timer = setTimeout(() => this.#expire(q, w), left)
      w.timer.unref()
      return
    }
    this.#finish(q, w, this.#giveUp(q, w))
    this.#lingerIfEmpty(q)
  }

  /** At once, even while the waiter's attempt is in flight: its outcome is handled when it comes. */
  #abort(q: ResourceQueue, w: Waiter): void {
    if (w.done) return
    this.#finish(q, w, this.#aborted(w))
    this.#lingerIfEmpty(q)
  }

  /** A waiting queue that lost its last waiter lingers (a trying one does when its try answers). */
  #lingerIfEmpty(q: ResourceQueue): void {
    if (q.state === 'waiting' && q.waiters.length === 0) this.#linger(q)
  }

  /** Nobody here waits for the resource: its queue in Redis is not ours to stand in any more. */
  #leaveIfIdle(resource: LockResource): void {
    const q = this.#queues.get(resource.name)
    if (!q || q.waiters.length === 0) this.#host.backend.leave(resource)
  }

  /** The error of a waiter whose wait ran out; its event (timeout, unavailable) goes out in its caller's context. */
  #giveUp(q: ResourceQueue, w: Waiter): Error {
    return w.caller.runInAsyncScope(() => this.#host.giveUp(w.resource.name, w.start, q.tries.lastError))
  }

  /** The error of a waiter whose signal aborted; its `aborted` event goes out in its caller's context. */
  #aborted(w: Waiter): Error {
    return w.caller.runInAsyncScope(() => this.#host.aborted(w.resource.name, w.start, w.o.signal))
  }

  /** Removes a waiter, clears its timer and listener, and settles it exactly once. */
  #finish(q: ResourceQueue, w: Waiter, error: Error | undefined, lock?: Lock): void {
    if (w.done) return
    w.done = true
    clearTimeout(w.timer)
    w.stopListening?.()
    const i = q.waiters.indexOf(w)
    if (i >= 0) q.waiters.splice(i, 1)
    if (q.waiters.length === 0) this.#host.backend.leave(q.resource)
    if (lock) {
      w.caller.runInAsyncScope(() => this.#host.acquired(lock, w.start, w.attempts))
      w.resolve(lock)
    } else if (error) {
      w.reject(error)
    }
  }
}

/** The first try's stand-in once its signal aborted. */
const ABORTED = Symbol('aborted')
