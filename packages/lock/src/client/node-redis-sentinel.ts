/**
 * The adapter of node-redis's Sentinel client (`createSentinel` of `redis` / `@redis/client` 6.x)
 * to the client seam (redis-client.ts). node-redis sends each command to a master client it keeps
 * per master; what the engines rely on, and how it maps:
 * - **A command may be sent again, to another master.** When a command fails because its master
 *   client is not ready (its socket closed) or the master answers `READONLY`, node-redis asks the
 *   Sentinels for the master, swaps its master client if the master changed, and sends the command
 *   again — to the new primary, whose token counter may be behind. Like ioredis's resend after a
 *   reconnection, this must move the connection's generation (backend/generations.ts) before the
 *   reply is read, so that a grant minted from the counter alone is given back. The Sentinel client
 *   does not pass its master clients' errors on (`client-error` stays inside it unless
 *   `passthroughClientErrorEvents` is set), so the adapter sends every command through
 *   `_execute` (declared in node-redis's types), which hands it the master client: a command sent
 *   a second time, and every error or (re)connection of a master client, is a topology event here,
 *   as is a `topology-change` of type `MASTER_CHANGE`.
 * - **Readiness.** The Sentinel client drops its readiness (`reconnecting`) when it swaps the master
 *   and regains it (`ready`) once the new one is connected: a down and a ready here. While only its
 *   master client reconnects (the master lost, not yet failed over), the Sentinel client stays
 *   "ready": the adapter reads the master client's readiness (`getMasterNode()`) instead.
 * - **Connection errors** (a master client's refused reconnection, the Sentinel client's own
 *   errors) are the adapter's `lastError` until the master is ready again.
 * - **`WAIT`** goes out like the script before it, on the same master client when the pool has one
 *   (`masterPoolSize`, default 1): with a larger pool node-redis may send the two on different
 *   connections, so the `replicas` option needs `masterPoolSize: 1`.
 * - **Pub/sub** runs on the Sentinel client's own pub/sub connection (node-redis keeps one apart
 *   from the master clients, and moves its subscriptions to the new master on a failover), each
 *   Locker with its own listener. A duplicate Sentinel client would cost a whole second discovery
 *   per Locker (measured: ~120 ms each, 2 s for 20 at once on 2 CPUs).
 */
import type {
  ClientEvents,
  ClientState,
  CommandTarget,
  RedisConnection,
  SubscriberConnection,
  SubscriberEvents,
} from './redis-client.js'
import { isIoredisClient } from './ioredis-client.js'
import { attachAll, ClientEventFanOut, downThenEnd } from './event-fan-out.js'
import { isLostSocket, LOCKER_COMMAND_OPTIONS, oncePerClient, strings } from './node-redis-shared.js'

type Listener = (...args: unknown[]) => void

/** One of the Sentinel client's master clients (a node-redis client), as `_execute` hands it over. */
export interface NodeRedisMasterClient {
  sendCommand(args: string[], options?: { readonly timeout?: number }): Promise<unknown>
  on(event: string, listener: Listener): unknown
}

/**
 * A node-redis Sentinel client (`createSentinel()` of the `redis` or `@redis/client` package,
 * 6.x), by shape: the Locker neither loads node-redis nor names it in its types.
 */
export interface NodeRedisSentinel {
  /** `connect()` was called and the client was not closed since. */
  readonly isOpen: boolean
  /** Connected to the master the Sentinels name (not reconfiguring). */
  readonly isReady: boolean
  sendCommand(isReadonly: boolean | undefined, args: string[]): Promise<unknown>
  /** Runs `fn` on a master client; node-redis runs it again after a failover or a lost connection. */
  _execute<T>(isReadonly: boolean | undefined, fn: (client: NodeRedisMasterClient) => Promise<T>): Promise<T>
  /** The master, when one of its master clients is ready. */
  getMasterNode(): { host: string; port: number } | undefined
  duplicate(): unknown
  subscribe(channel: string, listener: (message: string, channel: string) => unknown): Promise<unknown>
  unsubscribe(channel: string, listener?: PubSubListener): Promise<unknown>
  on(event: string, listener: Listener): unknown
  off(event: string, listener: Listener): unknown
}

/** A node-redis `createSentinel()` client. */
export function isNodeRedisSentinel(value: unknown): value is NodeRedisSentinel {
  const v = value as Partial<NodeRedisSentinel> | null | undefined
  return (
    v != null &&
    !isIoredisClient(value) &&
    typeof v.sendCommand === 'function' &&
    typeof v._execute === 'function' &&
    typeof v.getMasterNode === 'function' &&
    typeof v.duplicate === 'function' &&
    typeof v.isOpen === 'boolean'
  )
}

/** A pub/sub listener as node-redis calls it (strings, or Buffers in its buffer mode). */
type PubSubListener = (message: string | Buffer, channel: string | Buffer) => unknown

/** What node-redis's Sentinel client reports with `topology-change`. */
interface SentinelEvent {
  readonly type?: unknown
}

