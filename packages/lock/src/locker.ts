import type { Cluster, Redis } from 'ioredis'
import { NO_QUEUE, sendAcquire, toAttempt, type AcquireAttempt, type QueueArgs } from './acquire-script.js'
import { DeadlineExceededError, Deadlines } from './deadline.js'
import { InvalidLockOptionError, LockAbortedError, LockTimeoutError, LockUnavailableError } from './errors.js'
import type { LockEvent } from './events.js'
import { resourceKeys, resourceOfChannel, type ResourceKeys } from './keys.js'
import { asError, Lock, type LockHost } from './lock.js'
import { newOwnerId } from './owner-id.js'
import {
  checkResource,
  resolveAcquireOptions,
  resolveLockerOptions,
  type AcquireOptions,
  type LockerOptions,
  type ResolvedAcquire,
  type ResolvedLockerOptions,
  type TryAcquireOptions,
  type UsingOptions,
} from './options.js'
import { leaveQueue, releaseOnce } from './release-script.js'
import type { Handling } from './script.js'

/** The client a Locker runs on: an ioredis `Redis` or `Cluster`. */
export type RedisClient = Redis | Cluster

type Subscriber = Redis | Cluster

/** One blocked acquire. */
interface Waiter {
  readonly resource: string
  readonly keys: ResourceKeys
  readonly ttlMs: number
  readonly autoExtend: boolean
  readonly start: number
  readonly deadline: number
  readonly signal: AbortSignal | undefined
  attempts: number
  /** An attempt of this waiter is in flight; its deadline and signal wait for it. */
  running: boolean
  done: boolean
  timer: NodeJS.Timeout | undefined
  onAbort: (() => void) | undefined
  resolve(lock: Lock): void
  reject(error: Error): void
}

/** The local waiters of one resource, oldest first. Only the oldest tries at a time. */
interface WaitQueue {
  readonly resource: string
  readonly keys: ResourceKeys
  readonly waiters: Waiter[]
  /** Resolves once the channel subscription is confirmed (or could not be made in time). */
  ready: boolean
  running: boolean
  /** A wake arrived while an attempt was in flight: try again right after it. */
  wakeAgain: boolean
  /** Backstop: the holder's TTL runs out, or the jittered safety poll, or an error back-off. */
  timer: NodeJS.Timeout | undefined
  /** How the latest attempt ended, to tell a timeout from an unavailable Redis. */
  lastError: Error | undefined
  lastHolderTtlMs: number
  errorStreak: number
  /** Counts wakes (release messages, local releases) to catch one that came during an attempt. */
  wakes: number
  /** An empty queue stays subscribed for a while, so alternating contenders do not churn SUBSCRIBE. */
  linger: NodeJS.Timeout | undefined
  /** This locker may stand in the resource's queue in Redis (an attempt of ours missed). */
  queued: boolean
}

/** Resources whose key names a Locker keeps built (then it starts over). */
const KEY_CACHE_SIZE = 1_024

/**
 * The handling of one acquire round trip: its deadline, its reply, and its clean-up, a
 * compare-and-delete of the owner id, sent when the outcome is unknown, and again should the
 * acquire come back granted after all (its NOSCRIPT fallback, say, went out after the first
 * delete). One object per attempt; measured cheaper than closures for the same.
 */
class AcquireCall implements Handling<Attempt> {
  constructor(
    readonly sink: AttemptSink,
    readonly deadlines: Deadlines,
    readonly ms: number,
    readonly sentAt: number,
    readonly resource: string,
    readonly keys: ResourceKeys,
    readonly ownerId: string,
    readonly ttlMs: number,
    readonly autoExtend: boolean,
    /** A miss of this attempt puts our locker in the resource's queue in Redis. */
    readonly queued: boolean,
  ) {}

  map(reply: unknown): Attempt {
    return this.sink.answered(this, toAttempt(reply))
  }

