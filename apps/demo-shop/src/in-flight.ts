/**
 * Work still running in a process (a purchase, a payment, a gateway charge), counted by its own
 * promise rather than by its HTTP request: a handler goes on after its caller gave up or was
 * killed, and a drain must wait for it before it closes the pool its last write needs.
 */

/** A counter of running work, with a promise of the moment it reaches zero. */
export class InFlight {
  #count = 0
  #idle: Array<() => void> = []

  /** Work running now. */
  get count(): number {
    return this.#count
  }

  /** Runs `work`, counted until it settles. */
  async track<T>(work: () => Promise<T>): Promise<T> {
    this.#count++
    try {
      return await work()
    } finally {
      this.#count--
      if (this.#count === 0) for (const wake of this.#idle.splice(0)) wake()
    }
  }

  /**
   * Resolves `true` once no work runs, or `false` when `timeoutMs` passed first (the caller says
   * what it gives up on). An event, not a poll: the last `track` to settle wakes it.
   */
  idle(timeoutMs: number): Promise<boolean> {
    if (this.#count === 0) return Promise.resolve(true)
    return new Promise((resolve) => {
      const wake = () => {
        clearTimeout(timer)
        resolve(true)
      }
      const timer = setTimeout(() => {
        this.#idle = this.#idle.filter((w) => w !== wake)
        resolve(false)
      }, timeoutMs)
      this.#idle.push(wake)
    })
  }
}
