/**
 * Several resources at once: `locker.acquireAll(resources)` and `locker.usingAll(resources, fn)`.
 *
 * The resources are taken one after another in one canonical order (code-unit order of their
 * names), whatever order the caller lists them in: two callers that need the same resources then
 * never hold one each while waiting for the other's (no deadlock). Each resource is a lock of its
 * own (its own keys, so resources may live on different Cluster slots, and its own token, since
 * tokens are ordered per resource); the set shares one watchdog and one `signal`.
 */
import { InvalidLockOptionError, LockError, LockLostError } from '../errors.js'
import type { Lock } from '../lock.js'
import { checkResource } from '../options.js'
import { asyncDispose } from './async-dispose.js'

/** Most resources one `acquireAll()` takes. */
export const MAX_RESOURCES = 64

/**
 * Checks a list of resources before any I/O: a non-empty array of at most {@link MAX_RESOURCES}
 * valid names, none twice (a repeat is a typed error, not silently merged: it usually means two
 * names were built from the same id by mistake).
 * @returns the names in canonical order.
 */
export function canonicalResources(resources: unknown): string[] {
  if (!Array.isArray(resources))
    throw new InvalidLockOptionError('resources', 'must be an array of resource names', resources)
  if (resources.length === 0) throw new InvalidLockOptionError('resources', 'must not be empty', resources.length)
  if (resources.length > MAX_RESOURCES)
    throw new InvalidLockOptionError('resources', `must hold at most ${MAX_RESOURCES} names`, resources.length)
  const seen = new Set<string>()
  resources.forEach((resource: unknown, i) => {
    try {
      checkResource(resource)
    } catch (error) {
      if (error instanceof InvalidLockOptionError)
        throw new InvalidLockOptionError(`resources[${i}]`, error.rule, resource)
      throw error
    }
    if (seen.has(resource as string))
      throw new InvalidLockOptionError(`resources[${i}]`, 'must not repeat a resource of the list', resource)
    seen.add(resource as string)
  })
  return [...seen].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0))
}

/**
 * Locks on several resources, taken together by `locker.acquireAll()`. `tokens.get(resource)` is
 * each resource's fencing token; `signal` aborts (with the first `LockLostError`) as soon as any
 * of them is lost; `release()` releases them all.
 */
export class MultiLock implements AsyncDisposable {
  readonly #locks: Lock[] = []
  readonly #tokens = new Map<string, bigint>()
  readonly #controller = new AbortController()
  readonly #autoExtend: boolean
  #watchdog: NodeJS.Timeout | undefined
  #ttlMs: number
  #release: Promise<boolean> | undefined
  #completed = false

  /**
   * @internal Starts empty: `add()` each lock as it is granted. The watchdog runs from the first
   * lock on, so a lease taken early does not run out while the later ones are waited for; once
   * `complete()`, it goes on only with `autoExtend`.
   */
  constructor(ttlMs: number, autoExtend: boolean) {
    this.#ttlMs = ttlMs
    this.#autoExtend = autoExtend
  }