  mapError(error: unknown): Attempt {
    return this.sink.failed(this, error)
  }

  onLate(reply: unknown): void {
    if (typeof reply === 'string' || Array.isArray(reply)) this.sink.cleanUp(this) // a token: granted after all
    else if (this.queued) this.sink.lateMiss(this) // it queued us, maybe after our waiter gave up
  }
}

/** What an {@link AcquireCall} reports to its Locker. */
interface AttemptSink {
  answered(call: AcquireCall, outcome: AcquireAttempt): Attempt
  failed(call: AcquireCall, error: unknown): Attempt
  cleanUp(call: AcquireCall): void
  lateMiss(call: AcquireCall): void
}

/**
 * `cut`: the attempt ran out of the caller's remaining wait, not of `commandTimeoutMs`. That says
 * nothing about Redis (a loaded event loop does it too), so it never overrides a held lock seen
 * earlier: the waiter then times out, it is not told that Redis is unavailable.
 */
type Attempt = { granted: true; lock: Lock; handedOver: boolean } | { granted: false; holderTtlMs: number } | { granted: false; error: Error; cut: boolean }

/**
 * Grants locks on Redis with fencing tokens. One Locker per process is the usual set-up: its
 * blocked acquires share one subscriber connection and wait in one queue per resource.
 *
 * @example
 * ```ts
 * const locker = new Locker(new Redis(process.env.REDIS_URL), { ttlMs: 10_000 })
 * await locker.using('order:42', async (lock) => {
 *   await chargeOnce(order, { fenceToken: lock.token, signal: lock.signal })
 * })
 * ```
 */
export class Locker {
  readonly #redis: RedisClient
  readonly #deadlines = new Deadlines()
  /** `acquire()` options when none are given: resolved once, not per call. */
  readonly #defaultAcquire: ResolvedAcquire
  /** How our attempts queue in Redis on a miss (see acquire-script.ts). */
  readonly #queueArgs: QueueArgs
  readonly #queueArgsMore: QueueArgs
  /** Key names of recently used resources, so a hot resource's names are built once. */
  readonly #keyCache = new Map<string, ResourceKeys>()
  readonly #options: ResolvedLockerOptions
  readonly #queues = new Map<string, WaitQueue>()
  /** Locks granted and not yet released or lost, by serial (a number key: no identity hash). */
  readonly #held = new Map<number, Lock>()
  #serial = 0
  readonly #listeners = new Set<(event: LockEvent) => void>()
  readonly #host: LockHost
  #subscriber: Subscriber | undefined
  #closed = false
  /** Smoothed round trip of acquire attempts (TCP's estimator), 0 until the first answer. */
  #srttMs = 0

  /**
   * @param redis an ioredis `Redis` or `Cluster`; the Locker never closes it.
   * @param options see {@link LockerOptions}; defaults in `LOCK_DEFAULTS`.
   * @throws InvalidLockOptionError for a bad option, before any I/O.
   */
  constructor(redis: RedisClient, options: LockerOptions = {}) {
    if (redis == null || typeof (redis as Partial<Redis>).evalsha !== 'function' || typeof (redis as Partial<Redis>).duplicate !== 'function') {
      throw new InvalidLockOptionError('redis', 'must be an ioredis Redis or Cluster client', redis)
    }
    this.#options = resolveLockerOptions(options)
    this.#defaultAcquire = resolveAcquireOptions(undefined, this.#options)
    this.#redis = redis
    const onEvent = this.#options.onEvent
    if (onEvent) this.#listeners.add(onEvent)
    const listeners = this.#listeners
    this.#host = {
      client: redis,
      deadlines: this.#deadlines,
      commandTimeoutMs: this.#options.commandTimeoutMs,
      // Names this locker in release messages and wait queues. Not a secret: it grants nothing.
      lockerId: newOwnerId().slice(0, 16),
      handoffMs: this.#options.handoffMs,
      get listening() {
        return listeners.size > 0
      },
      emit: (event: LockEvent) => {
        for (const listener of listeners) {
          try {
            listener(event)
          } catch {
            // A listener's failure must never break locking.
          }
        }
      },
      onLockEnd: (serial) => {
        this.#held.delete(serial)
      },
      wake: (resource, handedTo) => {
        if (handedTo === undefined || handedTo === this.#host.lockerId) this.#wake(resource)
      },
    }
    // A queued locker that stops trying (a crashed process) is dropped after this lease. Waiters
    // try at least every 1.2 × pollMs (the safety poll), so a live one always renews it in time.
    const leaseMs = 3 * this.#options.pollMs + this.#options.commandTimeoutMs
    this.#queueArgs = Object.freeze({ lockerId: this.#host.lockerId, leaseMs, more: false })
    this.#queueArgsMore = Object.freeze({ lockerId: this.#host.lockerId, leaseMs, more: true })
  }

