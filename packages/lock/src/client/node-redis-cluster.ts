/**
 * The adapter of node-redis's Cluster client (`createCluster` of `redis` / `@redis/client` 6.x) to
 * the client seam (redis-client.ts). node-redis keeps a node client (a plain node-redis client) per
 * node, a slot table, and routes each command by its first key; what the engines rely on, and how
 * it maps:
 * - **Routing.** Each script goes out through `_execute` (declared in node-redis's types, as the
 *   Sentinel adapter uses its own): routed to the primary of its first key's slot — every key of a
 *   resource shares its hash tag — and handed the node client it runs on, attempt by attempt.
 * - **A command may be sent again, to another node.** node-redis sends a command again only after a
 *   `MOVED` or `ASK` reply — the node did not run it — to the node the redirection names, after
 *   re-reading the slot table on `MOVED`. A script is therefore never run twice by node-redis; but
 *   the node it lands on may be a promoted replica whose token counter is behind, so a second
 *   attempt is a topology event first (the connection's generation moves before the reply is read:
 *   backend/generations.ts, and a grant minted from the counter alone is given back).
 * - **A lost connection** fails the commands in flight on it (`SocketClosedUnexpectedlyError`, not
 *   sent again: their outcome is unknown, the backend gives back what they may have granted);
 *   commands not yet written wait for the node's reconnection. Every error, reconnection and
 *   disconnection of a node client (`node-error`, `node-reconnecting`, `node-disconnect`) is a
 *   topology event, as is a new slot table (node-redis replaces it at every re-read) seen when a
 *   command goes out; `node-ready` is not (node-redis says it of a new pub/sub connection too, and
 *   a node client that reconnects said `node-reconnecting` first).
 * - **Readiness** is the Cluster client's own (`isReady` once the first discovery is done, until
 *   it is closed): one shard's primary lost does not make the Locker's other resources
 *   unavailable; calls for the lost shard wait in its node client's queue, each within its
 *   deadline, until node-redis finds the promoted replica.
 * - **Connection errors** (a node client's refused reconnection, a failed discovery) are the
 *   adapter's `lastError` until a node is ready again.
 * - **`WAIT`** goes out on the node client of the slot's primary, the one connection the script ran
 *   on (node-redis keeps one per node).
 * - **Pub/sub** runs on the Cluster client's own pub/sub connections, each Locker with its own
 *   listener: classic `SUBSCRIBE` on the one node node-redis picks, `SSUBSCRIBE` (sharded) on the
 *   primary of the channel's slot. node-redis moves a sharded subscription when the node drops it
 *   (an unsolicited `SUNSUBSCRIBE`: a resharding, `SETSLOT` sent to the owner itself) and when the
 *   node leaves the slot table (a failover); test/cluster-pubsub.test.ts shows both. A duplicate
 *   Cluster client would cost a whole discovery and a connection to every node per Locker.
 */
import { keySlot } from '../backend/replication.js'
import type {
  ClientEvents,
  ClientState,
  CommandTarget,
  RedisConnection,
  SubscriberConnection,
  SubscriberEvents,
} from './redis-client.js'
import { isIoredisClient } from './ioredis-client.js'
import { isLostSocket, LOCKER_COMMAND_OPTIONS, oncePerClient, strings } from './node-redis-shared.js'

type Listener = (...args: unknown[]) => void

/** A node client of the Cluster client (a node-redis client), as `_execute` hands it over. */
export interface NodeRedisClusterNodeClient {
  sendCommand(args: string[], options?: object): Promise<unknown>
}

/**
 * What `_execute` routes by: the command's first key (none: any node). node-redis passes its
 * command parser, of which `_execute` reads only this.
 */
interface Route {
  readonly firstKey: string | Buffer | undefined
}

/** A pub/sub listener as node-redis calls it (strings, or Buffers in its buffer mode). */
type PubSubListener = (message: string | Buffer, channel: string | Buffer) => unknown

/**
 * A node-redis Cluster client (`createCluster()` of the `redis` or `@redis/client` package, 6.x),
 * by shape: the Locker neither loads node-redis nor names it in its types.
 */
