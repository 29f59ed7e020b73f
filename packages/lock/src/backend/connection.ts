import type { RedisConnection } from '../client/redis-client.js'
import { ConnectionDownError } from './connection-error.js'

export type { IoredisClient as RedisClient } from '../client/ioredis-client.js'

/**
 * What a backend knows of its client's connection, from the client's own events (through its
 * adapter, client/redis-client.ts): whether it is
 * down, the last connection error (the `cause` of the errors it leads to), and a generation that
 * moves on at every (re)connection or change of topology (after which a token counter may have
 * gone back: backend/generations.ts). Listening starts with the first call (a Locker's
 * constructor does nothing with the client) and stops at close.
 *
 * The client's `error` events are listened to for the cause; ioredis then no longer prints them
 * as "Unhandled error event" (the Locker reports them: `error` events, `cause` of its errors).
 */
export class Connection {
  readonly client: RedisConnection
  #generation = 0
  #lastError: Error | undefined
  /** A `close` came and no `ready` since. */
  #closed = false
  #unlisten: (() => void) | undefined
  /** Called when the connection closes (the backend gives up its tries in flight). */
  readonly #onClose: () => void
  readonly #events = {
    close: (): void => {
      this.#generation++
      this.#closed = true
      this.#onClose()
    },
    ready: (): void => {
      this.#generation++
      this.#closed = false
      this.#lastError = undefined
      for (const listener of this.#onReady) listener()
    },
    node: (): void => {
      this.#generation++
    },
    error: (error: Error): void => {
      this.#lastError = error
      // An error while the client is still connecting, before any `ready`, with no `close` to
      // follow: ioredis's Sentinel connector retries inside one connect (a master name the
      // Sentinels do not know, every Sentinel unreachable) and stays 'connecting' meanwhile. The
      // connection is down as surely as after a close: tries in flight (waiting in the offline
      // queue) fail now, with this error as their cause, instead of at their deadline.
      if (!this.#closed && this.client.state === 'connecting') {
        this.#closed = true
        this.#onClose()
      }
    },
  }
  readonly #onReady = new Set<() => void>()

  constructor(client: RedisConnection, onClose: () => void = () => {}) {
    this.client = client
    this.#onClose = onClose
  }

  /** Starts listening to the client (idempotent). */
  watch(): void {
    if (this.#unlisten) return
    const e = this.#events
    this.#unlisten = this.client.listen({ down: e.close, ready: e.ready, topology: e.node, error: e.error })
  }

  /** Stops listening (calls made afterwards still go out: the client is the caller's). */
  unwatch(): void {
    this.#unlisten?.()
    this.#unlisten = undefined
  }

  /**
   * Moves on at every event around which a failover may have happened: the connection closed, a
   * (re)connection, a cluster's node added or removed. A try built while disconnected (ioredis
   * queues it) belongs to the new generation already.
   */
  get generation(): number {
    return this.#generation
  }

  /**
   * True while the connection is known to be down (ioredis is reconnecting, or the client was
   * closed): a call now would only wait in the offline queue. False for a client that is
   * connecting for the first time, or lazily (a call is what makes it connect).
   */
  get down(): boolean {
    if (this.#closed) return true
    return this.client.state === 'down'
  }

  /**
   * Down, and the client reported a connection error since it was last ready (a refused or
   * unresolvable reconnection): Redis is unreachable, not merely between a close and the
   * reconnection that follows it (a failover, CLIENT KILL), which a waiter rides out.
   */
  get unreachable(): boolean {
    return this.down && this.lastError !== undefined
  }

  /** The last connection error the client reported since it was last ready. */
  get lastError(): Error | undefined {
    return this.#lastError ?? this.client.lastError
  }

  /** The error a call that is not sent (or given up) because the connection is down fails with. */
  downError(): ConnectionDownError {
    return new ConnectionDownError(this.lastError)
  }

  /** Calls `listener` on every (re)connection until the returned function is called. */
  onReady(listener: () => void): () => void {
    this.#onReady.add(listener)
    return () => this.#onReady.delete(listener)
  }
}