  /**
   * Adds an event listener besides the `onEvent` option (the metrics package uses this).
   * Listeners run synchronously; what they throw is ignored.
   * @returns a function that removes the listener.
   */
  listen(listener: (event: LockEvent) => void): () => void {
    if (typeof listener !== 'function') throw new InvalidLockOptionError('listener', 'must be a function', listener)
    this.#listeners.add(listener)
    return () => {
      this.#listeners.delete(listener)
    }
  }

  /** How many locks granted by this locker are held now (not released, not lost). */
  get heldCount(): number {
    return this.#held.size
  }

  /** The options in force, defaults filled in. */
  get options(): Readonly<Omit<ResolvedLockerOptions, 'onEvent'>> {
    const { onEvent: _, ...rest } = this.#options
    return rest
  }

  /**
   * Acquires `resource`, waiting up to `waitMs` while someone else holds it.
   * @throws LockTimeoutError after `waitMs` with the lock still held.
   * @throws LockAbortedError when `signal` aborts first.
   * @throws LockUnavailableError when Redis did not answer within the wait.
   * @throws InvalidLockOptionError for bad input, before any I/O.
   */
  async acquire(resource: string, options?: AcquireOptions): Promise<Lock> {
    const keys = this.#keysOf(resource)
    const name = resource
    const o = options === undefined ? this.#defaultAcquire : resolveAcquireOptions(options, this.#options)
    this.#assertOpen(name)
    const start = performance.now()
    if (o.signal?.aborted) throw this.#aborted(name, start, o.signal)
    const deadline = start + o.waitMs
    let queue = this.#queues.get(name)
    let firstError: Error | undefined
    let retryAtOnce = false
    let tried = false
    if (!queue || queue.waiters.length === 0) {
      // Nobody here is waiting for it: try straight away.
      const wakesBefore = queue?.wakes
      // The first try queues in Redis only where this locker has waited for the resource lately
      // (its queue is still here): elsewhere it is the lean script, as most acquires find the key
      // free. The tries of a waiter always queue.
      const queueFirst = queue !== undefined && o.waitMs > 0
      const attempt = await this.#attempt(name, keys, o.ttlMs, o.autoExtend, o.waitMs === 0 ? undefined : deadline, start, queueFirst, false)
      const queued = queueFirst && 'holderTtlMs' in attempt
      tried = true
      if (attempt.granted) {
        if (attempt.handedOver && queue) queue.queued = false
        if (o.signal?.aborted) {
          await attempt.lock.release().catch(() => {})
          throw this.#aborted(name, start, o.signal)
        }
        this.#emitAcquired(attempt.lock, start, 1)
        return attempt.lock
      }
      const stop = this.#closed
        ? new LockUnavailableError(name, 'acquire', 'the locker was closed')
        : o.signal?.aborted
          ? this.#aborted(name, start, o.signal)
          : undefined
      if (stop) {
        if (queued) this.#leftQueue(name, keys)
        throw stop
      }
      if ('holderTtlMs' in attempt) this.#host.emit({ type: 'contended', resource: name, holderTtlMs: attempt.holderTtlMs })
      else firstError = attempt.error
      if (performance.now() >= deadline) {
        if (queued) this.#leftQueue(name, keys)
        throw this.#giveUp(name, start, firstError)
      }
      const current = this.#queues.get(name)
      // A release announced while our attempt was in flight may have come before its reply.
      retryAtOnce = current !== undefined && current === queue && current.wakes !== wakesBefore
      queue = current ?? this.#openQueue(name, keys, attempt)
      if (queued) queue.queued = true
    } else {
      // Others here are already waiting: queue behind them instead of barging in.
      this.#host.emit({ type: 'contended', resource: name, holderTtlMs: queue.lastHolderTtlMs })
      if (o.waitMs === 0) throw this.#giveUp(name, start, queue.lastError)
    }
    const q = queue
    return new Promise<Lock>((resolve, reject) => {
      const waiter: Waiter = {
        resource: name,
        keys,
        ttlMs: o.ttlMs,
        autoExtend: o.autoExtend,
        start,
        deadline,
        signal: o.signal,
        attempts: tried ? 1 : 0,
        running: false,
        done: false,
        timer: undefined,
        onAbort: undefined,
        resolve,
        reject,
      }
      waiter.timer = setTimeout(() => this.#expireWaiter(q, waiter), Math.max(0, deadline - performance.now()))
      if (o.signal) {
        waiter.onAbort = () => this.#abortWaiter(q, waiter)
        o.signal.addEventListener('abort', waiter.onAbort, { once: true })
      }
      q.waiters.push(waiter)
      clearTimeout(q.linger)
      q.linger = undefined
      // Only a new head needs a kick; anyone behind it is woken in turn.
      if (q.ready && q.waiters.length === 1) {
        if (retryAtOnce) this.#pump(q)
        else this.#armBackstop(q)
      }
    })
  }

  /**
   * One attempt, no waiting.
   * @returns the lock, or null when someone else holds it.
   * @throws LockUnavailableError when Redis did not answer within `commandTimeoutMs`.
   */
  async tryAcquire(resource: string, options?: TryAcquireOptions): Promise<Lock | null> {
    const keys = this.#keysOf(resource)
    const name = resource
    const o = options === undefined ? this.#defaultAcquire : resolveAcquireOptions(options, this.#options)
    this.#assertOpen(name)
    const start = performance.now()
    const attempt = await this.#attempt(name, keys, o.ttlMs, o.autoExtend, undefined, start, false, false)
    if (attempt.granted) {
      this.#emitAcquired(attempt.lock, start, 1)
      return attempt.lock
    }
    if ('error' in attempt) throw this.#unavailable(name, start, attempt.error)
    this.#host.emit({ type: 'contended', resource: name, holderTtlMs: attempt.holderTtlMs })
    return null
  }

  /**
   * Runs `fn` under the lock with the watchdog on, and always releases. `fn` gets the lock; its
   * `signal` aborts if the lock is lost, and its `token` is what fenced writes must carry.
   * A release that fails because Redis is unreachable is reported as an `error` event, not
   * thrown: the lock then expires after its TTL.
   */
  async using<T>(resource: string, fn: (lock: Lock) => Promise<T> | T, options: UsingOptions = {}): Promise<T> {
    if (typeof fn !== 'function') throw new InvalidLockOptionError('fn', 'must be a function', fn)
    const name = checkResource(resource)
    const o = resolveAcquireOptions(options, this.#options, true)
    const lock = await this.acquire(name, o)
    try {
      return await fn(lock)
    } finally {
      await lock.release().catch(() => {})
    }
  }

  /**
   * Rejects blocked acquires, stops every watchdog, releases the locks this locker still holds,
   * and closes the subscriber connection. The Redis client given to the constructor stays open.
   */
  async close(): Promise<void> {
    if (this.#closed) return
    this.#closed = true
    for (const q of this.#queues.values()) {
      clearTimeout(q.timer)
      clearTimeout(q.linger)
      for (const w of [...q.waiters]) {
        this.#finish(q, w, new LockUnavailableError(w.resource, 'acquire', 'the locker was closed'))
      }
    }
    this.#queues.clear()
    await Promise.allSettled([...this.#held.values()].map((lock) => lock.releaseOnClose()))
    this.#subscriber?.disconnect()
    this.#subscriber = undefined
  }

  // --- attempts -----------------------------------------------------------------------------

  /**
   * One acquire round trip with a deadline. When its outcome is unknown (timeout, dropped
   * connection) a compare-and-delete of the owner id is sent behind it: ioredis keeps commands
   * in order on a connection, so if the acquire lands late, the delete lands right after it. And
   * should the late acquire still come back granted (its NOSCRIPT fallback, say, went out after
   * that delete), the delete is sent again then: a grant nobody waits for never stays held.
   */
  #attempt(
    resource: string,
    keys: ResourceKeys,
    ttlMs: number,
    autoExtend: boolean,
    deadline: number | undefined,
    /** The acquire's start when this is its first attempt (it is then sent now). */
    firstAt: number | undefined,
    /** On a miss, join the resource's queue in Redis (an acquire that will wait). */
    queue: boolean,
    /** More of our waiters wait for it: stay queued after a grant. */
    more: boolean,
  ): Promise<Attempt> {
    const ownerId = newOwnerId()
    const first = firstAt !== undefined
    const sentAt = firstAt ?? performance.now()
    // The caller's wait bounds how long we wait for a held lock, not how far away Redis may be:
    // the first attempt of an acquire always gets a few smoothed round trips, so a healthy but
    // distant Redis is never reported unavailable because the wait was short. Later attempts
    // end with the wait; if one is cut short, the held lock seen before decides (`cut`).
    const floor = first ? 3 * this.#srttMs + 2 : 1
    const budget = deadline === undefined ? this.#options.commandTimeoutMs : Math.min(this.#options.commandTimeoutMs, Math.max(floor, deadline - sentAt))
    // One promise for the round trip, its deadline and what comes of it (Script.run).
    const call = new AcquireCall(this.#sink, this.#deadlines, budget, sentAt, resource, keys, ownerId, ttlMs, autoExtend, queue)
    const queueArgs = queue ? (more ? this.#queueArgsMore : this.#queueArgs) : NO_QUEUE
    return sendAcquire(this.#redis, keys, ownerId, ttlMs, this.#options.fenceTtlMs, queueArgs, call)
  }

  /** The outcomes of acquire round trips (see {@link AcquireCall}). */
  readonly #sink: AttemptSink = {
    answered: (call, outcome) => {
      const rtt = performance.now() - call.sentAt
      this.#srttMs = this.#srttMs === 0 ? rtt : 0.875 * this.#srttMs + 0.125 * rtt
      if (!outcome.granted) return outcome
      if (this.#closed) {
        this.#sink.cleanUp(call)
        return { granted: false, error: new Error('the locker was closed'), cut: false }
      }
      const serial = ++this.#serial
      const { resource, keys, ownerId, ttlMs, sentAt, autoExtend } = call
      const lock = new Lock(this.#host, { serial, resource, keys, ownerId, token: outcome.token, ttlMs, sentAt, autoExtend })
      this.#held.set(serial, lock)
      return { granted: true, lock, handedOver: outcome.handedOver }
    },
    failed: (call, error) => {
      this.#sink.cleanUp(call)
      const e = asError(error)
      const cut = error instanceof DeadlineExceededError && call.ms < this.#options.commandTimeoutMs
      // Running out of the caller's own wait is not a Redis failure.
      if (!cut) this.#host.emit({ type: 'error', resource: call.resource, operation: 'acquire', error: e })
      return { granted: false, error: e, cut }
    },
    lateMiss: (call) => this.#leftQueue(call.resource, call.keys),
    cleanUp: (call) => {
      releaseOnce(this.#redis, call.keys, call.ownerId, this.#host.lockerId, this.#options.handoffMs).catch(() => {})
    },
  }

  /**
   * Checks `resource` and returns its key names. A name found in the cache was checked when it
   * went in (the check depends on the string alone), and nothing but a string is ever found there.
   * @throws InvalidLockOptionError for a bad resource, before any I/O.
   */
  #keysOf(resource: string): ResourceKeys {
    let keys = this.#keyCache.get(resource)
    if (keys === undefined) {
      checkResource(resource)
      if (this.#keyCache.size >= KEY_CACHE_SIZE) this.#keyCache.clear()
      keys = resourceKeys(this.#options.prefix, resource)
      this.#keyCache.set(resource, keys)
    }
    return keys
  }

  // --- waiting ------------------------------------------------------------------------------

  #openQueue(resource: string, keys: ResourceKeys, first: Attempt): WaitQueue {
    const q: WaitQueue = {
      resource,
      keys,
      waiters: [],
      ready: false,
      running: false,
      wakeAgain: false,
      timer: undefined,
      lastError: 'error' in first ? first.error : undefined,
      lastHolderTtlMs: 'holderTtlMs' in first ? first.holderTtlMs : -1,
      errorStreak: 'error' in first ? 1 : 0,
      wakes: 0,
      linger: undefined,
      queued: false,
    }
    this.#queues.set(resource, q)
    // Subscribe before the next attempt: a release between our miss and the subscription is
    // then caught by that attempt, and every later one by the message.
    const subscriber = this.#subscriberConnection()
    this.#deadlines.race(subscriber.subscribe(keys.channel), this.#options.commandTimeoutMs)
      .catch(() => {
        // Without the subscription the backstops (holder TTL, safety poll) still work.
      })
      .then(() => {
        q.ready = true
        if (this.#queues.get(resource) === q) this.#pump(q)
      })
    return q
  }

  #subscriberConnection(): Subscriber {
    if (this.#subscriber) return this.#subscriber
    // Both clients have duplicate(); their signatures differ only in optional overrides.
    const sub = (this.#redis as { duplicate(): Subscriber }).duplicate()
    sub.on('error', () => {
      // Reconnection is ioredis's job; waiters fall back on their backstops meanwhile.
    })
    // A message is "<sender>" (the lock was freed: the oldest waiter here may try) or "<sender>
    // <locker> <ms>" (it was handed to that locker for ms: only that one tries; the others here
    // try again when the hand-off would run out, in case that locker never comes).
    sub.on('message', (channel: string, message: string) => {
      const [sender, head, ms] = message.split(' ')
      // Our own release woke our waiters already, one round trip sooner.
      if (sender === this.#host.lockerId) return
      const resource = resourceOfChannel(this.#options.prefix, channel)
      if (resource === undefined) return
      if (head === undefined || head === this.#host.lockerId) return this.#wake(resource)
      const q = this.#queues.get(resource)
      const handoffMs = Number(ms)
      if (q && !q.running && q.waiters.length > 0 && Number.isFinite(handoffMs)) {
        q.lastHolderTtlMs = handoffMs
        this.#armBackstop(q)
      }
    })
    // Messages sent while we were disconnected are gone: after a reconnect, every queue tries.
    sub.on('ready', () => {
      for (const q of this.#queues.values()) this.#wakeQueue(q)
    })
    this.#subscriber = sub
    return sub
  }

  #wake(resource: string): void {
    const q = this.#queues.get(resource)
    if (q) this.#wakeQueue(q)
  }

  #wakeQueue(q: WaitQueue): void {
    q.wakes++
    if (!q.ready || q.waiters.length === 0) return
    if (q.running) {
      q.wakeAgain = true
      return
    }
    this.#pump(q)
  }

  /** Lets the oldest waiter try once; re-arms the backstop timer after a miss. */
  #pump(q: WaitQueue): void {
    clearTimeout(q.timer)
    q.timer = undefined
    const head = q.waiters[0]
    if (!head) return this.#idleQueue(q)
    if (q.running) return
    q.running = true
    q.wakeAgain = false
    head.running = true
    head.attempts++
    const more = q.waiters.length > 1
    void this.#attempt(head.resource, head.keys, head.ttlMs, head.autoExtend, head.deadline, undefined, true, more).then((attempt) => {
      q.running = false
      head.running = false
      if (attempt.granted) {
        // Taking a lock handed to us used up our place in the queue (the script queued us
        // again if `more`); a lock found free leaves us queued, for #finish to take us out.
        if (attempt.handedOver) q.queued = more
        q.lastError = undefined
        q.errorStreak = 0
        q.lastHolderTtlMs = attempt.lock.ttlMs
        if (head.done || head.signal?.aborted) {
          // The waiter left while its attempt was in flight: give the lock straight back.
          void attempt.lock.release().catch(() => {})
          if (!head.done) this.#finish(q, head, this.#aborted(head.resource, head.start, head.signal))
        } else {
          this.#finish(q, head, undefined, attempt.lock)
        }
      } else if ('error' in attempt) {
        if (!attempt.cut) q.lastError = attempt.error
        q.errorStreak++
      } else {
        q.lastError = undefined
        q.errorStreak = 0
        q.lastHolderTtlMs = attempt.holderTtlMs
        q.queued = true
      }
      if (!head.done) {
        if (head.signal?.aborted) this.#finish(q, head, this.#aborted(head.resource, head.start, head.signal))
        else if (performance.now() >= head.deadline) this.#finish(q, head, this.#giveUp(head.resource, head.start, q.lastError))
        else {
          // Its deadline timer may have fired during the attempt (timers can run a little early)
          // and stood aside for it: arm it again, or the waiter would outlive its wait.
          clearTimeout(head.timer)
          head.timer = setTimeout(() => this.#expireWaiter(q, head), head.deadline - performance.now())
        }
      }
      if (this.#queues.get(q.resource) !== q) return
      if (q.waiters.length === 0) return this.#idleQueue(q)
      if (q.wakeAgain) return this.#pump(q)
      this.#armBackstop(q)
    })
  }

  #armBackstop(q: WaitQueue): void {
    clearTimeout(q.timer)
    const poll = this.#options.pollMs * (0.8 + 0.4 * Math.random())
    let delay: number
    if (q.lastError) delay = Math.min(poll, 25 * 2 ** Math.min(q.errorStreak, 6))
    else if (q.lastHolderTtlMs >= 0) delay = Math.min(poll, q.lastHolderTtlMs + 1)
    else delay = poll
    q.timer = setTimeout(() => this.#pump(q), delay)
  }

  #idleQueue(q: WaitQueue): void {
    clearTimeout(q.timer)
    q.timer = undefined
    if (q.linger || this.#queues.get(q.resource) !== q) return
    q.linger = setTimeout(() => {
      q.linger = undefined
      if (q.waiters.length === 0 && !q.running) this.#closeQueue(q)
    }, this.#options.pollMs)
    q.linger.unref()
  }

  #closeQueue(q: WaitQueue): void {
    clearTimeout(q.timer)
    clearTimeout(q.linger)
    if (this.#queues.get(q.resource) !== q) return
    this.#queues.delete(q.resource)
    this.#subscriber?.unsubscribe(q.keys.channel).catch(() => {})
  }

  #expireWaiter(q: WaitQueue, w: Waiter): void {
    if (w.done || w.running) return
    // libuv runs timers on its cached loop time, which can lag: never give up early.
    const left = w.deadline - performance.now()
    if (left > 0) {
      w.timer = setTimeout(() => this.#expireWaiter(q, w), left)
      return
    }
    this.#finish(q, w, this.#giveUp(w.resource, w.start, q.lastError))
    if (q.waiters.length === 0) this.#idleQueue(q)
  }

  #abortWaiter(q: WaitQueue, w: Waiter): void {
    if (w.done || w.running) return
    this.#finish(q, w, this.#aborted(w.resource, w.start, w.signal))
    if (q.waiters.length === 0) this.#idleQueue(q)
  }

  /**
   * A try that queued us in Redis ended with nobody here waiting for it (its acquire gave up, or
   * it answered after its deadline): leave, unless others here wait.
   */
  #leftQueue(resource: string, keys: ResourceKeys): void {
    const q = this.#queues.get(resource)
    if (q && q.waiters.length > 0) {
      q.queued = true
      return
    }
    if (q) q.queued = false
    this.#sendLeave(keys)
  }

  #sendLeave(keys: ResourceKeys): void {
    leaveQueue(this.#redis, keys, this.#host.lockerId, this.#options.handoffMs).catch(() => {})
  }

  /**
   * Takes this locker out of the resource's queue in Redis once nobody here waits for it any
   * more, so a release does not hand the lock to a locker that no longer wants it.
   */
  #leaveIfIdle(q: WaitQueue): void {
    if (!q.queued || q.waiters.length > 0) return
    q.queued = false
    this.#sendLeave(q.keys)
  }

  /** Removes a waiter, clears its timer and listener, and settles it exactly once. */
  #finish(q: WaitQueue, w: Waiter, error: Error | undefined, lock?: Lock): void {
    if (w.done) return
    w.done = true
    clearTimeout(w.timer)
    if (w.onAbort) w.signal?.removeEventListener('abort', w.onAbort)
    const i = q.waiters.indexOf(w)
    if (i >= 0) q.waiters.splice(i, 1)
    this.#leaveIfIdle(q)
    if (lock) {
      this.#emitAcquired(lock, w.start, w.attempts)
      w.resolve(lock)
    } else if (error) {
      w.reject(error)
    }
  }

  // --- outcomes -----------------------------------------------------------------------------

  #emitAcquired(lock: Lock, start: number, attempts: number): void {
    if (this.#host.listening) this.#host.emit({ type: 'acquired', resource: lock.resource, token: lock.token, ttlMs: lock.ttlMs, waitedMs: performance.now() - start, attempts })
  }

  /** The wait ran out: a timeout if Redis answered last, otherwise Redis is unavailable. */
  #giveUp(resource: string, start: number, lastError: Error | undefined): Error {
    if (lastError) return this.#unavailable(resource, start, lastError)
    const waitedMs = performance.now() - start
    this.#host.emit({ type: 'timeout', resource, waitedMs })
    return new LockTimeoutError(resource, waitedMs)
  }

  #unavailable(resource: string, start: number, cause: Error): LockUnavailableError {
    this.#host.emit({ type: 'unavailable', resource, waitedMs: performance.now() - start, error: cause })
    return new LockUnavailableError(resource, 'acquire', `could not acquire lock "${resource}": ${cause instanceof DeadlineExceededError ? 'Redis did not answer in time' : 'the Redis call failed'} (${cause.message})`, cause)
  }

  #aborted(resource: string, start: number, signal: AbortSignal | undefined): LockAbortedError {
    const waitedMs = performance.now() - start
    this.#host.emit({ type: 'aborted', resource, waitedMs })
    return new LockAbortedError(resource, waitedMs, signal?.reason)
  }

  #assertOpen(resource: string): void {
    if (this.#closed) throw new LockUnavailableError(resource, 'acquire', 'the locker was closed')
  }
}
