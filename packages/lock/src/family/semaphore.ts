/**
 * A semaphore with N permits: `locker.semaphore(name, { permits })`.
 *
 * Each permit is a lock of its own, on the resource `<name>:permit:<i>` (i = 0..N-1): its own
 * lease, watchdog and token, granted and renewed by the same scripts as any lock. At most one
 * holder per permit, so at most N holders, on one Redis and in quorum mode alike (a quorum
 * semaphore kept as one set of holders per node would not be bounded: N + 1 holders can each
 * win a majority of nodes when every node counts only its own). Tokens are ordered per permit.
 *
 * Fairness comes from the queue: an acquire first takes the semaphore's queue lock
 * (`<name>:queue`), a lock like any other and so served first come, first served within the
 * Locker and across Lockers and processes. Its holder is the oldest waiter: it takes a free
 * permit, or waits for the first permit to be released (its tries race, the first grant wins and
 * the others are given back), and releases the queue lock for the next waiter — in one call that
 * hands it on by itself, answered before `acquire()` returns (sent is not enough: node-redis
 * writes a command at `setImmediate`, after whatever the caller does next). (The usual release of a key a waiter
 * marked is two round trips, the second sent when the first answers: a holder that then blocked
 * its event loop, 3 s of synchronous work, kept a free permit from the next waiter for 3 s. The
 * grant of the permit cannot hand the queue on in the same script: the queue lock and the permits
 * are different resources, on different Cluster slots.)
 *
 * These keys live under the prefix `<prefix>sem:`, apart from every lock's (`<prefix>{…}`): a
 * semaphore and a lock of the same name are two things that never exclude each other.
 */
import {
  InvalidLockOptionError,
  LockAbortedError,
  LockError,
  LockReplicationError,
  LockTimeoutError,
  LockUnavailableError,
} from '../errors.js'
import type { EventSink, PermitSource } from '../core/lock-source.js'
import type { LockEvent } from '../events.js'
import { semaphoreResources } from '../keys.js'
import type { Lock } from '../lock.js'
import {
  checkInteger,
  checkObject,
  checkResource,
  MAX_RESOURCE_BYTES,
  resolveAcquireOptions,
  type AcquireOptions,
  type ResolvedAcquire,
  type ResolvedLockerOptions,
  type TryAcquireOptions,
  type TtlFloor,
  type UsingOptions,
} from '../options.js'

/** Most permits of one semaphore: each is a lock of its own, and a blocked acquire waits on every one. */
export const MAX_PERMITS = 64

/** Longest lease of the queue lock: a waiter that dies holding it holds the others up at most this long. */
const QUEUE_TTL_MS = 5_000

/** Permits tried at once (one round trip) before a blocked acquire waits on all of them. */
const TRIES_AT_ONCE = 4

/** Options of `locker.semaphore()`. */
export interface SemaphoreOptions {
  /** How many holders at most, 1 to 64. Required. */
  permits: number
}

/** What Redis says of a semaphore at one moment (a snapshot: it may be stale when it arrives). */
export interface SemaphoreInspection {
  readonly name: string
  readonly permits: number
  /** Permits held now (or handed on to a waiter). */
  readonly held: number
  /** The last token minted per permit (undefined: none yet, or its counter expired). */
  readonly lastTokens: readonly (bigint | undefined)[]
  /**
   * Lockers waiting for a permit: the one at the head of the queue (when it is held) and those
   * queued behind it. One per Locker, however many acquires wait in it.
   */
  readonly waiting: number
}

/**
 * What a {@link Semaphore} needs from its Locker: what grants its queue lock and permits (a core
 * of its own under the semaphore prefix, not reentrant, made on first use), the defaults and the
 * events.
 */
export interface SemaphoreHost extends EventSink {
  permits(): PermitSource
  readonly defaults: ResolvedLockerOptions
  readonly ttlFloor: TtlFloor
  readonly closed: boolean
}

/** The names a semaphore's keys are built from (each under `<prefix>sem:`). */
export interface SemaphoreNames {
  readonly queue: string
  readonly permits: readonly string[]
}

/**
 * Checks `locker.semaphore()`'s arguments before any I/O.
 * @returns the checked name, permit count and the resource names of its queue and permits.
 */
