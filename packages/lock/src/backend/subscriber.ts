import type { RedisConnection, SubscriberConnection } from '../client/redis-client.js'
import { parseReleaseMessage } from '../fair-queue/formats.js'
import { resourceOfChannel } from '../keys.js'
import type { BackendListener } from './backend.js'
import type { PubSubMode } from './pubsub-mode.js'

/**
 * The pub/sub connection of a backend: a duplicate of its client, opened when an acquire first
 * has to wait, shared by every resource its waiters wait for; classic or sharded as the backend's
 * pub/sub mode says when it opens (pubsub-mode.ts). Release messages of other lockers
 * go to the listener; our own are skipped (our own release wakes our waiters one round trip
 * sooner). After a reconnection every queue is told to try: messages sent meanwhile are gone.
 */
export class Subscriber {
  readonly #client: RedisConnection
  readonly #prefix: string
  readonly #lockerId: string
  readonly #listener: BackendListener
  readonly #mode: PubSubMode
  #connection: SubscriberConnection | undefined
  #unlisten: (() => void) | undefined

  constructor(client: RedisConnection, prefix: string, lockerId: string, listener: BackendListener, mode: PubSubMode) {
    this.#client = client
    this.#mode = mode
    this.#prefix = prefix
    this.#lockerId = lockerId
    this.#listener = listener
  }

  subscribe(channel: string): Promise<unknown> {
    if (this.#connection) return this.#connection.subscribe(channel)
    const kind = this.#mode.resolve()
    if (typeof kind === 'string') return this.#open(kind === 'sharded').subscribe(channel)
    return kind.then((k) => this.#open(k === 'sharded').subscribe(channel))
  }

  unsubscribe(channel: string): void {
    this.#connection?.unsubscribe(channel).catch(() => {})
  }

  close(): void {
    if (!this.#connection) return
    this.#unlisten?.()
    this.#unlisten = undefined
    this.#connection.close()
    this.#connection = undefined
  }

  #open(sharded: boolean): SubscriberConnection {
    if (this.#connection) return this.#connection
    const sub = this.#client.subscriber(
      {
        message: (channel, text) => {
          const message = parseReleaseMessage(text)
          if (message === undefined || message.sender === this.#lockerId) return
          const name = resourceOfChannel(this.#prefix, channel)
          if (name !== undefined) this.#listener.released(name, message.handedTo, message.handoffMs, message.next)
        },
        ready: () => this.#listener.reconnected(),
      },
      sharded,
    )
    // A process that quits its client without closing the Locker must still be able to exit:
    // the subscriber, a connection of ours, follows the client out.
    this.#unlisten = this.#client.listen({ end: () => this.close() })
    this.#connection = sub
    return sub
  }
}
