import { AsyncLocalStorage } from 'node:async_hooks'
import type { Lock } from '../lock.js'

/**
 * Which locks count as held in the current async context, for one Locker: reentrancy.
 *
 * `using()` and `lock.run()` run their routine in a context that lists the lock (by resource);
 * an acquire of that resource inside it, on the same Locker, is a re-entry: a handle on the same
 * grant, with the same token and signal, made without a round trip. Outside that context — another
 * request in the same process, or another Locker (each has its own storage) — the resource is
 * held by someone else like any other, and the acquire waits its turn in the fair queue.
 *
 * Why the same token: a new grant would mint a larger one, and the holder's own later writes
 * with the outer token would then be refused as stale by the fence.
 */
export class HeldInContext {
  readonly #storage = new AsyncLocalStorage<ReadonlyMap<string, Lock>>()

  /** The lock on `resource` held in the current async context, if any (it may since have been lost). */
  find(resource: string): Lock | undefined {
    return this.#storage.getStore()?.get(resource)
  }

  /** Runs `fn` in a context where `lock` is held, besides what the current context holds. */
  run<T>(lock: Lock, fn: () => T): T {
    const outer = this.#storage.getStore()
    if (outer?.get(lock.resource) === lock) return fn()
    const held = new Map(outer)
    held.set(lock.resource, lock)
    return this.#storage.run(held, fn)
  }
}
