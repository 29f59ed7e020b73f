import { parseReleaseMessage } from '../fair-queue/formats.js'
import { resourceOfChannel } from '../keys.js'
import type { BackendListener } from './backend.js'
import type { RedisClient } from './connection.js'

/**
 * The pub/sub connection of a backend: a duplicate of its client, opened when an acquire first
 * has to wait, shared by every resource its waiters wait for. Release messages of other lockers
 * go to the listener; our own are skipped (our own release wakes our waiters one round trip
 * sooner). After a reconnection every queue is told to try: messages sent meanwhile are gone.
 */
export class Subscriber {
  readonly #client: RedisClient
  readonly #prefix: string
  readonly #lockerId: string
  readonly #listener: BackendListener
  #connection: RedisClient | undefined
  readonly #onClientEnd = (): void => this.close()

  constructor(client: RedisClient, prefix: string, lockerId: string, listener: BackendListener) {
    this.#client = client
    this.#prefix = prefix
    this.#lockerId = lockerId
    this.#listener = listener
  }

  subscribe(channel: string): Promise<unknown> {
    return this.#open().subscribe(channel)
  }

  unsubscribe(channel: string): void {
    this.#connection?.unsubscribe(channel).catch(() => {})
  }

  close(): void {
    if (!this.#connection) return
    this.#client.off('end', this.#onClientEnd)
    this.#connection.disconnect()
    this.#connection = undefined
  }

  #open(): RedisClient {
    if (this.#connection) return this.#connection
    // Both clients have duplicate(); their signatures differ only in optional overrides.
    const sub = (this.#client as { duplicate(): RedisClient }).duplicate()
    sub.on('error', () => {
      // Reconnection is ioredis's job; waiters fall back on their backstops meanwhile.
    })
    sub.on('message', (channel: string, text: string) => {
      const message = parseReleaseMessage(text)
      if (message === undefined || message.sender === this.#lockerId) return
      const name = resourceOfChannel(this.#prefix, channel)
      if (name !== undefined) this.#listener.released(name, message.handedTo, message.handoffMs, message.next)
    })
    sub.on('ready', () => this.#listener.reconnected())
    // A process that quits its client without closing the Locker must still be able to exit:
    // the subscriber, a connection of ours, follows the client out.
    this.#client.once('end', this.#onClientEnd)
    this.#connection = sub
    return sub
  }
}