export interface NodeRedisCluster {
  /** `connect()` was called and the client was not closed since. */
  readonly isOpen: boolean
  /** The first discovery is done (until the client is closed). */
  readonly isReady: boolean
  /** The primaries, as node-redis found them. */
  readonly masters: readonly object[]
  /** The slot table: each slot's shard, whose primary has the node client once connected. */
  readonly slots: readonly ({ readonly master: { readonly client?: unknown } } | undefined)[]
  sendCommand(firstKey: string | undefined, isReadonly: boolean | undefined, args: string[]): Promise<unknown>
  /** Runs `fn` on the node client of `parser.firstKey`'s slot; again on another node after `MOVED` / `ASK`. */
  _execute<T>(
    parser: Route,
    isReadonly: boolean | undefined,
    options: undefined,
    fn: (client: NodeRedisClusterNodeClient, options?: object) => Promise<T>,
  ): Promise<T>
  subscribe(channel: string, listener: PubSubListener): Promise<unknown>
  unsubscribe(channel: string, listener?: PubSubListener): Promise<unknown>
  sSubscribe(channel: string, listener: PubSubListener): Promise<unknown>
  sUnsubscribe(channel: string, listener?: PubSubListener): Promise<unknown>
  on(event: string, listener: Listener): unknown
  off(event: string, listener: Listener): unknown
}

/** A node-redis `createCluster()` client. */
export function isNodeRedisCluster(value: unknown): value is NodeRedisCluster {
  const v = value as Partial<NodeRedisCluster> | null | undefined
  return (
    v != null &&
    !isIoredisClient(value) &&
    typeof v.sendCommand === 'function' &&
    typeof v._execute === 'function' &&
    typeof v.sSubscribe === 'function' &&
    typeof v.isOpen === 'boolean' &&
    typeof v.masters === 'object' &&
    v.masters !== null
  )
}

/** The adapter of `client`: one per client, however many Lockers share it. */
export const nodeRedisClusterConnection: (client: NodeRedisCluster) => NodeRedisClusterConnection = oncePerClient(
  (client: NodeRedisCluster) => new NodeRedisClusterConnection(client),
)

/** Adapts a node-redis Cluster client to the client seam (one per client: {@link nodeRedisClusterConnection}). */
export class NodeRedisClusterConnection implements RedisConnection {
  readonly kind = 'node-redis'
  readonly cluster = true
  readonly client: NodeRedisCluster
  /** The client was ready once: not ready since is a closed client, not a first connection. */
  #wasReady: boolean
  #lastError: Error | undefined
  /** The slot table last seen: node-redis replaces the array at every re-read. */
  #slots: NodeRedisCluster['slots']
  /** The engines' listeners (listen()), told of every topology event the adapter sees itself. */
  readonly #listeners = new Set<ClientEvents>()
  /** Resolves at the end of the first discovery (commands sent before it wait for it). */
  #discovered: Promise<void> | undefined
  /** The pub/sub connections' listeners (subscriber()), told of every node (re)connection. */
  readonly #subscribers = new Set<SubscriberEvents>()

