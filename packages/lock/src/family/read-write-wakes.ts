/**
 * How blocked reads and writes of a Locker's read-write locks hear that a lock may be free: one
 * pub/sub connection (a duplicate of the Locker's client, opened when a read or write first has to
 * wait), subscribed to the release channel of each name someone here waits for. The scripts
 * publish when a writer releases, when a waiting writer leaves (readers may enter), and when the
 * last live reader leaves (scripts/read-write.ts). A message wakes every waiter of the name here
 * (readers all may enter; writers race, Redis grants the oldest). Messages can be lost (a
 * reconnection, a lease that simply ran out publishes nothing): waiters keep their backoff tries,
 * bounded by `pollMs` and by the lease Redis reported, as the backstop. On a Cluster with sharded
 * pub/sub the subscriptions are `SSUBSCRIBE`s on the shard of each name (backend/pubsub-mode.ts).
 */
import type { PubSubMode } from '../backend/pubsub-mode.js'
import type { RedisConnection, SubscriberConnection } from '../client/redis-client.js'

export class ReadWriteWakes {
  readonly #client: RedisConnection
  readonly #subscribeMs: number
  /** The pub/sub the release scripts announce on (the read-write host's). */
  readonly pubsub: PubSubMode
  #connection: SubscriberConnection | undefined
  #stopListening: (() => void) | undefined
  readonly #waiters = new Map<string, Set<() => void>>()

  /** @param subscribeMs how long a first waiter waits for its SUBSCRIBE before it goes on without. */
  constructor(client: RedisConnection, subscribeMs: number, pubsub: PubSubMode) {
    this.#client = client
    this.pubsub = pubsub
    this.#subscribeMs = subscribeMs
  }

  /**
   * Calls `wake` on every release message of `channel` until the returned function is called.
   * Resolves once subscribed, or after `subscribeMs` without (the waiter then relies on its tries).
   */
  async watch(channel: string, wake: () => void): Promise<() => void> {
    let set = this.#waiters.get(channel)
    const first = set === undefined
    if (!set) {
      set = new Set()
      this.#waiters.set(channel, set)
    }
    set.add(wake)
    const unwatch = (): void => {
      const now = this.#waiters.get(channel)
      if (!now?.delete(wake) || now.size > 0) return
      this.#waiters.delete(channel)
      this.#connection?.unsubscribe(channel).catch(() => {})
    }
    if (first) {
      const subscribed = Promise.resolve(this.pubsub.resolve())
        .then((kind) => this.#open(kind === 'sharded').subscribe(channel))
        .catch(() => {})
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, this.#subscribeMs)
        timer.unref()
        void subscribed.then(() => {
          clearTimeout(timer)
          resolve()
        })
      })
    }
    return unwatch
  }

  /** Closes the connection; waiters still waiting go on with their tries. */
  close(): void {
    if (!this.#connection) return
    this.#stopListening?.()
    this.#stopListening = undefined
    this.#connection.close()
    this.#connection = undefined
  }

  #open(sharded: boolean): SubscriberConnection {
    if (this.#connection) return this.#connection
    // A duplicate of the Locker's client (the client seam's subscriber); its reconnection and
    // resubscription are the client's job, and waiters try on meanwhile.
    const sub = this.#client.subscriber(
      {
        message: (channel) => {
          for (const wake of this.#waiters.get(channel) ?? []) wake()
        },
        ready: () => {},
      },
      sharded,
    )
    // A process that quits its client without closing the Locker must still be able to exit.
    this.#stopListening = this.#client.listen({ end: () => this.close() })
    this.#connection = sub
    return sub
  }
}