export function resolveSemaphore(
  name: unknown,
  options: unknown,
): { name: string; permits: number; names: SemaphoreNames } {
  let checked: string
  try {
    checked = checkResource(name)
  } catch (error) {
    if (error instanceof InvalidLockOptionError) throw new InvalidLockOptionError('name', error.rule, name)
    throw error
  }
  if (options === undefined)
    throw new InvalidLockOptionError('options', 'must be given: { permits } is required', options)
  const o = checkObject('options', options, 'semaphore()', ['permits'])
  if (o.permits === undefined)
    throw new InvalidLockOptionError('permits', `is required: an integer from 1 to ${MAX_PERMITS}`, o.permits)
  const permits = checkInteger('permits', o.permits, 1, MAX_PERMITS)
  const resources = semaphoreResources(checked, permits)
  const last = resources.permits[permits - 1]!
  if (Buffer.byteLength(last, 'utf8') > MAX_RESOURCE_BYTES) {
    const room = MAX_RESOURCE_BYTES - (Buffer.byteLength(last, 'utf8') - Buffer.byteLength(checked, 'utf8'))
    throw new InvalidLockOptionError(
      'name',
      `must be at most ${room} bytes in UTF-8 (its permits are locks named <name>:permit:<i>)`,
      name,
    )
  }
  const names: SemaphoreNames = Object.freeze({
    queue: resources.queue,
    permits: Object.freeze(resources.permits),
  })
  return { name: checked, permits, names }
}

/**
 * A semaphore: at most `permits` holders at once across every Locker and process that uses the
 * same name and prefix. Each permit is a {@link Lock} (its `resource` is `<name>:permit:<i>`), with
 * its own lease, watchdog, `signal` and fencing token (ordered per permit). Waiters are served
 * first come, first served. Permits are not reentrant: an acquire inside `using()` takes another
 * permit (or waits for one). Obtained from `locker.semaphore()`; never built by hand.
 */
export class Semaphore {
  /** The semaphore's name, as given to `locker.semaphore()`. */
  readonly name: string
  /** How many holders at most. */
  readonly permits: number
  readonly #host: SemaphoreHost
  readonly #names: SemaphoreNames
  /** Where the next acquire's first tries start (spreads the tries over the permits). */
  #next = 0

  /** @internal */
  constructor(host: SemaphoreHost, name: string, permits: number, names: SemaphoreNames) {
    this.#host = host
    this.name = name
    this.permits = permits
    this.#names = names
  }