  constructor(client: NodeRedisCluster) {
    this.client = client
    this.#wasReady = client.isReady
    this.#slots = client.slots
    // Followed from the start, once for every Locker on the client (their listeners are the
    // adapter's: a Cluster client shared by many Lockers gets no listener per Locker). A Locker made
    // during an outage must know why; listening to `error` also keeps node-redis from throwing it
    // unheard.
    client.on('error', (e: unknown) => {
      // A root node or known node that fails a discovery: node-redis goes on to the next one, so
      // this is a cause (lastError), never an outage by itself (a Cluster client connecting past a
      // dead root node would otherwise fail its first calls as "Redis is down").
      if (e instanceof Error) this.#lastError = e
    })
    client.on('node-error', (e: unknown) => {
      if (e instanceof Error && !isLostSocket(e)) this.#lastError = e
      this.#topology()
    })
    client.on('node-reconnecting', () => this.#topology())
    client.on('node-disconnect', () => this.#topology())
    client.on('node-ready', () => {
      // Not a topology event: node-redis says it for a new connection too — its pub/sub client,
      // opened by a first subscribe (a clean-clone CI run: that gave back the grant of an acquire
      // in flight) — and a node client that reconnects said `node-reconnecting` before it.
      this.#lastError = undefined
      for (const events of this.#subscribers) events.ready()
    })
    client.on('connect', () => {
      this.#wasReady = true
      this.#lastError = undefined
      for (const events of this.#listeners) events.ready?.()
    })
    client.on('disconnect', () => {
      for (const events of this.#listeners) {
        events.down?.()
        events.end?.()
      }
    })
  }

  get state(): ClientState {
    const client = this.client
    if (!client.isOpen) return 'down'
    if (!client.isReady) return this.#wasReady ? 'down' : 'connecting'
    return 'ready'
  }

  /** The last connection error since a node was last ready. */
  get lastError(): Error | undefined {
    return this.#lastError
  }

  evalsha(sha: string, numKeys: number, ...args: (string | number)[]): Promise<unknown> {
    return this.#send(numKeys > 0 ? String(args[0]) : undefined, ['EVALSHA', sha, String(numKeys), ...strings(args)])
  }

  eval(script: string, numKeys: number, ...args: (string | number)[]): Promise<unknown> {
    return this.#send(numKeys > 0 ? String(args[0]) : undefined, ['EVAL', script, String(numKeys), ...strings(args)])
  }

  /** A command without keys (`INFO`, `ROLE`, `COMMAND INFO`): one node's answer, any node's. */
  call(...args: (string | number)[]): Promise<unknown> {
    return this.#send(undefined, strings(args))
  }

  /**
   * Sends `args` to the primary of `firstKey`'s slot; a new slot table, or a second attempt (after
   * `MOVED` / `ASK`), is a topology event before the command goes out.
   */
  #send(firstKey: string | undefined, args: string[]): Promise<unknown> {
    const client = this.client
    // Still discovering (connect() not yet done): node-redis would refuse the command
    // (ClientOfflineError) where a node-redis client queues it; it waits for the discovery here,
    // within the caller's deadline.
    if (client.isOpen && !client.isReady && !this.#wasReady) return this.#found().then(() => this.#send(firstKey, args))
    this.#checkSlots()
    let sends = 0
    return client._execute({ firstKey }, false, undefined, (node, options) => {
      if (++sends > 1) {
        this.#checkSlots()
        this.#topology()
      }
      return node.sendCommand(
        args,
        options === undefined ? LOCKER_COMMAND_OPTIONS : { ...options, ...LOCKER_COMMAND_OPTIONS },
      )
    })
  }

  /** Resolves once the first discovery is done, or the client closed (the command then fails as node-redis says). */
  #found(): Promise<void> {
    this.#discovered ??= new Promise<void>((resolve) => {
      const client = this.client
      const done = (): void => {
        client.off('connect', done)
        client.off('disconnect', done)
        resolve()
      }
      client.on('connect', done)
      client.on('disconnect', done)
    })
    return this.#discovered
  }

  /** A topology event when node-redis has re-read its slot table since last seen. */
  #checkSlots(): void {
    const slots = this.client.slots
    if (slots === this.#slots) return
    this.#slots = slots
    this.#topology()
  }

  #topology(): void {
    for (const events of this.#listeners) events.topology?.()
  }

  connectionFor(key: string): CommandTarget | undefined {
    const node = this.client.slots[keySlot(key)]?.master.client as NodeRedisClusterNodeClient | undefined
    if (node === undefined) return undefined
    return { call: (...args) => node.sendCommand(strings(args), LOCKER_COMMAND_OPTIONS) }
  }

  listen(events: ClientEvents): () => void {
    this.#listeners.add(events)
    return () => this.#listeners.delete(events)
  }

  subscriber(events: SubscriberEvents, sharded = false): SubscriberConnection {
    const client = this.client
    const channels = new Set<string>()
    const listener: PubSubListener = (message, channel) => events.message(String(channel), String(message))
    // A pub/sub connection (re)connected, or a subscription moved with it: messages sent
    // meanwhile are gone. Any node's, as node-redis does not say which client is which.
    this.#subscribers.add(events)
    // node-redis knows where to subscribe once its first discovery is done.
    const found = (): Promise<void> => (client.isReady || !client.isOpen ? Promise.resolve() : this.#found())
    return {
      subscribe: (channel) =>
        found().then(() => {
          channels.add(channel)
          return sharded ? client.sSubscribe(channel, listener) : client.subscribe(channel, listener)
        }),
      unsubscribe: (channel) => {
        channels.delete(channel)
        if (!client.isOpen) return Promise.resolve()
        return sharded ? client.sUnsubscribe(channel, listener) : client.unsubscribe(channel, listener)
      },
      close: () => {
        this.#subscribers.delete(events)
        if (client.isOpen)
          for (const channel of channels)
            (sharded ? client.sUnsubscribe(channel, listener) : client.unsubscribe(channel, listener)).catch(() => {})
        channels.clear()
      },
    }
  }
}
