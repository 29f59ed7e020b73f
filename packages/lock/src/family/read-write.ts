/**
 * A read-write lock: `locker.readWrite(name)`, many readers or one writer at a time across every
 * Locker and process that uses the name (with the same prefix).
 *
 * Built on scripts of its own (scripts/read-write.ts) over one Redis (also Sentinel or Cluster
 * through ioredis: one hash tag per name), not on the lock's grants: a reader count kept as locks
 * would need a lock per reader that a writer cannot enumerate. Each reader has a lease of its own
 * (a member of a sorted set scored by its expiry), so a stalled reader expires alone; a writer's
 * lease is a key like a lock's.
 *
 * Policy: writer preference. A writer that finds the lock held takes a place among the waiting
 * writers, and while one live writer waits no new reader is granted; readers already in finish.
 * Writers are granted in arrival order. A waiting writer that stops trying (its process died) is
 * dropped after `3 × pollMs + commandTimeoutMs`, so readers are held back at most that long.
 *
 * Waiting: a blocked read or write listens for the release messages of the name (one pub/sub
 * connection per Locker, family/read-write-wakes.ts) and tries again when one comes; as the
 * backstop for a lost message or a lease that simply ran out, it also tries after a jittered
 * exponential backoff (2 ms doubling up to `pollMs`), never later than the end of the lease Redis
 * reported. Not the lock's fair queue and wake-one: every waiter of a name here wakes (docs/LOCK.md).
 *
 * Keys live under `<prefix>rw:`, apart from every lock's (`<prefix>{…}`) and semaphore's.
 */
import { InvalidLockOptionError, LockAbortedError, LockTimeoutError, LockUnavailableError } from '../errors.js'
import type { EventSink } from '../core/lock-source.js'
import type { LockEvent } from '../events.js'
import { newOwnerId } from '../owner-id.js'
import {
  checkResource,
  resolveAcquireOptions,
  type AcquireOptions,
  type ResolvedAcquire,
  type ResolvedLockerOptions,
  type TtlFloor,
  type UsingOptions,
} from '../options.js'
import { readWriteKeys, type ReadWriteKeys } from '../keys.js'
import type { ReadWriteEngine, TryOutcome } from './read-write-engine.js'
import { ReadWriteHold, type HoldCalls, type ReadWriteMode } from './read-write-hold.js'

/** Where blocked reads and writes hear of releases (family/read-write-wakes.ts; one per node in quorum mode). */
export interface Wakes {
  /**
   * Calls `wake` on every release message of `channel` until the returned function is called.
   * Resolves once subscribed, or after a bounded wait without (the waiter then relies on its tries).
   */
  watch(channel: string, wake: () => void): Promise<() => void>
  close(): void
}

/** First pause of a blocked read or write before it tries again, in ms. */
const FIRST_BACKOFF_MS = 2

/** A blocked acquire's link to the release messages. */
interface Waiting {
  /** A release message came since the last try. */
  woken: boolean
  /** Ends the pause in progress, if any. */
  wake: (() => void) | undefined
  /** Stops listening; set once the acquire first missed. */
  unwatch: (() => void) | undefined
}

/** Options of `locker.readWrite()`: none yet (each `read()`/`write()` takes its own). */
export type ReadWriteOptions = Record<never, never>

/** What Redis says of a read-write lock at one moment (a snapshot: it may be stale when it arrives). */
export interface ReadWriteInspection {
  readonly name: string
  readonly state: 'free' | 'read' | 'write'
  /** Readers whose lease is live. */
  readonly readers: number
  /** The writer's token while a writer holds. */
  readonly writerToken: bigint | undefined
  /** The writer's remaining lease in ms while a writer holds. */
  readonly writerTtlMs: number | undefined
  /** Writers waiting (live): while there is one, no new reader is granted. */
  readonly waitingWriters: number
  /** The counter's value: the last write's token (or a reader's seed); undefined when none. */
  readonly lastToken: bigint | undefined
}