  /**
   * Takes a permit, waiting up to `waitMs` (first come, first served) while all are held.
   * @throws LockTimeoutError (its `resource` is the semaphore's name) after `waitMs`.
   * @throws LockAbortedError when `signal` aborts first.
   * @throws LockUnavailableError when Redis did not answer within the wait.
   * @throws InvalidLockOptionError for bad input, before any I/O.
   */
  async acquire(options?: AcquireOptions): Promise<Lock> {
    const o = resolveAcquireOptions(options, this.#host.defaults, 'acquire', this.#host.ttlFloor)
    const start = performance.now()
    this.#assertOpen()
    if (o.signal?.aborted) throw this.#aborted(start, o.signal)
    const locker = this.#host.permits()
    let queue: Lock
    try {
      queue = (await locker.acquire(this.#names.queue, this.#queueOptions(o))).handOnAtOnce()
    } catch (error) {
      throw this.#failed(error, start, o.signal)
    }
    let permit: Lock
    try {
      permit = await this.#take(locker, o, start)
    } catch (error) {
      // The next waiter is handed the queue lock by this release; the error need not wait for it (close() does).
      queue.release().catch(() => {})
      throw error
    }
    this.#acquired(permit, start)
    await handOn(queue)
    return permit
  }

  /**
   * One attempt, no waiting: a permit when one is free and nobody waits before us.
   * @returns the permit, or null when every permit is held or others wait for one.
   * @throws LockUnavailableError when Redis did not answer within `commandTimeoutMs`.
   */
  async tryAcquire(options?: TryAcquireOptions): Promise<Lock | null> {
    const o = resolveAcquireOptions(options, this.#host.defaults, 'tryAcquire', this.#host.ttlFloor)
    const start = performance.now()
    this.#assertOpen()
    const locker = this.#host.permits()
    const queue = await locker.tryAcquire(this.#names.queue, { ttlMs: this.#queueTtl(o) }).catch((error: unknown) => {
      throw this.#failed(error, start, undefined)
    })
    if (queue === null) {
      this.#emit({ type: 'contended', resource: this.#names.queue, holderTtlMs: -1 })
      return null
    }
    queue.handOnAtOnce()
    let permit: Lock | undefined
    try {
      permit = await this.#tryEach(locker, o, start)
    } catch (error) {
      queue.release().catch(() => {})
      throw error
    }
    if (permit) this.#acquired(permit, start)
    else this.#emit({ type: 'contended', resource: this.#names.queue, holderTtlMs: -1 })
    await handOn(queue)
    return permit ?? null
  }

  /**
   * Runs `fn` holding a permit, its watchdog on, and always releases it. A release that fails
   * because Redis is unreachable is not thrown: the permit's lease then runs out.
   */
  async using<T>(fn: (permit: Lock) => Promise<T> | T, options: UsingOptions = {}): Promise<T> {
    if (typeof fn !== 'function') throw new InvalidLockOptionError('fn', 'must be a function', fn)
    const o = resolveAcquireOptions(options, this.#host.defaults, 'using', this.#host.ttlFloor)
    const permit = await this.acquire(o)
    try {
      return await fn(permit)
    } finally {
      await permit.release().catch(() => {})
    }
  }

  /**
   * What Redis holds for the semaphore: permits held, each permit's last token, lockers waiting.
   * Read-only; one round trip per permit and one for the queue, in parallel.
   * @throws LockUnavailableError when Redis did not answer within `commandTimeoutMs`.
   */
  async inspect(): Promise<SemaphoreInspection> {
    if (this.#host.closed) throw new LockUnavailableError(this.name, 'inspect', 'the locker was closed')
    const locker = this.#host.permits()
    const [queue, ...permits] = await Promise.all(
      [this.#names.queue, ...this.#names.permits].map((resource) => locker.inspect(resource)),
    )
    return {
      name: this.name,
      permits: this.permits,
      held: permits.filter((p) => p.state !== 'free').length,
      lastTokens: permits.map((p) => p.lastToken),
      waiting: queue!.waiting + (queue!.state === 'free' ? 0 : 1),
    }
  }

  /**
   * Holding the queue lock: a free permit if there is one, else the first one released. With
   * few permits the waiting tries are the first tries; with more, the permits are tried a few at
   * a time before waiting on all of them.
   */
  async #take(locker: PermitSource, o: ResolvedAcquire, start: number): Promise<Lock> {
    if (this.permits > TRIES_AT_ONCE) {
      const permit = await this.#tryEach(locker, o, start)
      if (permit) return permit
    }
    return this.#race(locker, o, start)
  }

  /** One try of each permit, a few at a time: the first granted one, the others given back. */
  async #tryEach(locker: PermitSource, o: ResolvedAcquire, start: number): Promise<Lock | undefined> {
    const n = this.permits
    const from = this.#next++ % n
    for (let i = 0; i < n; i += TRIES_AT_ONCE) {
      const batch: string[] = []
      for (let j = i; j < Math.min(n, i + TRIES_AT_ONCE); j++) batch.push(this.#names.permits[(from + j) % n]!)
      const tries = await Promise.allSettled(
        batch.map((resource) => locker.tryAcquire(resource, { ttlMs: o.ttlMs, autoExtend: o.autoExtend })),
      )
      let kept: Lock | undefined
      let failure: unknown
      for (const t of tries) {
        if (t.status === 'rejected') failure ??= t.reason
        else if (t.value !== null && kept === undefined) kept = t.value
        else if (t.value !== null) t.value.release().catch(() => {})
      }
      if (kept) return kept
      if (failure !== undefined) throw this.#failed(failure, start, undefined)
    }
    return undefined
  }

  /**
   * Waits on every permit at once for the rest of the wait: the first grant wins; the other
   * acquires are aborted (a grant that lands anyway is given back).
   */
  #race(locker: PermitSource, o: ResolvedAcquire, start: number): Promise<Lock> {
    const waitMs = Math.max(0, Math.round(o.waitMs - (performance.now() - start)))
    const caller = o.signal
    // Aborted while the queue lock was being granted: its listener below would never fire.
    if (caller?.aborted) return Promise.reject(this.#aborted(start, caller))
    const controller = new AbortController()
    const onAbort = (): void => controller.abort(caller?.reason)
    caller?.addEventListener('abort', onAbort, { once: true })
    const each = { ttlMs: o.ttlMs, waitMs, signal: controller.signal, autoExtend: o.autoExtend }
    return new Promise<Lock>((resolve, reject) => {
      let winner: Lock | undefined
      let pending = this.permits
      const errors: unknown[] = []
      const done = (): void => {
        if (--pending > 0) return
        caller?.removeEventListener('abort', onAbort)
        if (winner) return
        reject(this.#raceFailed(errors, start, caller))
      }
      for (const resource of this.#names.permits) {
        locker.acquire(resource, each).then(
          (lock) => {
            if (winner === undefined) {
              winner = lock
              caller?.removeEventListener('abort', onAbort)
              controller.abort()
              resolve(lock)
            } else {
              lock.release().catch(() => {})
            }
            done()
          },
          (error: unknown) => {
            errors.push(error)
            done()
          },
        )
      }
    })
  }

  /** Why none of the waiting acquires won: the caller's abort, a Redis failure, or the wait ran out. */
  #raceFailed(errors: unknown[], start: number, signal: AbortSignal | undefined): Error {
    if (signal?.aborted) return this.#aborted(start, signal)
    const failure = errors.find((e) => !(e instanceof LockTimeoutError) && !(e instanceof LockAbortedError))
    if (failure !== undefined) return this.#failed(failure, start, signal)
    return this.#timeout(start)
  }

  /**
   * An error of the queue lock or of a permit's acquire, as the semaphore's: it names the
   * semaphore (its `resource` and message), not the internal resource that failed (`<name>:queue`,
   * `<name>:permit:<i>`), which stays in the `cause`'s message.
   */
  #failed(error: unknown, start: number, signal: AbortSignal | undefined): Error {
    if (error instanceof LockTimeoutError) return this.#timeout(start)
    if (error instanceof LockAbortedError) return this.#aborted(start, signal)
    if (
      error instanceof LockUnavailableError &&
      !(error instanceof LockReplicationError) &&
      error.resource !== this.name
    ) {
      const internal = `could not acquire lock "${error.resource}": `
      const why = error.message.startsWith(internal) ? error.message.slice(internal.length) : error.message
      return new LockUnavailableError(
        this.name,
        error.operation,
        `could not acquire a permit of semaphore "${this.name}": ${why}`,
        // The client's own error, as a lock's LockUnavailableError carries it.
        error.cause ?? error,
      )
    }
    if (error instanceof LockError) return error
    return error instanceof Error ? error : new Error(String(error))
  }

  #timeout(start: number): LockTimeoutError {
    const waitedMs = performance.now() - start
    this.#emit({ type: 'timeout', resource: this.#names.queue, waitedMs })
    return new LockTimeoutError(this.name, waitedMs, 'semaphore')
  }

  #aborted(start: number, signal: AbortSignal | undefined): LockAbortedError {
    const waitedMs = performance.now() - start
    this.#emit({ type: 'aborted', resource: this.#names.queue, waitedMs })
    return new LockAbortedError(this.name, waitedMs, signal?.reason, 'semaphore')
  }

  #acquired(permit: Lock, start: number): void {
    if (!this.#host.listening) return
    this.#emit({
      type: 'acquired',
      resource: permit.resource,
      token: permit.token,
      ttlMs: permit.ttlMs,
      waitedMs: performance.now() - start,
      attempts: 1,
    })
  }

