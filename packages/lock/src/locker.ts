import type { Redis } from 'ioredis'
import type { AcquireOutcome, BackendListener, LockBackend, LockResource, QueueMode } from './backend/backend.js'
import { ConnectionDownError } from './backend/connection-error.js'
import { NotReplicatedError } from './backend/replication.js'
import { InFlightCalls } from './backend/in-flight.js'
import { DeadlineExceededError, Deadlines } from './deadline.js'
import {
  asError,
  InvalidLockOptionError,
  LockAbortedError,
  LockError,
  LockReplicationError,
  LockTimeoutError,
  LockUnavailableError,
} from './errors.js'
import type { LockEvent } from './events.js'
import { Lock, type LockHost } from './lock.js'
import {
  checkResource,
  QUORUM_TTL_FLOOR,
  resolveAcquireOptions,
  resolveLockerOptions,
  type AcquireOptions,
  type LockerOptions,
  type ResolvedAcquire,
  type ResolvedLockerOptions,
  SINGLE_TTL_FLOOR,
  type TtlFloor,
  type TryAcquireOptions,
  type UsingOptions,
} from './options.js'
import { QuorumBackend, type QuorumBackendOptions } from './quorum/quorum-backend.js'
import { SEMAPHORE_PREFIX } from './keys.js'
import { RedisBackend, type RedisBackendOptions, type RedisClient } from './backend/redis-backend.js'
import { WaitQueues, type Attempt, type WaitHost } from './waiting/wait-queues.js'
import {
  resolveLeadOptions,
  resolveRunOnceOptions,
  type LeadOptions,
  type RunOnceOptions,
  type Tick,
} from './election/election-options.js'
import { Campaign, type ElectionHost, type Leadership } from './election/leadership.js'
import { TickRunner, type Schedule } from './election/run-once.js'
import { HeldInContext } from './family/reentrancy.js'
import type { LockInspection } from './family/inspect.js'
import { acquireInOrder, canonicalResources, type MultiLock } from './family/multi-lock.js'
import {
  forwardsSemaphoreEvent,
  resolveSemaphore,
  Semaphore,
  type SemaphoreHost,
  type SemaphoreOptions,
} from './family/semaphore.js'

export type { RedisClient } from './backend/connection.js'