/** The adapter of `client`: one per client, however many Lockers share it. */
export const nodeRedisSentinelConnection: (client: NodeRedisSentinel) => NodeRedisSentinelConnection = oncePerClient(
  (client: NodeRedisSentinel) => new NodeRedisSentinelConnection(client),
)

/** Adapts a node-redis Sentinel client to the client seam (one per client: {@link nodeRedisSentinelConnection}). */
export class NodeRedisSentinelConnection implements RedisConnection {
  readonly kind = 'node-redis'
  readonly cluster = false
  readonly client: NodeRedisSentinel
  /** The client was ready once: not ready since is a reconfiguration, not a first connection. */
  #wasReady: boolean
  #lastError: Error | undefined
  /**
   * The engines' listeners (listen()), on one set of the client's however many Lockers share it
   * (event-fan-out.ts), and told of every topology event the adapter sees itself.
   */
  readonly #events: ClientEventFanOut
  /** Master clients the adapter listens to. */
  readonly #followed = new WeakSet<NodeRedisMasterClient>()

  constructor(client: NodeRedisSentinel) {
    this.client = client
    this.#events = new ClientEventFanOut((all) =>
      attachAll(client, [
        [
          'topology-change',
          (event: unknown) => {
            if ((event as SentinelEvent | undefined)?.type === 'MASTER_CHANGE') all.topology()
          },
        ],
        ['reconnecting', all.down],
        ['ready', all.ready],
        ['end', downThenEnd(all)],
      ]),
    )
    this.#wasReady = client.isReady
    // Followed from the start, as for a node-redis client: a Locker made during an outage must
    // know why. Listening to `error` also keeps node-redis from throwing it unheard.
    client.on('error', (e: unknown) => {
      if (e instanceof Error && !isLostSocket(e)) this.#lastError = e
    })
    client.on('ready', () => {
      this.#wasReady = true
      this.#lastError = undefined
    })
  }

  get state(): ClientState {
    const client = this.client
    if (!client.isOpen) return 'down'
    if (!client.isReady) return this.#wasReady ? 'down' : 'connecting'
    // Ready, but its master client may be reconnecting (the master lost, no failover yet).
    if (client.getMasterNode() === undefined) return 'down'
    this.#lastError = undefined
    return 'ready'
  }

  /** The last connection error since the master was last ready. */
  get lastError(): Error | undefined {
    return this.#lastError
  }

  evalsha(sha: string, numKeys: number, ...args: (string | number)[]): Promise<unknown> {
    return this.#send(['EVALSHA', sha, String(numKeys), ...strings(args)])
  }

  eval(script: string, numKeys: number, ...args: (string | number)[]): Promise<unknown> {
    return this.#send(['EVAL', script, String(numKeys), ...strings(args)])
  }

  call(...args: (string | number)[]): Promise<unknown> {
    return this.#send(strings(args))
  }

  /** Sends `args` on a master client; a second send of the same command is a topology event first. */
  #send(args: string[]): Promise<unknown> {
    let sends = 0
    return this.client._execute(false, (master) => {
      this.#follow(master)
      if (++sends > 1) this.#topology()
      return master.sendCommand(args, LOCKER_COMMAND_OPTIONS)
    })
  }

  /** Listens to a master client the first time a command goes through it. */
  #follow(master: NodeRedisMasterClient): void {
    if (this.#followed.has(master)) return
    this.#followed.add(master)
    // node-redis emits the error of a lost connection before it fails the commands in flight.
    master.on('error', (e: unknown) => {
      if (e instanceof Error && !isLostSocket(e)) this.#lastError = e
      this.#topology()
    })
    master.on('ready', () => this.#topology())
  }

  #topology(): void {
    this.#events.all.topology()
  }

  connectionFor(): CommandTarget {
    return this
  }

  listen(events: ClientEvents): () => void {
    return this.#events.listen(events)
  }

  subscriber(events: SubscriberEvents): SubscriberConnection {
    const client = this.client
    const channels = new Set<string>()
    const listener: PubSubListener = (message, channel) => events.message(String(channel), String(message))
    // Every (re)connection after a failover: messages sent meanwhile are gone.
    const ready = (): void => events.ready()
    client.on('ready', ready)
    // node-redis knows where to subscribe once it has found the master.
    const found = (): Promise<void> =>
      client.isReady
        ? Promise.resolve()
        : new Promise((resolve) => {
            const on = (): void => {
              client.off('ready', on)
              resolve()
            }
            client.on('ready', on)
          })
    return {
      subscribe: (channel) =>
        found().then(() => {
          channels.add(channel)
          return client.subscribe(channel, listener)
        }),
      unsubscribe: (channel) => {
        channels.delete(channel)
        return client.isOpen ? client.unsubscribe(channel, listener) : Promise.resolve()
      },
      close: () => {
        client.off('ready', ready)
        if (client.isOpen) for (const channel of channels) client.unsubscribe(channel, listener).catch(() => {})
        channels.clear()
      },
    }
  }
}