/**
 * What a {@link ReadWriteLock} needs from its Locker: the engine that runs its round trips, the
 * defaults and events, and a register of the holds, so that closing the Locker gives them back.
 */
export interface ReadWriteHost extends EventSink {
  /** The round trips: one Redis, or a quorum of nodes (family/read-write-engine.ts). */
  readonly engine: ReadWriteEngine
  readonly defaults: ResolvedLockerOptions
  readonly ttlFloor: TtlFloor
  /** Where blocked reads and writes hear of releases. */
  readonly wakes: Wakes
  readonly closed: boolean
  held(hold: ReadWriteHold): void
  ended(hold: ReadWriteHold): void
}

/**
 * Checks `locker.readWrite()`'s arguments before any I/O.
 * @returns the checked name.
 */
export function resolveReadWrite(name: unknown, options: unknown): string {
  let checked: string
  try {
    checked = checkResource(name)
  } catch (error) {
    if (error instanceof InvalidLockOptionError) throw new InvalidLockOptionError('name', error.rule, name)
    throw error
  }
  if (options !== undefined) {
    if (options === null || typeof options !== 'object' || Array.isArray(options))
      throw new InvalidLockOptionError('options', 'must be an object (not an array)', options)
    const unknown = Object.keys(options)[0]
    if (unknown !== undefined)
      throw new InvalidLockOptionError(
        `options.${unknown}`,
        'is not an option of readWrite() (it takes none yet; give ttlMs, waitMs, signal to read() or write())',
        (options as Record<string, unknown>)[unknown],
      )
  }
  return checked
}

/**
 * A read-write lock: many readers or one writer at a time, across every Locker and process that
 * uses the same name and prefix; a waiting writer stops new readers (writer preference). Obtained
 * from `locker.readWrite()`; never built by hand.
 *
 * @example
 * ```ts
 * const rw = locker.readWrite('doc:1')
 * const text = await rw.usingRead((read) => loadDoc('doc:1', { readAfter: read.token }))
 * await rw.usingWrite((write) => saveDoc('doc:1', text + '!', { fenceToken: write.token }))
 * ```
 */
export class ReadWriteLock {
  /** The name, as given to `locker.readWrite()`. */
  readonly name: string
  readonly #host: ReadWriteHost
  readonly #keys: ReadWriteKeys

  /** @internal */
  constructor(host: ReadWriteHost, name: string) {
    this.#host = host
    this.name = name
    this.#keys = readWriteKeys(host.defaults.prefix, name)
  }

  /**
   * Takes a reader's hold, waiting up to `waitMs` while a writer holds or waits.
   * @throws LockTimeoutError after `waitMs`.
   * @throws LockAbortedError when `signal` aborts first.
   * @throws LockUnavailableError when Redis did not answer within the wait.
   * @throws InvalidLockOptionError for bad input, before any I/O.
   */
  read(options?: AcquireOptions): Promise<ReadWriteHold> {
    return this.#acquire('read', resolveAcquireOptions(options, this.#host.defaults, 'acquire', this.#host.ttlFloor))
  }

  /**
   * Takes the writer's hold, waiting up to `waitMs` while readers or another writer hold it.
   * Once it waits, no new reader is granted until it is served or gives up.
   * @throws LockTimeoutError, LockAbortedError, LockUnavailableError, InvalidLockOptionError as read().
   */
  write(options?: AcquireOptions): Promise<ReadWriteHold> {
    return this.#acquire('write', resolveAcquireOptions(options, this.#host.defaults, 'acquire', this.#host.ttlFloor))
  }

  /** Runs `fn` holding a reader's hold, its watchdog on, and always releases it. */
  usingRead<T>(fn: (hold: ReadWriteHold) => Promise<T> | T, options: UsingOptions = {}): Promise<T> {
    return this.#using('read', fn, options)
  }

  /** Runs `fn` holding the writer's hold, its watchdog on, and always releases it. */
  usingWrite<T>(fn: (hold: ReadWriteHold) => Promise<T> | T, options: UsingOptions = {}): Promise<T> {
    return this.#using('write', fn, options)
  }

