/**
 * The local wait queues of a Locker: its blocked acquires, per resource, oldest first. Only the
 * oldest tries at a time, and only when there is reason to: a release message (pub/sub), our own
 * release, the end of the holder's lease or of a hand-off, or the safety poll, which also renews
 * our place in the resource's queue in Redis. Waiters end by a grant, their wait running out
 * (`waitMs`), their signal, or the Locker closing; an emptied queue stays subscribed for a while
 * (`pollMs`), so alternating contenders do not churn SUBSCRIBE.
 *
 * The queues know nothing of Redis: tries go through the Locker, subscriptions and the Redis-side
 * queue through the backend (backend.ts).
 */
import type { LockBackend, LockResource, QueueMode } from './backend.js'
import type { Lock } from './lock.js'
import type { ResolvedAcquire } from './options.js'

/** What one try came to, as the queues see it. */
export type Attempt = { readonly granted: true; readonly lock: Lock } | { readonly granted: false; readonly holderTtlMs: number; readonly error?: undefined } | { readonly granted: false; readonly error: Error; readonly cut: boolean }

/** What the queues need from their Locker. */
export interface WaitHost {
  readonly backend: LockBackend
  /** Mean period of the safety poll, ms. */
  readonly pollMs: number
  /** True once the Locker is closed: nothing more is tried. */
  readonly closed: boolean
  /** One try: `first` for an acquire's first, sent at `sentAt`; `waitUntil` bounds its wait. */
  attempt(resource: LockResource, o: ResolvedAcquire, sentAt: number, waitUntil: number | undefined, first: boolean, queue: QueueMode): Promise<Attempt>
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
  /** An attempt of this waiter is in flight: its deadline waits for it (its abort does not). */
  running: boolean
  done: boolean
  timer: NodeJS.Timeout | undefined
  onAbort: (() => void) | undefined
  resolve(lock: Lock): void
  reject(error: Error): void
}

/** The waiters of one resource, oldest first. */
interface ResourceQueue {
  readonly resource: LockResource
  readonly waiters: Waiter[]
  /** The subscription is confirmed (or could not be made in time): tries may start. */
  ready: boolean
  running: boolean
  /** A wake arrived while an attempt was in flight: try again right after it. */
  wakeAgain: boolean
  /** The next try, and when it fires (Infinity while none is armed). */
  timer: NodeJS.Timeout | undefined
  timerAt: number
  /**
   * When the head must try at the latest: a jittered `pollMs` after its last try. Each try renews
   * our lease in the Redis queue, so no message may push a try past this.
   */
  pollAt: number
  /** How the latest attempt ended, to tell a timeout from an unavailable Redis. */
  lastError: Error | undefined
  lastHolderTtlMs: number
  errorStreak: number
  /** Counts wakes (release messages, local releases) to catch one that came during an attempt. */
  wakes: number
  linger: NodeJS.Timeout | undefined
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
    let q = this.#queues.get(name)
    if (q && q.waiters.length > 0) {
      host.contended(name, q.lastHolderTtlMs)
      if (o.waitMs === 0) throw host.giveUp(name, start, q.lastError)
      return this.#wait(q, resource, o, start, deadline, 0, false)
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
    return this.#wait(q, resource, o, start, deadline, 1, retryAtOnce)
  }

