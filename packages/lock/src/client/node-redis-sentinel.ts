/**
 * The adapter of node-redis's Sentinel client (`createSentinel` of `redis` / `@redis/client` 6.x)
 * to the client seam (redis-client.ts). node-redis sends each command to a master client it keeps
 * per master; what the engines rely on, and how it maps:
 * - **A command may be sent again to another master.** When a command fails because the master
 *   client is not ready (its socket closed) or the master answers `READONLY`, node-redis asks the
 *   Sentinels for the master, swaps its master client if the master changed, and sends the command
 *   again — to the new primary, whose token counter may be behind. Like ioredis's resend after a
 *   reconnection, this must move the connection's generation (backend/generations.ts) before the
 *   reply is read, so that a grant minted from the counter alone is given back: a master client's
 *   error (`client-error`, type `MASTER`: emitted before the commands in flight are failed) and a
 *   `topology-change` of type `MASTER_CHANGE` are both a topology event here.
 * - **Readiness.** The Sentinel client drops its readiness (`reconnecting`) when it swaps the master
 *   and regains it (`ready`) once the new one is connected: a down and a ready here. While only its
 *   master client reconnects (the master lost, not yet failed over), the Sentinel client stays
 *   "ready": the adapter reads the master client's readiness (`getMasterNode()`) instead, so the
 *   connection reads as down without an event (no `ready` would follow a master that comes back).
 * - **Connection errors** (a master client's refused reconnection, the Sentinel client's own
 *   errors) are the adapter's `lastError` until the master is ready again.
 * - **`WAIT`** goes out through the Sentinel client like the script before it, on the same master
 *   client when the pool has one (`masterPoolSize`, default 1): with a larger pool node-redis may
 *   send the two on different connections, and the `replicas` option needs `masterPoolSize: 1`.
 * - **Pub/sub** runs on a duplicate of the Sentinel client (its own Sentinel and master
 *   connections), which follows the master on a failover.
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

type Listener = (...args: unknown[]) => void

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
  /** The master, when one of its master clients is ready. */
  getMasterNode(): { host: string; port: number } | undefined
  duplicate(): NodeRedisSentinel
  connect(): Promise<unknown>
  subscribe(channel: string, listener: (message: string, channel: string) => unknown): Promise<unknown>
  unsubscribe(channel: string): Promise<unknown>
  destroy(): Promise<unknown>
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
    typeof v.getMasterNode === 'function' &&
    typeof v.duplicate === 'function' &&
    typeof v.isOpen === 'boolean'
  )
}

/** What node-redis's Sentinel client reports with `client-error` and `topology-change`. */
interface SentinelEvent {
  readonly type?: unknown
  readonly error?: unknown
}

function strings(args: readonly (string | number)[]): string[] {
  const out = new Array<string>(args.length)
  for (let i = 0; i < args.length; i++) out[i] = String(args[i])
  return out
}

/** A lost socket (node-redis then reconnects), not a failed connection. */
function isLostSocket(error: Error): boolean {
  return error.name === 'SocketClosedUnexpectedlyError' || error.constructor.name === 'SocketClosedUnexpectedlyError'
}

const adapters = new WeakMap<NodeRedisSentinel, NodeRedisSentinelConnection>()

/** The adapter of `client`: one per client, however many Lockers share it. */
export function nodeRedisSentinelConnection(client: NodeRedisSentinel): NodeRedisSentinelConnection {
  let adapter = adapters.get(client)
  if (adapter === undefined) {
    adapter = new NodeRedisSentinelConnection(client)
    adapters.set(client, adapter)
  }
  return adapter
}

/** Adapts a node-redis Sentinel client to the client seam (one per client: {@link nodeRedisSentinelConnection}). */
export class NodeRedisSentinelConnection implements RedisConnection {
  readonly kind = 'node-redis'
  readonly cluster = false
  readonly client: NodeRedisSentinel
  /** The client was ready once: not ready since is a reconfiguration, not a first connection. */
  #wasReady: boolean
  #lastError: Error | undefined

  constructor(client: NodeRedisSentinel) {
    this.client = client
    this.#wasReady = client.isReady
    // Followed from the start, as for a node-redis client: a Locker made during an outage must
    // know why. Listening to `error` also keeps node-redis from throwing it unheard.
    client.on('error', (e: unknown) => {
      if (e instanceof Error && !isLostSocket(e)) this.#lastError = e
    })
    client.on('client-error', (event: unknown) => {
      const e = (event as SentinelEvent | undefined)?.error
      if ((event as SentinelEvent | undefined)?.type === 'MASTER' && e instanceof Error && !isLostSocket(e))
        this.#lastError = e
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
    return this.client.sendCommand(false, ['EVALSHA', sha, String(numKeys), ...strings(args)])
  }

  eval(script: string, numKeys: number, ...args: (string | number)[]): Promise<unknown> {
    return this.client.sendCommand(false, ['EVAL', script, String(numKeys), ...strings(args)])
  }

  call(...args: (string | number)[]): Promise<unknown> {
    return this.client.sendCommand(false, strings(args))
  }

  connectionFor(): CommandTarget {
    return this
  }

  listen(events: ClientEvents): () => void {
    const on: [string, Listener][] = []
    if (events.topology) {
      const topology = events.topology.bind(events)
      on.push([
        'client-error',
        (event: unknown) => {
          if ((event as SentinelEvent | undefined)?.type === 'MASTER') topology()
        },
      ])
      on.push([
        'topology-change',
        (event: unknown) => {
          if ((event as SentinelEvent | undefined)?.type === 'MASTER_CHANGE') topology()
        },
      ])
    }
    if (events.down) on.push(['reconnecting', events.down.bind(events)])
    if (events.ready) on.push(['ready', events.ready.bind(events)])
    on.push([
      'end',
      () => {
        events.down?.()
        events.end?.()
      },
    ])
    const client = this.client
    for (const [event, listener] of on) client.on(event, listener)
    return () => {
      for (const [event, listener] of on) client.off(event, listener)
    }
  }

  subscriber(events: SubscriberEvents): SubscriberConnection {
    const sub = this.client.duplicate()
    sub.on('error', () => {
      // Reconnection is node-redis's job; waiters fall back on their backstops meanwhile.
    })
    // Its first connection, and every one after a failover (messages sent meanwhile are gone).
    sub.on('ready', () => events.ready())
    // A failed first connection is reported by the subscribes that wait for it (their deadline).
    const connected = sub.connect().catch(() => {})
    const listener = (message: string, channel: string): void => events.message(channel, message)
    return {
      subscribe: (channel) => connected.then(() => sub.subscribe(channel, listener)),
      unsubscribe: (channel) => (sub.isOpen ? sub.unsubscribe(channel) : Promise.resolve()),
      close: () => {
        sub.destroy().catch(() => {})
      },
    }
  }
}