  /** @internal */
  add(lock: Lock): void {
    this.#locks.push(lock)
    this.#tokens.set(lock.resource, lock.token)
    const signal = lock.signal
    if (signal.aborted) this.#lost(signal.reason)
    else signal.addEventListener('abort', () => this.#lost(signal.reason), { once: true })
    if (this.#locks.length === 1) this.#schedule(Math.max(1, Math.floor(this.#ttlMs / 3)))
  }

  /** @internal Every lock is in. */
  complete(): this {
    this.#completed = true
    if (!this.#autoExtend) clearTimeout(this.#watchdog)
    return this
  }

  /** The resources, in the canonical order they were taken in. */
  get resources(): readonly string[] {
    return this.#locks.map((lock) => lock.resource)
  }

  /** The fencing token of each resource: fenced writes to what `resource` guards carry `tokens.get(resource)`. */
  get tokens(): ReadonlyMap<string, bigint> {
    return this.#tokens
  }

  /** The lock of each resource, in canonical order. */
  get locks(): readonly Lock[] {
    return [...this.#locks]
  }

  /** Aborts with the first `LockLostError` when any of the locks is lost. Not aborted by release(). */
  get signal(): AbortSignal {
    return this.#controller.signal
  }

  /** True while every lock is held. */
  isHeld(): boolean {
    return this.#locks.every((lock) => lock.isHeld())
  }

  /**
   * Resets every lease to `ttlMs` (default: the current one), in parallel.
   * @throws the first error of a lock that could not be extended (`LockLostError`, `LockUnavailableError`).
   */
  async extend(ttlMs: number = this.#ttlMs): Promise<void> {
    const results = await Promise.allSettled(this.#locks.map((lock) => lock.extend(ttlMs)))
    const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected')
    if (failed) throw failed.reason
    this.#ttlMs = ttlMs
  }

  /**
   * Stops the watchdog and releases every lock, in parallel. Calling it again returns the first
   * call's result.
   * @returns true when every lock was still ours; false when any had expired or been taken.
   * @throws the first `LockUnavailableError` when Redis did not answer (every release was still sent).
   */
  release(): Promise<boolean> {
    this.#release ??= this.#doRelease()
    return this.#release
  }

  /** Releases every lock like {@link release}, and never throws: for `await using`. */
  async [asyncDispose](): Promise<void> {
    await this.release().catch(() => {})
  }

  async #doRelease(): Promise<boolean> {
    clearTimeout(this.#watchdog)
    const results = await Promise.allSettled(this.#locks.map((lock) => lock.release()))
    const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected')
    if (failed) throw failed.reason
    return results.every((r) => r.status === 'fulfilled' && r.value)
  }

  /** One watchdog for the set: every lock renewed together, every `ttlMs / 3`. */
  #schedule(ms: number): void {
    this.#watchdog = setTimeout(() => void this.#renew(), ms)
    this.#watchdog.unref()
  }

  async #renew(): Promise<void> {
    if (this.#release || this.#controller.signal.aborted) return
    const results = await Promise.allSettled(this.#locks.map((lock) => lock.extend(this.#ttlMs)))
    if (this.#release || this.#controller.signal.aborted) return
    const lost = results.find((r) => r.status === 'rejected' && r.reason instanceof LockLostError)
    if (lost) return // that lock's signal has aborted, and with it ours
    if (this.#completed && !this.#autoExtend) return
    const third = Math.max(1, Math.floor(this.#ttlMs / 3))
    // A renewal that failed (Redis did not answer) is tried again soon; a lock whose validity runs
    // out first is lost on its own clock, and aborts the set's signal.
    this.#schedule(results.some((r) => r.status === 'rejected') ? Math.max(1, Math.floor(third / 2)) : third)
  }

  #lost(reason: unknown): void {
    clearTimeout(this.#watchdog)
    if (!this.#controller.signal.aborted)
      this.#controller.abort(reason instanceof LockError ? reason : new Error('a lock of the set was lost'))
  }
}

/** The options of one `acquireAll()`, resolved. */
export interface AllOptions {
  readonly ttlMs: number
  readonly waitMs: number
  readonly signal: AbortSignal | undefined
  readonly autoExtend: boolean
}

/**
 * Takes `names` (canonical order) one after another within one wait, each through `acquire`
 * (the Locker's: the fair queue, reentrancy). The set is returned only if every lock is held when
 * the last one comes: a lock lost while a later one is awaited (its key deleted, its renewals
 * stalled past its lease) ends the wait at once with that lock's `LockLostError` — before issue 33
 * the set came back with a lost member and `usingAll()` ran its routine on it. On any failure — a
 * loss, a timeout, an abort, Redis — the locks taken so far are released before the error is
 * thrown: nothing is left held.
 */
export async function acquireInOrder(
  names: readonly string[],
  o: AllOptions,
  start: number,
  acquire: (name: string, options: { ttlMs: number; waitMs: number; signal: AbortSignal | undefined }) => Promise<Lock>,
): Promise<MultiLock> {
  const set = new MultiLock(o.ttlMs, o.autoExtend)
  const deadline = start + o.waitMs
  // The waits end when the caller's signal aborts, or the set's (a lock taken is lost).
  const stop = new AbortController()
  const stopWith = (signal: AbortSignal) => () => stop.abort(signal.reason)
  const callerAborted = o.signal ? stopWith(o.signal) : undefined
  const setLost = stopWith(set.signal)
  if (o.signal && callerAborted) {
    if (o.signal.aborted) callerAborted()
    else o.signal.addEventListener('abort', callerAborted, { once: true })
  }
  set.signal.addEventListener('abort', setLost, { once: true })
  try {
    for (const name of names) {
      const waitMs = Math.max(0, Math.floor(deadline - performance.now()))
      set.add(await acquire(name, { ttlMs: o.ttlMs, waitMs, signal: stop.signal }))
      if (set.signal.aborted) break
    }
    const lost = lostMember(set)
    if (lost) throw lost
  } catch (error) {
    // A wait ended by the loss of a lock taken: the loss is what happened, not an abort.
    const lost = o.signal?.aborted ? undefined : lostMember(set)
    await set.release().catch(() => {})
    throw lost ?? error
  } finally {
    if (o.signal && callerAborted) o.signal.removeEventListener('abort', callerAborted)
    set.signal.removeEventListener('abort', setLost)
  }
  return set.complete()
}

/** The `LockLostError` of the first lock of the set that is not held any more, if any. */
function lostMember(set: MultiLock): LockLostError | undefined {
  if (set.signal.aborted && set.signal.reason instanceof LockLostError) return set.signal.reason
  const lock = set.locks.find((l) => !l.isHeld())
  return lock && new LockLostError(lock.resource, lock.token, 'expired')
}