  /** The acquire's first try, given up at once when its signal aborts (the try goes on). */
  #firstAttempt(resource: LockResource, o: ResolvedAcquire, start: number, deadline: number, queue: QueueMode): Promise<Attempt | typeof ABORTED> {
    const attempt = this.#host.attempt(resource, o, start, o.waitMs === 0 ? undefined : deadline, true, queue)
    const signal = o.signal
    if (!signal) return attempt
    return new Promise((resolve) => {
      let settled = false
      const onAbort = (): void => {
        settled = true
        resolve(ABORTED)
        // Whatever the try brings when it answers is not wanted any more.
        void attempt.then((a) => {
          if (a.granted) a.lock.release().catch(() => {})
          this.#leaveIfIdle(resource)
        })
      }
      signal.addEventListener('abort', onAbort, { once: true })
      void attempt.then((a) => {
        if (settled) return
        signal.removeEventListener('abort', onAbort)
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

  #wait(q: ResourceQueue, resource: LockResource, o: ResolvedAcquire, start: number, deadline: number, attempts: number, retryAtOnce: boolean): Promise<Lock> {
    return new Promise<Lock>((resolve, reject) => {
      const w: Waiter = { resource, o, start, deadline, attempts, running: false, done: false, timer: undefined, onAbort: undefined, resolve, reject }
      w.timer = setTimeout(() => this.#expire(q, w), Math.max(0, deadline - performance.now()))
      w.timer.unref()
      if (o.signal) {
        w.onAbort = () => this.#abort(q, w)
        o.signal.addEventListener('abort', w.onAbort, { once: true })
      }
      q.waiters.push(w)
      clearTimeout(q.linger)
      q.linger = undefined
      // Only a new head needs a kick; anyone behind it is woken in turn.
      if (q.ready && q.waiters.length === 1) {
        if (retryAtOnce) this.#pump(q)
        else this.#arm(q, this.#hintAfter(q))
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
    if (!q || q.running || q.waiters.length === 0 || !Number.isFinite(handoffMs)) return
    q.lastHolderTtlMs = handoffMs
    this.#arm(q, handoffMs + 1)
  }

  /** Rejects every waiter (the Locker closes) and forgets every queue. */
  closeAll(): void {
    for (const q of this.#queues.values()) {
      clearTimeout(q.timer)
      clearTimeout(q.linger)
      for (const w of [...q.waiters]) this.#finish(q, w, this.#host.closedError(w.resource.name))
    }
    this.#queues.clear()
  }

  #open(resource: LockResource, first: Attempt, triedAt: number): ResourceQueue {
    const q: ResourceQueue = {
      resource,
      waiters: [],
      ready: false,
      running: false,
      wakeAgain: false,
      timer: undefined,
      timerAt: Number.POSITIVE_INFINITY,
      pollAt: Number.POSITIVE_INFINITY,
      lastError: undefined,
      lastHolderTtlMs: -1,
      errorStreak: 0,
      wakes: 0,
      linger: undefined,
    }
    this.#record(q, first, triedAt)
    this.#queues.set(resource.name, q)
    // Subscribe before the next attempt: a release between our miss and the subscription is
    // then caught by that attempt, and every later one by the message. (Nothing below rejects:
    // a failed subscription is caught, and the pump handles its attempt's errors itself.)
    void this.#host.backend
      .subscribe(resource)
      .catch(() => {
        // Without the subscription the backstops (holder TTL, safety poll) still work.
      })
      .then(() => {
        q.ready = true
        if (this.#queues.get(resource.name) === q) this.#pump(q)
      })
    return q
  }

  #wakeQueue(q: ResourceQueue): void {
    q.wakes++
    if (!q.ready || q.waiters.length === 0) return
    if (q.running) {
      q.wakeAgain = true
      return
    }
    this.#pump(q)
  }

  /** Lets the oldest waiter try once; arms the next try after a miss. */
  #pump(q: ResourceQueue): void {
    clearTimeout(q.timer)
    q.timer = undefined
    q.timerAt = Number.POSITIVE_INFINITY
    const head = q.waiters[0]
    if (!head) return this.#idle(q)
    if (q.running) return
    q.running = true
    q.wakeAgain = false
    head.running = true
    head.attempts++
    const sentAt = performance.now()
    const queue: QueueMode = q.waiters.length > 1 ? 'stay' : 'join'
    void this.#host.attempt(head.resource, head.o, sentAt, head.deadline, false, queue).then((attempt) => {
      q.running = false
      head.running = false
      this.#record(q, attempt, sentAt)
      if (attempt.granted) {
        if (head.done || head.o.signal?.aborted) {
          // The waiter left while its attempt was in flight: give the lock straight back.
          void attempt.lock.release().catch(() => {})
          if (!head.done) this.#finish(q, head, this.#host.aborted(head.resource.name, head.start, head.o.signal))
        } else {
          this.#finish(q, head, undefined, attempt.lock)
        }
      }
      if (!head.done) {
        if (head.o.signal?.aborted) this.#finish(q, head, this.#host.aborted(head.resource.name, head.start, head.o.signal))
        else if (performance.now() >= head.deadline) this.#finish(q, head, this.#host.giveUp(head.resource.name, head.start, q.lastError))
        else {
          // Its deadline timer may have fired during the attempt (timers can run a little early)
          // and stood aside for it: arm it again, or the waiter would outlive its wait.
          clearTimeout(head.timer)
          head.timer = setTimeout(() => this.#expire(q, head), head.deadline - performance.now())
          head.timer.unref()
        }
      }
      if (this.#queues.get(q.resource.name) !== q) return
      if (q.waiters.length === 0) return this.#idle(q)
      if (q.wakeAgain) return this.#pump(q)
      this.#arm(q, this.#hintAfter(q))
    })
  }

  /**
   * What a try sent at `sentAt` came to: the next poll is due a jittered `pollMs` after it, and
   * its outcome decides the next hint and how a wait that runs out ends (timeout or unavailable).
   * A try cut short by the caller's own wait says nothing about Redis.
   */
  #record(q: ResourceQueue, attempt: Attempt, sentAt: number): void {
    q.pollAt = sentAt + this.#pollDelay()
    if (attempt.granted) {
      q.lastError = undefined
      q.errorStreak = 0
      q.lastHolderTtlMs = attempt.lock.ttlMs
    } else if (attempt.error) {
      if (!attempt.cut) q.lastError = attempt.error
      q.errorStreak++
    } else {
      q.lastError = undefined
      q.errorStreak = 0
      q.lastHolderTtlMs = attempt.holderTtlMs
    }
  }

  /** When the last try's outcome says to try again: an error back-off, or the holder's lease end. */
  #hintAfter(q: ResourceQueue): number | undefined {
    if (q.lastError) return Math.min(this.#host.pollMs, 25 * 2 ** Math.min(q.errorStreak, 6))
    return q.lastHolderTtlMs >= 0 ? q.lastHolderTtlMs + 1 : undefined
  }

  /**
   * Arms the next try: in `hintMs` if given, and never later than the poll (`pollAt`) nor than a
   * try already armed. A message may bring a try earlier, never push it later: trying is what
   * keeps our place in the Redis queue, and a stream of hand-offs to others must not stop it.
   */
  #arm(q: ResourceQueue, hintMs: number | undefined): void {
    const now = performance.now()
    let at = q.pollAt
    if (hintMs !== undefined && now + hintMs < at) at = now + hintMs
    if (q.timer !== undefined && q.timerAt <= at) return
    clearTimeout(q.timer)
    q.timerAt = at
    q.timer = setTimeout(() => this.#pump(q), Math.max(0, at - now))
    q.timer.unref()
  }

  #pollDelay(): number {
    return this.#host.pollMs * (0.8 + 0.4 * Math.random())
  }

  #idle(q: ResourceQueue): void {
    clearTimeout(q.timer)
    q.timer = undefined
    q.timerAt = Number.POSITIVE_INFINITY
    if (q.linger || this.#queues.get(q.resource.name) !== q) return
    q.linger = setTimeout(() => {
      q.linger = undefined
      if (q.waiters.length === 0 && !q.running) this.#close(q)
    }, this.#host.pollMs)
    q.linger.unref()
  }

  #close(q: ResourceQueue): void {
    clearTimeout(q.timer)
    clearTimeout(q.linger)
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
    this.#finish(q, w, this.#host.giveUp(w.resource.name, w.start, q.lastError))
    if (q.waiters.length === 0) this.#idle(q)
  }

  /** At once, even while the waiter's attempt is in flight: its outcome is handled when it comes. */
  #abort(q: ResourceQueue, w: Waiter): void {
    if (w.done) return
    this.#finish(q, w, this.#host.aborted(w.resource.name, w.start, w.o.signal))
    if (q.waiters.length === 0) this.#idle(q)
  }

  /** Nobody here waits for the resource: its queue in Redis is not ours to stand in any more. */
  #leaveIfIdle(resource: LockResource): void {
    const q = this.#queues.get(resource.name)
    if (!q || q.waiters.length === 0) this.#host.backend.leave(resource)
  }

  /** Removes a waiter, clears its timer and listener, and settles it exactly once. */
  #finish(q: ResourceQueue, w: Waiter, error: Error | undefined, lock?: Lock): void {
    if (w.done) return
    w.done = true
    clearTimeout(w.timer)
    if (w.onAbort) w.o.signal?.removeEventListener('abort', w.onAbort)
    const i = q.waiters.indexOf(w)
    if (i >= 0) q.waiters.splice(i, 1)
    if (q.waiters.length === 0) this.#host.backend.leave(q.resource)
    if (lock) {
      this.#host.acquired(lock, w.start, w.attempts)
      w.resolve(lock)
    } else if (error) {
      w.reject(error)
    }
  }
}

/** The first try's stand-in once its signal aborted. */
const ABORTED = Symbol('aborted')
