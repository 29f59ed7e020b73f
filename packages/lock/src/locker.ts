import type { LockBackend } from './backend/backend.js'
import { chooseBackend, type BackendChoice } from './backend/create-backend.js'
import type { SupportedRedisClient } from './client/choose-client.js'
import type { EtcdClient } from './etcd/etcd-client.js'
import { EventHub } from './core/event-hub.js'
import { LockCore } from './core/lock-core.js'
import type { TickSource } from './core/lock-source.js'
import { InvalidLockOptionError } from './errors.js'
import type { LockEvent } from './events.js'
import {
  resolveRunOnceOptions,
  resolveLeadOptions,
  type LeadOptions,
  type RunOnceOptions,
  type Tick,
} from './election/election-options.js'
import { Campaign, type Leadership } from './election/leadership.js'
import { TickRunner, type Schedule } from './election/run-once.js'
import type { LockInspection } from './family/inspect.js'
import { acquireInOrder, canonicalResources, type MultiLock } from './family/multi-lock.js'
import { HeldInContext } from './family/reentrancy.js'
import {
  forwardsSemaphoreEvent,
  resolveSemaphore,
  Semaphore,
  type SemaphoreHost,
  type SemaphoreOptions,
} from './family/semaphore.js'
import {
  ReadWriteLock,
  resolveReadWrite,
  type ReadWriteHost,
  type ReadWriteOptions,
  type Wakes,
} from './family/read-write.js'
import type { ReadWriteEngine } from './family/read-write-engine.js'
import type { ReadWriteHold } from './family/read-write-hold.js'
import { Deadlines, withinDeadline } from './deadline.js'
import { READ_WRITE_PREFIX, SEMAPHORE_PREFIX } from './keys.js'
import type { Lock } from './lock.js'
import {
  checkResource,
  resolveLockerOptions,
  type AcquireOptions,
  type LockerOptions,
  type ResolvedLockerOptions,
  type TryAcquireOptions,
  type UsingOptions,
} from './options.js'

