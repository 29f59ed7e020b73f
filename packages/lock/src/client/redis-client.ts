/**
 * The client seam: what the Redis engines (backend/redis-backend.ts, quorum/) need of a client,
 * whichever library it comes from — a script by SHA (`EVALSHA`, `EVAL` on `NOSCRIPT`:
 * scripts/define-script.ts), a command outside a script (`WAIT`, `ROLE`, `INFO`, `CONFIG GET`),
 * a duplicate connection for pub/sub, and the connection's state and events. Each client library
 * is one adapter of this interface: ioredis and iovalkey (ioredis-client.ts), node-redis
 * (node-redis-client.ts; its Sentinel and Cluster clients: node-redis-sentinel.ts,
 * node-redis-cluster.ts), Valkey GLIDE (glide-client.ts). The engines never see the user's client itself.
 */
import type { ScriptClient } from '../scripts/define-script.js'

/** The client libraries the Locker knows: `ioredis` covers its fork iovalkey (the same API). */
export type ClientKind = 'ioredis' | 'node-redis' | 'glide'

/**
 * A connection's state as the engines read it: `ready`; `lazy` (not connected, a call makes it
 * connect: ioredis `lazyConnect`); `connecting` (for the first time, or again after a loss);
 * `handshaking` (connected, not yet ready: ioredis `connect`); `down` (closed or reconnecting: a
 * call would only wait in the client's offline queue).
 */
export type ClientState = 'ready' | 'lazy' | 'connecting' | 'handshaking' | 'down'

/** The events an engine listens to; each is optional. */
export interface ClientEvents {
  /** The connection closed (the client may reconnect). */
  down?(): void
  /** The connection is (again) ready for commands. */
  ready?(): void
  /** A cluster's topology changed (a node added or removed). */
  topology?(): void
  /** A connection error (a refused or failed (re)connection): the cause of the errors it leads to. */
  error?(error: Error): void
  /** The client was closed for good (quit, disconnect). */
  end?(): void
}

/** A pub/sub connection of our own, a duplicate of the user's client. */
export interface SubscriberConnection {
  subscribe(channel: string): Promise<unknown>
  unsubscribe(channel: string): Promise<unknown>
  /** Closes the connection at once (no QUIT round trip). */
  close(): void
}

/** What a pub/sub connection reports: messages, and every (re)connection (messages sent meanwhile are gone). */
export interface SubscriberEvents {
  message(channel: string, text: string): void
  ready(): void
}

/** Sends one command outside a script. */
export interface CommandTarget {
  call(...args: (string | number)[]): Promise<unknown>
}

/** One client, adapted: see the top of this file. */
export interface RedisConnection extends ScriptClient, CommandTarget {
  readonly kind: ClientKind
  /** Whether the client is a Redis Cluster's (its keys spread over shards). */
  readonly cluster: boolean
  /**
   * A Cluster client that may send a call to a new primary after a failover without any event the
   * adapter sees (GLIDE follows `MOVED` and refreshes its slots on its own): every grant then
   * mints from the clock too (backend/generations.ts), as the first grant after a reconnection
   * does elsewhere. Undefined (false) for clients that report their changes of topology.
   */
  readonly reroutesSilently?: boolean
  /** The user's client (never closed by the Locker). */
  readonly client: object
  readonly state: ClientState
  /**
   * The last connection error the adapter saw since the client was last ready, when it follows
   * the client's events on its own (node-redis); undefined otherwise.
   */
  readonly lastError?: Error | undefined
  /**
   * The connection that ran `key`'s script (a Cluster: the primary of its slot), for `WAIT` on the
   * writes it made; undefined when no node is known to serve the key.
   */
  connectionFor(key: string): CommandTarget | undefined
  /** Listens to the client's events until the returned function is called. */
  listen(events: ClientEvents): () => void
  /**
   * Opens a pub/sub connection (a duplicate of the client). `sharded` (a Cluster only): its
   * subscriptions are `SSUBSCRIBE`s, each on the shard that owns the channel's slot, and follow
   * the slot when it moves (a resharding, a failover).
   */
  subscriber(events: SubscriberEvents, sharded?: boolean): SubscriberConnection
}