  /**
   * What Redis holds for the lock now: who holds (readers, a writer), writers waiting, the last
   * token. Read-only, one round trip.
   * @throws LockUnavailableError when Redis did not answer within `commandTimeoutMs`.
   */
  async inspect(): Promise<ReadWriteInspection> {
    if (this.#host.closed) throw new LockUnavailableError(this.name, 'inspect', 'the locker was closed')
    try {
      const raw = await this.#host.engine.inspect(this.#keys)
      const state = raw.writerToken !== undefined ? 'write' : raw.readers > 0 ? 'read' : 'free'
      return { name: this.name, state, ...raw }
    } catch (error) {
      throw new LockUnavailableError(this.name, 'inspect', `could not inspect "${this.name}"`, error)
    }
  }

  async #using<T>(mode: ReadWriteMode, fn: (hold: ReadWriteHold) => Promise<T> | T, options: UsingOptions): Promise<T> {
    if (typeof fn !== 'function') throw new InvalidLockOptionError('fn', 'must be a function', fn)
    const o = resolveAcquireOptions(options, this.#host.defaults, 'using', this.#host.ttlFloor)
    const hold = await this.#acquire(mode, o)
    try {
      return await fn(hold)
    } finally {
      await hold.release().catch(() => {})
    }
  }

  async #acquire(mode: ReadWriteMode, o: ResolvedAcquire): Promise<ReadWriteHold> {
    const start = performance.now()
    if (this.#host.closed) throw new LockUnavailableError(this.name, 'acquire', 'the locker was closed')
    if (o.signal?.aborted) throw this.#aborted(start, o.signal)
    const waiting: Waiting = { woken: false, wake: undefined, unwatch: undefined }
    try {
      return await this.#tries(mode, o, start, waiting)
    } finally {
      waiting.unwatch?.()
    }
  }

  async #tries(mode: ReadWriteMode, o: ResolvedAcquire, start: number, waiting: Waiting): Promise<ReadWriteHold> {
    // A writer keeps one owner id for all its tries: its place among the waiting writers is
    // under it. A reader takes a new one for each try: a try given back late (quorum mode: a node
    // that answered a failed try after the next try was sent) then never takes back a later try's
    // grant. (A writer's later try finds its own earlier grant there and is refused.)
    let ownerId = newOwnerId()
    let tried = false
    const d = this.#host.defaults
    const engine = this.#host.engine
    const until = start + o.waitMs
    // A writer's place among the waiting writers is ordered by when it first tried.
    const arrival = Date.now()
    let backoff = FIRST_BACKOFF_MS
    let failure: unknown
    let contended = false
    for (;;) {
      if (mode === 'read' && tried) ownerId = newOwnerId()
      tried = true
      const sentAt = performance.now()
      waiting.woken = false
      let reply: TryOutcome | undefined
      try {
        reply = await engine.try(this.#keys, mode, { ownerId, ttlMs: o.ttlMs, join: o.waitMs > 0, arrival })
      } catch (error) {
        // The outcome is unknown (no answer in time, a dropped connection): whatever the try did
        // in our name is undone before anything else is sent for it.
        failure = error
        this.#giveBack(mode, ownerId)
      }
      if (reply?.granted) {
        const token = reply.token
        if (performance.now() - sentAt >= engine.validMs(o.ttlMs)) {
          // The lease ran out during the round trip: nothing of it is ours.
          this.#giveBack(mode, ownerId)
        } else {
          return this.#granted(mode, ownerId, token, o, sentAt, start)
        }
      }
      if (this.#host.closed) {
        this.#giveBack(mode, ownerId)
        throw new LockUnavailableError(this.name, 'acquire', 'the locker was closed')
      }
      const now = performance.now()
      if (now >= until) {
        if (mode === 'write') this.#giveBack(mode, ownerId)
        if (failure !== undefined && reply === undefined)
          throw new LockUnavailableError(
            this.name,
            'acquire',
            `could not acquire "${this.name}" for ${mode}: Redis did not answer within the wait`,
            failure,
          )
        const waitedMs = now - start
        this.#emit({ type: 'timeout', resource: this.name, waitedMs })
        throw new LockTimeoutError(this.name, waitedMs)
      }
      // Reported once per acquire, at its first miss: the retries are the wait's workings.
      if (reply && !contended) {
        contended = true
        this.#emit({ type: 'contended', resource: this.name, holderTtlMs: reply.granted ? 0 : reply.holderMs })
      }
      if (!waiting.unwatch) {
        // The first miss: listen for releases, then try again at once (one may have come before
        // the subscription).
        waiting.unwatch = await this.#host.wakes.watch(this.#keys.released, () => {
          waiting.woken = true
          waiting.wake?.()
        })
        if (o.signal?.aborted) {
          this.#giveBack(mode, ownerId)
          throw this.#aborted(start, o.signal)
        }
        continue
      }
      const hint = reply && !reply.granted && reply.holderMs >= 0 ? reply.holderMs + 1 : Number.POSITIVE_INFINITY
      const pause = Math.min(hint, backoff * (0.75 + Math.random() / 2), until - now)
      backoff = Math.min(d.pollMs, backoff * 2)
      if (!(await this.#pause(pause, o.signal, waiting))) {
        this.#giveBack(mode, ownerId)
        throw this.#aborted(start, o.signal)
      }
    }
  }