export type { RedisClient } from './backend/connection.js'
export type { NodeRedisClient } from './client/node-redis-client.js'
export type { NodeRedisSentinel } from './client/node-redis-sentinel.js'
export type { NodeRedisCluster } from './client/node-redis-cluster.js'
export type { GlideClient } from './client/glide-client.js'
export type { GlideClusterClient } from './client/glide-cluster-client.js'
export type { SupportedRedisClient } from './client/choose-client.js'

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
  /** The engine its constructor was given (backend/create-backend.ts): the semaphores' core runs on it too. */
  readonly #engine: BackendChoice
  readonly #options: ResolvedLockerOptions
  readonly #events = new EventHub()
  /** Grants this Locker's locks: the wait queues, the grants, re-entry (core/lock-core.ts). */
  readonly #core: LockCore
  /** Grants the permits of every semaphore of this Locker (family/semaphore.ts); made on first use. */
  #permits: LockCore | undefined
  /** The read-write locks' engine, wakes and holds (family/read-write.ts); made on first use. */
  #readWrite: { engine: ReadWriteEngine; holds: Set<ReadWriteHold>; wakes: Wakes } | undefined

  /**
   * @param redis an ioredis or iovalkey `Redis` or `Cluster`, or a connected node-redis client
   *   (`createClient` or `createSentinel`, after `connect()`; docs/LOCK.md, "Which client"); or, for quorum mode, an
   *   array of 3 or more clients of one kind, of independent Redis masters (docs/LOCK.md); or an
   *   `Etcd3` client of the `etcd3` package, for etcd (docs/LOCK.md, "etcd"). The Locker never
   *   closes them.
   * @param options see {@link LockerOptions}; defaults in `LOCK_DEFAULTS`.
   * @throws InvalidLockOptionError for a bad option, before any I/O.
   */
  constructor(redis: SupportedRedisClient | readonly SupportedRedisClient[] | EtcdClient, options: LockerOptions = {}) {
    const engine = chooseBackend(redis)
    const o = resolveLockerOptions(options, engine.ttlFloor)
    engine.checkOptions(o)
    this.#engine = engine
    this.#options = o
    if (o.onEvent) this.#events.add(o.onEvent)
    this.#core = new LockCore({
      options: o,
      ttlFloor: engine.ttlFloor,
      store: engine.store,
      events: this.#events,
      backend: (deadlines, listener): LockBackend => engine.create(o, deadlines, listener),
      context: o.reentrant ? new HeldInContext() : undefined,
    })
  }

  /**
   * Adds an event listener besides the `onEvent` option (the metrics package uses this).
   * Listeners run synchronously; what they throw is ignored.
   * @returns a function that removes the listener.
   */
  listen(listener: (event: LockEvent) => void): () => void {
    if (typeof listener !== 'function') throw new InvalidLockOptionError('listener', 'must be a function', listener)
    return this.#events.add(listener)
  }

  /** How many Redis masters grant this locker's locks: 1, or N in quorum mode (a majority must grant). */
  get nodes(): number {
    return this.#engine.nodes
  }

  /**
   * How many locks granted by this locker are held now (not released, not lost, lease not run
   * out). Semaphore permits are not counted: `semaphore.inspect()` counts them.
   */
  get heldCount(): number {
    return this.#core.heldCount
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
    return this.#core.acquireWith(resource, this.#core.resolve(options, 'acquire'), false)
  }

  /**
   * One attempt, no waiting.
   * @returns the lock, or null when someone else holds it.
   * @throws LockUnavailableError when Redis did not answer within `commandTimeoutMs`.
   */
  async tryAcquire(resource: string, options?: TryAcquireOptions): Promise<Lock | null> {
    return this.#core.tryAcquire(resource, options)
  }

  /**
   * Runs `fn` under the lock with the watchdog on, and always releases. `fn` gets the lock; its
   * `signal` aborts if the lock is lost, and its `token` is what fenced writes must carry.
   * A release that fails because Redis is unreachable is reported as an `error` event, not
   * thrown: the lock then expires after its TTL.
   *
   * Inside `fn`, an acquire of the same resource on this Locker re-enters the lock (the same
   * token and signal, no round trip) unless the Locker was made with `reentrant: false`. A
   * `using()` that re-enters takes a turn: concurrent ones (`Promise.all`) run one at a time.
   */
  async using<T>(resource: string, fn: (lock: Lock) => Promise<T> | T, options: UsingOptions = {}): Promise<T> {
    if (typeof fn !== 'function') throw new InvalidLockOptionError('fn', 'must be a function', fn)
    const name = checkResource(resource)
    const lock = await this.#core.acquireWith(name, this.#core.resolve(options, 'using'), true)
    try {
      return await lock.run(() => fn(lock))
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
   * @throws LockLostError (its `resource` the member) when a lock taken was lost while a later one
   *   was awaited: a set is returned only with every member held; everything was released.
   */
  async acquireAll(resources: readonly string[], options?: AcquireOptions): Promise<MultiLock> {
    const names = canonicalResources(resources)
    const o = this.#core.resolve(options, 'acquire')
    for (const name of names) this.#core.resource(name)
    this.#core.assertOpen(names[0]!)
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
    const o = this.#core.resolve(options, 'using')
    for (const name of names) this.#core.resource(name)
    this.#core.assertOpen(names[0]!)
    const set = await acquireInOrder(names, o, performance.now(), (name, each) => this.acquire(name, each))
    try {
      // Inside fn, every member counts as held in its async context (re-entered, not waited for).
      const run = set.locks.reduceRight<() => T | Promise<T>>(
        (inner, lock) => () => lock.run(inner),
        () => fn(set),
      )
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
    return this.#core.inspect(resource)
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
    this.#core.assertOpen(s.name)
    return new Semaphore(this.#semaphoreHost(), s.name, s.permits, s.names)
  }

  /**
   * A read-write lock: many readers or one writer at a time among every Locker and process that
   * uses `name` (with the same prefix). A waiting writer stops new readers (writer preference);
   * each reader has a lease of its own. A writer's token is fresh and above every earlier
   * reader's and writer's; a reader's token is the token of the last write granted before it.
   * Its keys are apart from every lock's (family/read-write.ts, docs/LOCK.md "Read-write lock").
   * One Redis (also Sentinel or Cluster) only, for now.
   *
   * @example
   * ```ts
   * const rw = locker.readWrite('doc:1')
   * const text = await rw.usingRead((read) => loadDoc('doc:1', { readAfter: read.token }))
   * await rw.usingWrite((write) => saveDoc('doc:1', text, { fenceToken: write.token }))
   * ```
   * @throws InvalidLockOptionError for a bad name or option, or a Locker in quorum mode or on
   *   etcd, before any I/O.
   */
  readWrite(name: string, options?: ReadWriteOptions): ReadWriteLock {
    const checked = resolveReadWrite(name, options)
    const prefix = this.#options.prefix
    if (prefix.length + READ_WRITE_PREFIX.length > 256)
      throw new InvalidLockOptionError(
        'prefix',
        `must be at most ${256 - READ_WRITE_PREFIX.length} characters to hold read-write locks`,
        prefix,
      )
    if (!this.#engine.readWrite)
      throw new InvalidLockOptionError(
        'redis',
        'readWrite() runs on Redis (one Redis, Sentinel, Cluster or quorum mode), not on etcd for now',
        this.#engine.store,
      )
    this.#core.assertOpen(checked)
    return new ReadWriteLock(this.#readWriteHost(this.#engine.readWrite), checked)
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
    const o = resolveLeadOptions(name, options, this.#options.ttlMs, this.#core.ttlFloor)
    this.#core.assertOpen(o.name)
    return new Campaign(this.#electionSource(), o)
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
    const o = resolveRunOnceOptions(job, options, this.#options.ttlMs, this.#core.ttlFloor)
    this.#core.assertOpen(o.key)
    return new TickRunner(this.#electionSource(), o)
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
    if (this.#core.closed) return
    // One bound for all of it: each step given commandTimeoutMs of its own added up to twice that
    // (releases that time out, then the backend waiting for their replies) while Redis stalled.
    const until = performance.now() + this.#options.commandTimeoutMs
    await Promise.all([this.#core.close(until), this.#permits?.close(until), this.#closeReadWrite(until)])
  }

  /**
   * Gives back every read-write hold still held (their signals abort: `closed`), within `until`,
   * and closes the read-write locks' pub/sub connection.
   */
  async #closeReadWrite(until: number): Promise<void> {
    const holds = [...(this.#readWrite?.holds ?? [])]
    await withinDeadline(Promise.all(holds.map((hold) => hold.close())), until)
    this.#readWrite?.wakes.close()
    await this.#readWrite?.engine.close?.(until)
  }

  /** What read-write locks run on: the engine's round trips and wakes, the Locker's defaults and events. */
  #readWriteHost(make: NonNullable<BackendChoice['readWrite']>): ReadWriteHost {
    if (!this.#readWrite) {
      const { engine, wakes } = make(this.#options, new Deadlines())
      this.#readWrite = { engine, wakes, holds: new Set() }
    }
    const { engine, holds, wakes } = this.#readWrite
    const events = this.#events
    const core = this.#core
    return {
      engine,
      wakes,
      defaults: this.#options,
      ttlFloor: core.ttlFloor,
      emit: events.emit,
      held: (hold) => holds.add(hold),
      ended: (hold) => holds.delete(hold),
      get listening() {
        return events.listening
      },
      get closed() {
        return core.closed
      },
    }
  }

  /** What a semaphore runs on: the permits' core (made on first use), the Locker's defaults and events. */
  #semaphoreHost(): SemaphoreHost {
    const events = this.#events
    const core = this.#core
    return {
      permits: () => this.#permitCore(),
      defaults: this.#options,
      ttlFloor: core.ttlFloor,
      emit: events.emit,
      get listening() {
        return events.listening
      },
      get closed() {
        return core.closed
      },
    }
  }

  /**
   * The core of the semaphores' permits and queues: the same engine and options, under
   * `<prefix>sem:`, not reentrant; of its events, what a semaphore's user should see reaches the
   * Locker's listeners (forwardsSemaphoreEvent).
   */
  #permitCore(): LockCore {
    if (this.#permits) return this.#permits
    const o: ResolvedLockerOptions = {
      ...this.#options,
      prefix: this.#options.prefix + SEMAPHORE_PREFIX,
      reentrant: false,
      onEvent: undefined,
    }
    const events = new EventHub()
    const forward = this.#events
    events.add((event) => {
      if (forward.listening && forwardsSemaphoreEvent(event)) forward.emit(event)
    })
    const engine = this.#engine
    this.#permits = new LockCore({
      options: o,
      ttlFloor: engine.ttlFloor,
      store: engine.store,
      events,
      backend: (deadlines, listener) => engine.create(o, deadlines, listener),
      context: undefined,
    })
    return this.#permits
  }

  /**
   * What the election and run-once jobs run on: this Locker's acquire (re-entry included), its
   * events, its done records.
   */
  #electionSource(): TickSource {
    const core = this.#core
    return {
      acquire: (resource, options) => this.acquire(resource, options),
      readDone: (resource) => core.readDone(resource),
      emit: this.#events.emit,
      get closed() {
        return core.closed
      },
    }
  }
}