  /** The queue lock's options: the caller's wait and signal, a short lease, always renewed. */
  #queueOptions(o: ResolvedAcquire): AcquireOptions {
    return { ttlMs: this.#queueTtl(o), waitMs: o.waitMs, signal: o.signal, autoExtend: true }
  }

  #queueTtl(o: ResolvedAcquire): number {
    return Math.min(o.ttlMs, Math.max(QUEUE_TTL_MS, this.#host.ttlFloor.minMs))
  }

  #emit(event: LockEvent): void {
    if (this.#host.listening) this.#host.emit(event)
  }

  #assertOpen(): void {
    if (this.#host.closed) throw new LockUnavailableError(this.name, 'acquire', 'the locker was closed')
  }
}

/**
 * Which events of the semaphores' own Locker reach the Locker's listeners. The semaphore reports
 * an acquire once (`acquired` of the permit, with the whole wait; `timeout` or `aborted` on
 * `<name>:queue`); the queue lock's grants and the aborted waits of the permits that lost a race
 * are its workings, not news. Everything else (a permit's `released`, `extended`, `lost`,
 * `error`, `unavailable`...) passes as it is.
 */
export function forwardsSemaphoreEvent(event: LockEvent): boolean {
  const queue = event.resource.endsWith(':queue')
  switch (event.type) {
    case 'acquired':
    case 'timeout':
    case 'aborted':
    case 'contended':
    case 'reentered':
      return false
    case 'released':
    case 'extended':
      return !queue
    default:
      return true
  }
}

/**
 * Hands the queue lock on to the next waiter, and waits for Redis to have done it before the
 * permit is returned: what the caller does next (3 s of synchronous work, a GC pause) must not
 * keep a free permit from the next waiter, and a client may write a command only later in the
 * event loop (node-redis writes at `setImmediate`: a call merely sent before `acquire()` returned
 * went out after the caller's synchronous work). A failed hand-on is not the caller's error: the
 * queue lock's short lease then frees it.
 */
async function handOn(queue: Lock): Promise<void> {
  await queue.release().catch(() => {})
}