  #granted(
    mode: ReadWriteMode,
    ownerId: string,
    token: bigint,
    o: ResolvedAcquire,
    sentAt: number,
    start: number,
  ): ReadWriteHold {
    const host = this.#host
    const engine = host.engine
    const calls: HoldCalls = {
      ttlFloor: host.ttlFloor,
      emit: (event) => this.#emit(event),
      ended: (hold) => host.ended(hold),
      extend: (ttlMs) => engine.extend(this.#keys, mode, ownerId, ttlMs),
      release: () => engine.release(this.#keys, mode, ownerId),
      validMs: (ttlMs) => engine.validMs(ttlMs),
    }
    const hold = new ReadWriteHold(calls, {
      resource: this.name,
      mode,
      token,
      ttlMs: o.ttlMs,
      sentAt,
      autoExtend: o.autoExtend,
    })
    host.held(hold)
    this.#emit({
      type: 'acquired',
      resource: this.name,
      token,
      ttlMs: o.ttlMs,
      waitedMs: performance.now() - start,
      attempts: 1,
    })
    return hold
  }

  /** Undoes whatever a try may have done in `ownerId`'s name (a lease, a place among waiting writers). */
  #giveBack(mode: ReadWriteMode, ownerId: string): void {
    this.#host.engine.release(this.#keys, mode, ownerId).catch(() => {})
  }

  /** Sleeps `ms`, or less when a release message comes; false when `signal` aborted first. */
  #pause(ms: number, signal: AbortSignal | undefined, waiting: Waiting): Promise<boolean> {
    return new Promise((resolve) => {
      if (signal?.aborted) return resolve(false)
      if (waiting.woken) return resolve(true)
      const done = (ok: boolean): void => {
        clearTimeout(timer)
        signal?.removeEventListener('abort', onAbort)
        waiting.wake = undefined
        resolve(ok)
      }
      const onAbort = (): void => done(false)
      const timer = setTimeout(() => done(true), Math.max(0, ms))
      waiting.wake = () => done(true)
      signal?.addEventListener('abort', onAbort, { once: true })
    })
  }

  #aborted(start: number, signal: AbortSignal | undefined): LockAbortedError {
    const waitedMs = performance.now() - start
    this.#emit({ type: 'aborted', resource: this.name, waitedMs })
    return new LockAbortedError(this.name, waitedMs, signal?.reason)
  }

  #emit(event: LockEvent): void {
    if (this.#host.listening) this.#host.emit(event)
  }
}
