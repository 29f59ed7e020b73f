/**
 * A waiter watches only the key queued just before its own, for its deletion: a release (or a
 * lease that ends, or a waiter that gives up) wakes exactly the one waiter behind it, never the
 * whole queue, and nothing is polled. The watch starts at the revision the predecessor was read
 * at, so a deletion between that read and the watch being set up is delivered too.
 */
import type { EtcdClient, EtcdWatcher } from './etcd-client.js'

export class PredecessorWatch {
  #watcher: EtcdWatcher | undefined
  #cancelled = false
  #fired = false

  /**
   * Watches `key` from `revision` (exclusive: the revision it was read at); `gone` is called once,
   * when it is deleted or when the watch fails (the waiter then looks again).
   */
  constructor(client: EtcdClient, key: Buffer, revision: bigint, gone: () => void) {
    const fire = (): void => {
      if (this.#fired || this.#cancelled) return
      this.#fired = true
      this.cancel()
      gone()
    }
    client
      .watch()
      .key(key)
      .startRevision(String(revision + 1n))
      .create()
      .then(
        (watcher) => {
          this.#watcher = watcher
          if (this.#cancelled) {
            watcher.cancel().catch(() => {})
            return
          }
          watcher.on('delete', fire)
          watcher.on('error', fire)
        },
        () => fire(),
      )
  }

  /** Stops watching (idempotent). */
  cancel(): void {
    this.#cancelled = true
    this.#watcher?.cancel().catch(() => {})
  }
}
