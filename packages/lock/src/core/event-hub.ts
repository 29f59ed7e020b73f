import type { LockEvent } from '../events.js'
import type { EventSink } from './lock-source.js'

/**
 * The listeners of one Locker's events (the `onEvent` option, `locker.listen()`), and the one
 * `emit` every part of it reports through. Listeners run synchronously; what they throw is
 * ignored. `listening` lets a hot path skip building an event nobody reads.
 */
export class EventHub implements EventSink {
  readonly #listeners = new Set<(event: LockEvent) => void>()

  /** True when someone listens. */
  get listening(): boolean {
    return this.#listeners.size > 0
  }

  /** Adds a listener; returns a function that removes it. */
  add(listener: (event: LockEvent) => void): () => void {
    this.#listeners.add(listener)
    return () => {
      this.#listeners.delete(listener)
    }
  }

  readonly emit = (event: LockEvent): void => {
    for (const listener of this.#listeners) {
      try {
        listener(event)
      } catch {
        // A listener's failure must never break locking.
      }
    }
  }
}
