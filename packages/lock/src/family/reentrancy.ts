import { AsyncLocalStorage } from 'node:async_hooks'
import type { Lock } from '../lock.js'
import { onAbort } from '../abort-listeners.js'

/** How long a re-entry waits for its turn, and what it ends with when it gives up. */
export interface TurnWait {
  /** performance.now() at which the wait runs out. */
  readonly until: number
  readonly signal: AbortSignal | undefined
  timedOut(): Error
  aborted(): Error
}

/** One branch waiting for its turn inside a held lock. */
interface TurnWaiter {
  /** It takes the turn (a `using()` routine), or only waits for it to be free (a handle taken by hand). */
  readonly turn: boolean
  readonly resolve: (lock: Lock | undefined) => void
  readonly reject: (error: Error) => void
  timer: NodeJS.Timeout | undefined
  stopListening: (() => void) | undefined
}

/** Which routine is inside one handle's lock now (a re-entry of it), and who waits, oldest first. */
interface Turns {
  active: Lock | undefined
  readonly waiting: TurnWaiter[]
}

/**
 * Which locks count as held in the current async context, for one Locker: reentrancy.
 *
 * `using()` and `lock.run()` run their routine in a context that lists the lock (by resource);
 * an acquire of that resource inside it, on the same Locker, is a re-entry: a handle on the same
 * grant, with the same token and signal, made without a round trip. Outside that context — another
 * request in the same process, or another Locker (each has its own storage) — the resource is
 * held by someone else like any other, and the acquire waits its turn in the fair queue.
 *
 * Routines of one context take turns. Children started together (`Promise.all`) inherit the
 * context, so each of them would re-enter at once, and their read-modify-writes would interleave
 * under one token (issue 33: five reserves of 1 from 100 left 99). So a re-entry that runs a
 * routine (`using()`) takes a turn: one routine at a time is inside a handle's lock, the next waits,
 * first come first served, until that one returns (bounded by its `waitMs` and `signal`, like any
 * acquire). A re-entry made inside a routine re-enters that routine's own handle, at once: nested
 * code never waits for itself. A handle taken by hand (`acquire()`, `tryAcquire()`) waits for a
 * routine that is inside, but takes no turn: it has no scope of its own, and the code holding it
 * may re-enter the lock again (a `using()` further down the same branch) before releasing it —
 * which a turn would make wait for itself. Branches that share a lock concurrently therefore
 * re-enter it with `using()`.
 *
 * Why the same token: a new grant would mint a larger one, and the holder's own later writes
 * with the outer token would then be refused as stale by the fence.
 */
export class HeldInContext {
  readonly #storage = new AsyncLocalStorage<ReadonlyMap<string, Lock>>()
  readonly #turns = new WeakMap<Lock, Turns>()

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

  /**
   * A re-entry of `held` without waiting: the new handle, `busy` while a routine is inside it (or
   * waits to be), undefined when the grant is no longer held (acquire it as anyone would).
   * @param turn the handle runs a routine (`using()`): it holds the turn until it is released.
   */
  tryEnter(held: Lock, turn: boolean): Lock | 'busy' | undefined {
    const turns = this.#turns.get(held)
    if (turns && (turns.active !== undefined || turns.waiting.length > 0)) return 'busy'
    return this.#take(held, turn)
  }

  /** A re-entry of `held`: {@link tryEnter}, or once the routines before it are done. */
  enter(held: Lock, turn: boolean, wait: TurnWait): Lock | undefined | Promise<Lock | undefined> {
    const now = this.tryEnter(held, turn)
    if (now !== 'busy') return now
    if (performance.now() >= wait.until) return Promise.reject(wait.timedOut())
    const turns = this.#turns.get(held)!
    return new Promise<Lock | undefined>((resolve, reject) => {
      const w: TurnWaiter = { turn, resolve, reject, timer: undefined, stopListening: undefined }
      const leave = (error: Error): void => {
        const i = turns.waiting.indexOf(w)
        if (i < 0) return
        turns.waiting.splice(i, 1)
        clearTimeout(w.timer)
        w.stopListening?.()
        reject(error)
        // The head gave up while the lock was free for it: those behind it go on.
        this.#next(held, turns)
      }
      w.timer = setTimeout(() => leave(wait.timedOut()), Math.max(0, wait.until - performance.now()))
      w.timer.unref()
      if (wait.signal) w.stopListening = onAbort(wait.signal, () => leave(wait.aborted()))
      turns.waiting.push(w)
    })
  }

  /** The re-entry itself: a handle on the grant, which holds the turn until it is released if `turn`. */
  #take(held: Lock, turn: boolean): Lock | undefined {
    const lock = held.reenter()
    if (!lock || !turn) return lock
    let turns = this.#turns.get(held)
    if (!turns) {
      turns = { active: undefined, waiting: [] }
      this.#turns.set(held, turns)
    }
    const t = turns
    t.active = lock
    lock.onHandleRelease(() => {
      if (t.active !== lock) return
      t.active = undefined
      this.#next(held, t)
    })
    return lock
  }

  /** The turn is free: the oldest waiting re-entry goes in (or, the grant gone, acquires as anyone would). */
  #next(held: Lock, turns: Turns): void {
    while (turns.active === undefined) {
      const w = turns.waiting.shift()
      if (!w) return
      clearTimeout(w.timer)
      w.stopListening?.()
      w.resolve(this.#take(held, w.turn))
    }
  }
}
