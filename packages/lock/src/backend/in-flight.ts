import type { InFlight } from '../scripts/define-script.js'

/**
 * The calls a backend has on the wire, counted from send to their last reply (see
 * define-script.ts), so that `close()` can wait until every try, clean-up, hand-off and leave it
 * sent has been answered: a grant that lands after `close()` is then released before the caller
 * quits its client, not left held by nobody for its TTL.
 */
export class InFlightCalls implements InFlight {
  #count = 0
  readonly #idle = new Set<() => void>()

  begin(): void {
    this.#count++
  }

  end(): void {
    if (--this.#count > 0) return
    for (const resolve of [...this.#idle]) resolve()
  }

  get count(): number {
    return this.#count
  }

  /** Resolves once no call is in flight, or after `ms` (whatever is still out there then). */
  idle(ms: number): Promise<void> {
    if (this.#count === 0) return Promise.resolve()
    return new Promise((resolve) => {
      const done = (): void => {
        clearTimeout(timer)
        this.#idle.delete(done)
        resolve()
      }
      const timer = setTimeout(done, Math.max(0, ms))
      timer.unref()
      this.#idle.add(done)
    })
  }
}