/**
 * Grants locks on Redis with fencing tokens. One Locker per process is the usual set-up: its
 * blocked acquires share one subscriber connection and wait in one queue per resource, and
 * lockers wait in turn across processes (a fair queue in Redis: first come, first served).
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
  readonly #backend: LockBackend
  readonly #deadlines = new Deadlines()
  readonly #options: ResolvedLockerOptions
  /** `acquire()` options when none are given: resolved once, not per call. */
  readonly #defaultAcquire: ResolvedAcquire
  readonly #queues: WaitQueues
  /** Locks granted and not yet released or lost, by serial (a number key: no identity hash). */
  readonly #held = new Map<number, Lock>()
  #serial = 0
  readonly #listeners = new Set<(event: LockEvent) => void>()
  readonly #lockHost: LockHost
  readonly #nodes: number
  readonly #ttlFloor: TtlFloor
  /** The last token granted per resource (while someone listens): see the `token-regressed` event. */
  readonly #lastTokens = new Map<string, bigint>()
  /** Tries in flight, until their outcome is handled (a grant after close() is given back then). */
  readonly #tries = new InFlightCalls()
  /** The locks held in each async context (reentrancy); undefined with `reentrant: false`. */
  readonly #context: HeldInContext | undefined
  /** The client(s) given to the constructor: the semaphores' Locker runs on them too. */
  readonly #clients: RedisClient | readonly RedisClient[]
  /** Grants the permits of every semaphore of this Locker (family/semaphore.ts); made on first use. */
  #semaphoreLocker: Locker | undefined
  #closed = false

  /**
   * @param redis an ioredis `Redis` or `Cluster`; or, for quorum mode, an array of 3 or more
   *   clients of independent Redis masters (docs/LOCK.md). The Locker never closes them.
   * @param options see {@link LockerOptions}; defaults in `LOCK_DEFAULTS`.
   * @throws InvalidLockOptionError for a bad option, before any I/O.
   */
  constructor(redis: RedisClient | readonly RedisClient[], options: LockerOptions = {}) {
    const clients = checkClients(redis)
    this.#clients = clients
    this.#nodes = isClientList(clients) ? clients.length : 1
    this.#ttlFloor = this.#nodes > 1 ? QUORUM_TTL_FLOOR : SINGLE_TTL_FLOOR
    const o = resolveLockerOptions(options, this.#ttlFloor)
    this.#options = o
    this.#defaultAcquire = resolveAcquireOptions(undefined, o, 'acquire', this.#ttlFloor)
    this.#context = o.reentrant ? new HeldInContext() : undefined
    if (o.onEvent) this.#listeners.add(o.onEvent)
    // A queued locker that stops trying (a crashed process) is dropped after this lease. Waiters
    // try at least every 1.2 × pollMs (the safety poll), so a live one always renews it in time.
    const queueLeaseMs = 3 * o.pollMs + o.commandTimeoutMs
    const backendOptions: RedisBackendOptions = {
      prefix: o.prefix,
      commandTimeoutMs: o.commandTimeoutMs,
      fenceTtlMs: o.fenceTtlMs,
      handoffMs: o.handoffMs,
      queueLeaseMs,
    }
    const quorumOptions: QuorumBackendOptions = { ...backendOptions, nodeRestartDelayMs: o.nodeRestartDelayMs }
    if (isClientList(clients) && o.replicas > 0) {
      throw new InvalidLockOptionError(
        'replicas',
        'is for one Redis with replicas (Sentinel, Cluster): quorum mode takes independent masters',
        o.replicas,
      )
    }
    const listener: BackendListener = {
      released: (resource, handedTo, handoffMs, next) => {
        const me = this.#backend.lockerId
        if (handedTo === undefined || handedTo === me) this.#queues.wake(resource)
        // Next in line: take over if the locker it was handed to never comes.
        else if (next === me) this.#queues.handedElsewhere(resource, handoffMs)
      },
      reconnected: () => this.#queues.wakeAll(),
    }
    this.#backend = isClientList(clients)
      ? new QuorumBackend(clients, quorumOptions, this.#deadlines, listener)
      : new RedisBackend(
          clients,
          { ...backendOptions, replicas: o.replicas, replicasTimeoutMs: o.replicasTimeoutMs },
          this.#deadlines,
          listener,
        )
    const listeners = this.#listeners
    const emit = this.#emit
    this.#lockHost = {
      backend: this.#backend,
      deadlines: this.#deadlines,
      commandTimeoutMs: o.commandTimeoutMs,
      ttlFloor: this.#ttlFloor,
      get listening() {
        return listeners.size > 0
      },
      emit,
      onLockEnd: (serial) => {
        this.#held.delete(serial)
      },
      runHolding: (lock, fn) => (this.#context ? this.#context.run(lock, fn) : fn()),
      wake: (resource, handedTo) => {
        if (handedTo === undefined || handedTo === this.#backend.lockerId) this.#queues.wake(resource)
      },
    }
    this.#queues = new WaitQueues(this.#waitHost())
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

  /** How many Redis masters grant this locker's locks: 1, or N in quorum mode (a majority must grant). */
  get nodes(): number {
    return this.#nodes
  }

  /**
   * How many locks granted by this locker are held now (not released, not lost, lease not run
   * out). Semaphore permits are not counted: `semaphore.inspect()` counts them.
   */
  get heldCount(): number {
    return this.#held.size
  }

  /** The options in force, defaults filled in. */
  get options(): Readonly<Omit<ResolvedLockerOptions, 'onEvent'>> {
    const { onEvent: _, ...rest } = this.#options
    return rest
  }

  /**
   * Acquires `resource`, waiting up to `waitMs` while someone else holds it. Waiters are served
   * first come, first served, within this Locker and across Lockers.
   * @throws LockTimeoutError after `waitMs` with the lock still held.
   * @throws LockAbortedError when `signal` aborts first.
   * @throws LockUnavailableError when Redis did not answer within the wait.
   * @throws InvalidLockOptionError for bad input, before any I/O.
   */
  async acquire(resource: string, options?: AcquireOptions): Promise<Lock> {
    const r = this.#backend.resource(resource)
    const o =
      options === undefined
        ? this.#defaultAcquire
        : resolveAcquireOptions(options, this.#options, 'acquire', this.#ttlFloor)
    this.#assertOpen(resource)
    const start = performance.now()
    if (o.signal?.aborted) throw this.#aborted(resource, start, o.signal)
    const reentry = this.#reenter(resource)
    if (reentry) return reentry
    return this.#queues.acquire(r, o, start)
  }

  /**
   * A re-entry of `resource` when the current async context holds it on this Locker (inside
   * `using()` or `lock.run()`): a handle on the same grant, no round trip. Undefined otherwise.
   */
  #reenter(resource: string): Lock | undefined {
    const held = this.#context?.find(resource)
    const lock = held?.reenter()
    if (lock && this.#listeners.size > 0)
      this.#emit({ type: 'reentered', resource, token: lock.token, holds: lock.holds })
    return lock
  }

  /**
   * One attempt, no waiting.
   * @returns the lock, or null when someone else holds it.
   * @throws LockUnavailableError when Redis did not answer within `commandTimeoutMs`.
   */
  async tryAcquire(resource: string, options?: TryAcquireOptions): Promise<Lock | null> {
    const r = this.#backend.resource(resource)
    const o =
      options === undefined
        ? this.#defaultAcquire
        : resolveAcquireOptions(options, this.#options, 'tryAcquire', this.#ttlFloor)
    this.#assertOpen(resource)
    const reentry = this.#reenter(resource)
    if (reentry) return reentry
    const start = performance.now()
    const attempt = await this.#attempt(r, o, start, undefined, true, 'none')
    if (attempt.granted) {
      this.#emitAcquired(attempt.lock, start, 1)
      return attempt.lock
    }
    if (attempt.error instanceof LockError) throw attempt.error
    if (attempt.error) throw this.#unavailable(resource, start, attempt.error)
    this.#emit({ type: 'contended', resource, holderTtlMs: attempt.holderTtlMs })
    return null
  }

  /**
   * Runs `fn` under the lock with the watchdog on, and always releases. `fn` gets the lock; its
   * `signal` aborts if the lock is lost, and its `token` is what fenced writes must carry.
   * A release that fails because Redis is unreachable is reported as an `error` event, not
   * thrown: the lock then expires after its TTL.
   *
   * Inside `fn`, an acquire of the same resource on this Locker re-enters the lock (the same
   * token and signal, no round trip) unless the Locker was made with `reentrant: false`.
   */
  async using<T>(resource: string, fn: (lock: Lock) => Promise<T> | T, options: UsingOptions = {}): Promise<T> {
    if (typeof fn !== 'function') throw new InvalidLockOptionError('fn', 'must be a function', fn)
    const name = checkResource(resource)
    const o = resolveAcquireOptions(options, this.#options, 'using', this.#ttlFloor)
    const lock = await this.acquire(name, o)
    try {
      return await (this.#context ? this.#context.run(lock, () => fn(lock)) : fn(lock))
    } finally {
      await lock.release().catch(() => {})
    }
  }

  /**
   * Acquires several resources within one `waitMs`, in one canonical order (sorted names), so
   * that callers listing the same resources in different orders never deadlock. Each resource gets
   * its own lock and token (`set.tokens.get(resource)`); the set shares one watchdog (with
   * `autoExtend`, and always while the later resources are waited for) and one `signal`, aborted
   * when any lock is lost. On a timeout, an abort or a Redis failure, every lock taken so far is
   * released before the error is thrown. A resource the current async context holds (inside
   * `using()`) is re-entered.
   * @throws InvalidLockOptionError for an empty list, a repeated resource or a bad name, before any I/O.
   * @throws LockTimeoutError, LockAbortedError, LockUnavailableError as `acquire()` does.
   */
  async acquireAll(resources: readonly string[], options?: AcquireOptions): Promise<MultiLock> {
    const names = canonicalResources(resources)
    const o = resolveAcquireOptions(options, this.#options, 'acquire', this.#ttlFloor)
    for (const name of names) this.#backend.resource(name)
    this.#assertOpen(names[0]!)
    return acquireInOrder(names, o, performance.now(), (name, each) => this.acquire(name, each))
  }

  /**
   * {@link acquireAll}, runs `fn(set)` with the watchdog on, and always releases them all. Inside
   * `fn`, an acquire of any of the resources re-enters it.
   * @example
   * ```ts
   * await locker.usingAll(['account:1', 'account:2'], async (set) => {
   *   await transfer({ from: set.tokens.get('account:1'), to: set.tokens.get('account:2') })
   * })
   * ```
   */
  async usingAll<T>(
    resources: readonly string[],
    fn: (set: MultiLock) => Promise<T> | T,
    options: UsingOptions = {},
  ): Promise<T> {
    if (typeof fn !== 'function') throw new InvalidLockOptionError('fn', 'must be a function', fn)
    const names = canonicalResources(resources)
    const o = resolveAcquireOptions(options, this.#options, 'using', this.#ttlFloor)
    for (const name of names) this.#backend.resource(name)
    this.#assertOpen(names[0]!)
    const set = await acquireInOrder(names, o, performance.now(), (name, each) => this.acquire(name, each))
    try {
      const context = this.#context
      const run = context
        ? set.locks.reduceRight<() => T | Promise<T>>(
            (inner, lock) => () => context.run(lock, inner),
            () => fn(set),
          )
        : () => fn(set)
      return await run()
    } finally {
      await set.release().catch(() => {})
    }
  }

  /**
   * What Redis holds for `resource` now: free, held or handed on, the holder's remaining lease,
   * the last token minted and how many lockers wait in its queue. Read-only and one round trip
   * (in quorum mode one per node, in parallel, and the majority's view: docs/LOCK.md); it neither
   * takes the lock nor joins the queue. A snapshot: it may be stale when it arrives.
   * @throws LockUnavailableError when Redis did not answer within `commandTimeoutMs`.
   * @throws InvalidLockOptionError for a bad resource name, before any I/O.
   * @example
   * ```ts
   * const { state, holderTtlMs, lastToken, waiting } = await locker.inspect('order:42')
   * ```
   */
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

  /**
   * A semaphore: at most `permits` holders at once among every Locker and process that uses
   * `name` (with the same prefix). Each permit is a lock of its own (`<name>:permit:<i>`): its
   * own lease, watchdog, signal and fencing token. Waiters are served first come, first served
   * across processes. Permits are not reentrant. A semaphore's keys are apart from every lock's:
   * a lock named `name` does not count against it (family/semaphore.ts, docs/LOCK.md).
   *
   * @example
   * ```ts
   * const exports = locker.semaphore('exports', { permits: 3 })
   * await exports.using(async (permit) => {
   *   await runExport({ signal: permit.signal })
   * })
   * ```
   * @throws InvalidLockOptionError for a bad name or option, before any I/O.
   */
  semaphore(name: string, options: SemaphoreOptions): Semaphore {
    const s = resolveSemaphore(name, options)
    const prefix = this.#options.prefix
    if (prefix.length + SEMAPHORE_PREFIX.length > 256)
      throw new InvalidLockOptionError(
        'prefix',
        `must be at most ${256 - SEMAPHORE_PREFIX.length} characters to hold semaphores (their keys add "${SEMAPHORE_PREFIX}")`,
        prefix,
      )
    this.#assertOpen(s.name)
    return new Semaphore(this.#semaphoreHost(), s.name, s.permits, s.names)
  }

  #semaphoreHost(): SemaphoreHost {
    const listeners = this.#listeners
    const isClosed = () => this.#closed
    return {
      locker: () => this.#semaphores(),
      defaults: this.#options,
      ttlFloor: this.#ttlFloor,
      emit: this.#emit,
      get listening() {
        return listeners.size > 0
      },
      get closed() {
        return isClosed()
      },
    }
  }

  /** The Locker of the semaphores' permits and queues: the same options, under `<prefix>sem:`, not reentrant. */
  #semaphores(): Locker {
    if (this.#semaphoreLocker) return this.#semaphoreLocker
    const o = this.#options
    const emit = this.#emit
    const listeners = this.#listeners
    this.#semaphoreLocker = new Locker(this.#clients, {
      ttlMs: o.ttlMs,
      waitMs: o.waitMs,
      prefix: o.prefix + SEMAPHORE_PREFIX,
      commandTimeoutMs: o.commandTimeoutMs,
      pollMs: o.pollMs,
      fenceTtlMs: o.fenceTtlMs,
      handoffMs: o.handoffMs,
      ...(o.nodeRestartDelayMs === undefined ? {} : { nodeRestartDelayMs: o.nodeRestartDelayMs }),
      replicas: o.replicas,
      replicasTimeoutMs: o.replicasTimeoutMs,
      reentrant: false,
      onEvent: (event) => {
        if (listeners.size > 0 && forwardsSemaphoreEvent(event)) emit(event)
      },
    })
    return this.#semaphoreLocker
  }

  /**
   * Campaigns for the leadership of `name` until `stop()`: one leader at a time among every
   * process that campaigns for it. The leader's lease is renewed by the watchdog; its term is the
   * lease's fencing token (strictly increasing across leaders), so a leader that paused past its
   * lease has its writes refused by the stores that check the token. A lost lease demotes it
   * (its signal aborts) and another candidate is elected within about one `ttlMs`. Built on
   * `acquire()` (src/election/, docs/LOCK.md "Leader election and run-once jobs").
   *
   * @example
   * ```ts
   * const leadership = locker.lead('scheduler', {
   *   onElected: (term, signal) => runSchedulerUntil(signal, { fenceToken: term }),
   *   onDemoted: (reason) => console.log(`no longer the leader: ${reason}`),
   * })
   * // on shutdown: resigns, and the next candidate takes over at once
   * await leadership.stop()
   * ```
   * @throws InvalidLockOptionError for a bad name or option, before any I/O.
   */
  lead(name: string, options: LeadOptions): Leadership {
    const o = resolveLeadOptions(name, options, this.#options.ttlMs, this.#ttlFloor)
    this.#assertOpen(o.name)
    return new Campaign(this.#electionHost(), o)
  }

  /**
   * A job that every instance schedules and one runs per tick (the window
   * `[n × everyMs, (n + 1) × everyMs)` of the wall clock), with the tick's fencing token for its
   * writes. Every instance reports what it did with each tick (the `tick` event, `onTick`); a
   * tick that no instance ran shows no `ran` report, never silence.
   *
   * @example
   * ```ts
   * const schedule = locker.runOnce(({ tick, token }) => closeTheDay(tick, { fenceToken: token }), {
   *   key: 'close-day',
   *   everyMs: 60_000,
   * })
   * await schedule.stop()
   * ```
   * @throws InvalidLockOptionError for a bad job or option, before any I/O.
   */
  runOnce(job: (tick: Tick) => unknown, options: RunOnceOptions): Schedule {
    const o = resolveRunOnceOptions(job, options, this.#options.ttlMs, this.#ttlFloor)
    this.#assertOpen(o.key)
    return new TickRunner(this.#electionHost(), o)
  }

  #electionHost(): ElectionHost {
    const isClosed = () => this.#closed
    return {
      acquire: (resource, options) => this.acquire(resource, options),
      emit: this.#emit,
      get closed() {
        return isClosed()
      },
    }
  }

  /**
   * Rejects blocked acquires, stops every watchdog, releases the locks this locker still holds,
   * waits for the tries still in flight (a grant that lands now is released) and for everything
   * it sent to be answered, leaves the queues in Redis it stood in, and closes the subscriber
   * connection — bounded by `commandTimeoutMs` while Redis does not answer. So `close()` then
   * `quit()` of the client leaves nothing held or queued in this Locker's name. The Redis client
   * given to the constructor stays open.
   */
  async close(): Promise<void> {
    if (this.#closed) return
    this.#closed = true
    this.#queues.closeAll()
    const releases = Promise.allSettled([...this.#held.values()].map((lock) => lock.releaseOnClose()))
    await Promise.all([releases, this.#tries.idle(this.#options.commandTimeoutMs), this.#semaphoreLocker?.close()])
    await this.#backend.close()
  }

  /** One try through the backend; a grant becomes a {@link Lock}. Never rejects. */
  #attempt(
    resource: LockResource,
    o: ResolvedAcquire,
    sentAt: number,
    waitUntil: number | undefined,
    first: boolean,
    queue: QueueMode,
  ): Promise<Attempt> {
    const tries = this.#tries
    tries.begin()
    return this.#backend.acquire(resource, { ttlMs: o.ttlMs, sentAt, waitUntil, first, queue }).then(
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

  #toAttempt(resource: LockResource, o: ResolvedAcquire, sentAt: number, outcome: AcquireOutcome): Attempt {
    if (!outcome.granted) {
      // Running out of the caller's own wait is not a Redis failure.
      if (outcome.error && !outcome.cut)
        this.#emit({ type: 'error', resource: resource.name, operation: 'acquire', error: outcome.error })
      return outcome
    }
    if (this.#closed) {
      // Granted after close(): nobody is there to hold it.
      this.#backend.release(resource, outcome.ownerId).catch(() => {})
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
    if (this.#listeners.size > 0) this.#checkTokenOrder(resource.name, outcome.token)
    return { granted: true, lock }
  }

  /** Tells the listeners when a grant's token is not above the last one this Locker saw for the resource. */
  #checkTokenOrder(resource: string, token: bigint): void {
    const previous = this.#lastTokens.get(resource)
    if (previous !== undefined && token <= previous) {
      this.#emit({ type: 'token-regressed', resource, token, previous })
      return
    }
    if (this.#lastTokens.size >= 1_024) this.#lastTokens.clear()
    this.#lastTokens.set(resource, token)
  }

  #waitHost(): WaitHost {
    const isClosed = () => this.#closed
    return {
      backend: this.#backend,
      pollMs: this.#options.pollMs,
      get closed() {
        return isClosed()
      },
      attempt: (resource, o, sentAt, waitUntil, first, queue) =>
        this.#attempt(resource, o, sentAt, waitUntil, first, queue),
      contended: (resource, holderTtlMs) => this.#emit({ type: 'contended', resource, holderTtlMs }),
      acquired: (lock, start, attempts) => this.#emitAcquired(lock, start, attempts),
      giveUp: (resource, start, lastError) => this.#giveUp(resource, start, lastError),
      aborted: (resource, start, signal) => this.#aborted(resource, start, signal),
      closedError: (resource) => new LockUnavailableError(resource, 'acquire', 'the locker was closed'),
    }
  }

  readonly #emit = (event: LockEvent): void => {
    for (const listener of this.#listeners) {
      try {
        listener(event)
      } catch {
        // A listener's failure must never break locking.
      }
    }
  }

  #emitAcquired(lock: Lock, start: number, attempts: number): void {
    if (this.#listeners.size > 0)
      this.#emit({
        type: 'acquired',
        resource: lock.resource,
        token: lock.token,
        ttlMs: lock.ttlMs,
        waitedMs: performance.now() - start,
        attempts,
      })
  }

  /** The wait ran out: a timeout if Redis answered last, otherwise Redis is unavailable. */
  #giveUp(resource: string, start: number, lastError: Error | undefined): Error {
    if (lastError) return this.#unavailable(resource, start, lastError)
    const waitedMs = performance.now() - start
    this.#emit({ type: 'timeout', resource, waitedMs })
    return new LockTimeoutError(resource, waitedMs)
  }

  /**
   * The wait ran out (or a try without one failed) with Redis not answering. A connection known to
   * be down says so, with the client's last connection error (ECONNREFUSED, say) as the cause.
   */
  #unavailable(resource: string, start: number, cause: Error): LockUnavailableError {
    this.#emit({ type: 'unavailable', resource, waitedMs: performance.now() - start, error: cause })
    const prefix = `could not acquire lock "${resource}": `
    if (cause instanceof ConnectionDownError)
      return new LockUnavailableError(resource, 'acquire', prefix + cause.message, cause.cause ?? cause)
    if (cause instanceof NotReplicatedError) {
      const message = `${prefix}its grants were not acknowledged by the replicas in time (${cause.message}); they were given back`
      return new LockReplicationError(
        resource,
        'acquire',
        cause.replicas,
        cause.acknowledged,
        message,
        cause,
        cause.connectedReplicas,
      )
    }
    const why = cause instanceof DeadlineExceededError ? 'Redis did not answer in time' : 'the Redis call failed'
    return new LockUnavailableError(resource, 'acquire', `${prefix}${why} (${cause.message})`, cause)
  }

  #aborted(resource: string, start: number, signal: AbortSignal | undefined): LockAbortedError {
    const waitedMs = performance.now() - start
    this.#emit({ type: 'aborted', resource, waitedMs })
    return new LockAbortedError(resource, waitedMs, signal?.reason)
  }

  #assertOpen(resource: string): void {
    if (this.#closed) throw new LockUnavailableError(resource, 'acquire', 'the locker was closed')
  }
}

/** Largest quorum accepted: more nodes only add round trips (a majority of 99 is 50). */
export const MAX_QUORUM_NODES = 99

function isClient(value: unknown): value is RedisClient {
  return (
    value != null &&
    typeof (value as Partial<Redis>).evalsha === 'function' &&
    typeof (value as Partial<Redis>).duplicate === 'function'
  )
}

function isClientList(clients: RedisClient | readonly RedisClient[]): clients is readonly RedisClient[] {
  return Array.isArray(clients)
}

/** A client, or an array of 3 or more distinct clients (quorum mode). */
function checkClients(redis: unknown): RedisClient | readonly RedisClient[] {
  if (!Array.isArray(redis)) {
    if (!isClient(redis))
      throw new InvalidLockOptionError(
        'redis',
        'must be an ioredis Redis or Cluster client, or an array of 3 or more (quorum mode)',
        redis,
      )
    return redis
  }
  if (redis.length < 3 || redis.length > MAX_QUORUM_NODES) {
    throw new InvalidLockOptionError(
      'redis',
      `an array (quorum mode) must hold 3 to ${MAX_QUORUM_NODES} clients of independent Redis masters; for one Redis pass the client itself`,
      redis.length,
    )
  }
  const seen = new Set<unknown>()
  redis.forEach((client: unknown, i) => {
    if (!isClient(client))
      throw new InvalidLockOptionError(`redis[${i}]`, 'must be an ioredis Redis or Cluster client', client)
    if (seen.has(client))
      throw new InvalidLockOptionError(
        `redis[${i}]`,
        'must not repeat a client: each node counts once toward the majority',
        client,
      )
    seen.add(client)
  })
  return Object.freeze([...(redis as RedisClient[])])
}
