/**
 * The adapter of ioredis (and of its fork iovalkey, the same API) to the client seam
 * (redis-client.ts): a `Redis` (also through Sentinel) or a `Cluster`. Every call is the client's
 * own, unchanged: ioredis queues commands while it reconnects and sends those in flight again
 * after a reconnection (`autoResendUnfulfilledCommands`), which the engines allow for.
 */
import { keySlot } from '../backend/replication.js'
import { attachAll, fanOutPerClient } from './event-fan-out.js'
import { ShardedSubscriber, type ShardedCluster } from './sharded-subscriber.js'
import { coalesceNextWrite, writeNow } from './write-coalescing.js'
import type {
  ClientEvents,
  ClientState,
  CommandTarget,
  RedisConnection,
  SubscriberConnection,
  SubscriberEvents,
} from './redis-client.js'

type Listener = (...args: unknown[]) => void

/**
 * An ioredis or iovalkey client, by shape (`Redis` or `Cluster` of either package): the Locker
 * neither loads them nor names them in its types.
 */
export interface IoredisClient {
  /** ioredis's connection status: `wait`, `connecting`, `connect`, `ready`, `reconnecting`, `close`, `end`. */
  readonly status: string
  evalsha(sha: string, numKeys: number, ...args: (string | number)[]): Promise<unknown>
  eval(script: string, numKeys: number, ...args: (string | number)[]): Promise<unknown>
  call(command: string, ...args: (string | number)[]): Promise<unknown>
  duplicate(): IoredisClient
  on(event: string, listener: Listener): unknown
  off(event: string, listener: Listener): unknown
}

/** What a `Cluster` has besides: its slot table and its primaries' own connections. */
interface ClusterLike {
  readonly isCluster: true
  readonly slots: readonly (readonly string[] | undefined)[]
  nodes(role: 'master'): ({ options: { host?: string; port?: number } } & CommandTarget)[]
}

/** A subscriber's connection: the same client API, plus pub/sub. */
interface PubSubClient {
  subscribe(channel: string): Promise<unknown>
  unsubscribe(channel: string): Promise<unknown>
  disconnect(): void
  on(event: string, listener: Listener): unknown
}

/** Whether `value` has the ioredis API (ioredis or iovalkey; `Redis` or `Cluster`). */
export function isIoredisClient(value: unknown): value is IoredisClient {
  return (
    value != null &&
    typeof (value as Partial<IoredisClient>).evalsha === 'function' &&
    typeof (value as Partial<IoredisClient>).duplicate === 'function'
  )
}

function stateOf(status: unknown): ClientState {
  switch (status) {
    case 'ready':
      return 'ready'
    case 'wait':
    case undefined:
      return 'lazy'
    case 'reconnecting':
    case 'close':
    case 'end':
      return 'down'
    case 'connecting':
      return 'connecting'
    default:
      return 'handshaking'
  }
}

/** One set of listeners per client: `close`, `ready`, `+node`/`-node` (a Cluster's), `error`, `end`. */
const ioredisEvents = fanOutPerClient<IoredisClient>((client, all) =>
  attachAll(client, [
    ['close', all.down],
    ['ready', all.ready],
    ['+node', all.topology],
    ['-node', all.topology],
    ['error', (e: unknown) => e instanceof Error && all.error(e)],
    ['end', all.end],
  ]),
)

/** Adapts an ioredis or iovalkey client to the client seam. */
export class IoredisConnection implements RedisConnection {
  readonly kind = 'ioredis'
  readonly client: IoredisClient
  readonly cluster: boolean
  /**
   * Whether the acquires' tries and the releases are written together with the others of their tick
   * (write-coalescing.ts): the `coalesceWrites` option, on a `Redis` (a `Cluster` spreads its
   * commands over the primaries' connections, and is left as it is).
   */
  coalesce: boolean

  constructor(client: IoredisClient) {
    this.client = client
    this.cluster = (client as unknown as Partial<ClusterLike>).isCluster === true
    this.coalesce = !this.cluster
  }

  get state(): ClientState {
    return stateOf(this.client.status)
  }

  evalsha(sha: string, numKeys: number, ...args: (string | number)[]): Promise<unknown> {
    const reply = this.client.evalsha(sha, numKeys, ...args)
    if (!this.cluster) writeNow(this.client)
    return reply
  }

  /** An acquire's try or a release: with the tick's others where `coalesce` is on (write-coalescing.ts). */
  evalshaBatched(sha: string, numKeys: number, ...args: (string | number)[]): Promise<unknown> {
    if (!this.coalesce) return this.evalsha(sha, numKeys, ...args)
    coalesceNextWrite(this.client)
    return this.client.evalsha(sha, numKeys, ...args)
  }

  eval(script: string, numKeys: number, ...args: (string | number)[]): Promise<unknown> {
    const reply = this.client.eval(script, numKeys, ...args)
    if (!this.cluster) writeNow(this.client)
    return reply
  }

  call(...args: (string | number)[]): Promise<unknown> {
    const [command, ...rest] = args
    const reply = this.client.call(String(command), ...rest)
    if (!this.cluster) writeNow(this.client)
    return reply
  }

  connectionFor(key: string): CommandTarget | undefined {
    if (!this.cluster) return this
    const cluster = this.client as unknown as ClusterLike
    const primary = cluster.slots[keySlot(key)]?.[0]
    if (primary === undefined) return undefined
    return cluster.nodes('master').find((n) => `${n.options.host}:${n.options.port}` === primary)
  }

  /** The client's events, through one set of listeners per client however many Lockers share it (event-fan-out.ts). */
  listen(events: ClientEvents): () => void {
    const client = this.client as Partial<IoredisClient>
    // A client that emits no events is trusted as it is.
    if (typeof client.on !== 'function') return () => {}
    return ioredisEvents(this.client).listen(events)
  }

  subscriber(events: SubscriberEvents, sharded = false): SubscriberConnection {
    // One connection per primary, each channel on its slot's owner (sharded-subscriber.ts).
    if (sharded && this.cluster) return new ShardedSubscriber(this.client as unknown as ShardedCluster, events, 2_000)
    const sub = this.client.duplicate() as unknown as PubSubClient
    sub.on('error', () => {
      // Reconnection is ioredis's job; waiters fall back on their backstops meanwhile.
    })
    sub.on('message', (channel, text) => events.message(String(channel), String(text)))
    sub.on('ready', () => events.ready())
    return {
      subscribe: (channel) => sub.subscribe(channel),
      unsubscribe: (channel) => sub.unsubscribe(channel),
      close: () => sub.disconnect(),
    }
  }
}
