/**
 * The adapter of node-redis (`redis` / `@redis/client` 6.x, `createClient`) to the client seam
 * (redis-client.ts). Scripts go out as `EVALSHA`/`EVAL` through `sendCommand`, one command each,
 * as with ioredis. What differs, and what the engines rely on:
 * - node-redis does not connect by itself: the Locker refuses a client whose `connect()` was
 *   never called (`isOpen` false), before any I/O (create-backend.ts); one still connecting is
 *   accepted, its calls wait in its offline queue, each within its deadline.
 * - A connection lost with commands in flight fails them (`SocketClosedUnexpectedlyError`) and
 *   does not send them again; commands not yet written wait for the reconnection.
 * - It emits `error` on every lost connection, then `reconnecting`; a lost socket is a `down`
 *   here, only a failed (re)connection is the connection error that makes Redis unreachable.
 * - Its per-command timeout (`commandOptions.timeout`) is left out of the Locker's commands
 *   ({@link LOCKER_COMMAND_OPTIONS}): the Locker has deadlines of its own.
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
import { isNodeRedisCluster } from './node-redis-cluster.js'
import { isNodeRedisSentinel } from './node-redis-sentinel.js'
import { attachAll, ClientEventFanOut, downThenEnd } from './event-fan-out.js'
import { isLostSocket, LOCKER_COMMAND_OPTIONS, oncePerClient, strings } from './node-redis-shared.js'

type Listener = (...args: unknown[]) => void

/**
 * A node-redis client (`createClient()` of the `redis` or `@redis/client` package, 6.x), by
 * shape: the Locker neither loads node-redis nor names it in its types.
 */
export interface NodeRedisClient {
  /** `connect()` was called and the client was not closed since. */
  readonly isOpen: boolean
  /** Connected and ready for commands. */
  readonly isReady: boolean
  sendCommand(args: readonly string[], options?: { readonly timeout?: number }): Promise<unknown>
  duplicate(): NodeRedisClient
  connect(): Promise<unknown>
  subscribe(channel: string, listener: (message: string, channel: string) => unknown): Promise<unknown>
  unsubscribe(channel: string): Promise<unknown>
  destroy(): void
  on(event: string, listener: Listener): unknown
  off(event: string, listener: Listener): unknown
}

/** Whether `value` has the node-redis client API (a single client: not a cluster nor a sentinel). */
export function isNodeRedisClient(value: unknown): value is NodeRedisClient {
  const v = value as Partial<NodeRedisClient> | null | undefined
  return (
    v != null &&
    !isIoredisClient(value) &&
    typeof v.sendCommand === 'function' &&
    typeof v.duplicate === 'function' &&
    typeof v.isOpen === 'boolean' &&
    !isNodeRedisCluster(value) &&
    !isNodeRedisSentinel(value)
  )
}

/**
 * The adapter of `client`: one per client, however many Lockers share it (the adapter listens to
 * the client for as long as the client lives).
 */
export const nodeRedisConnection: (client: NodeRedisClient) => NodeRedisConnection = oncePerClient(
  (client: NodeRedisClient) => new NodeRedisConnection(client),
)

/** Adapts a node-redis client to the client seam (one per client: {@link nodeRedisConnection}). */
export class NodeRedisConnection implements RedisConnection {
  readonly kind = 'node-redis'
  /** One Redis: a Cluster client has an adapter of its own (node-redis-cluster.ts). */
  readonly cluster = false
  readonly client: NodeRedisClient
  /**
   * The connection was lost, or a (re)connection failed, since it was last ready. node-redis says
   * "open, not ready" alike while it connects for the first time and while it retries a refused
   * connection, so the adapter follows the client's events from the start (a Locker made after
   * the failures must still know Redis is unreachable, and why).
   */
  #lost = false
  #lastError: Error | undefined
  /**
   * The engines' listeners, on one set of the client's: `error` (a lost socket is `down`; a failed
   * (re)connection is `error` first, so that the tries given up on the close that follows carry
   * it as their cause, as ioredis's 'close' then refused 'error' do, and `down` while not ready),
   * `ready`, and `end` (`down`, then `end`). Not 'reconnecting': node-redis emits it after the
   * error of the loss or of the refused retry, and a down without that error as its cause would
   * be ridden out as a mere close.
   */
  readonly #events: ClientEventFanOut

  constructor(client: NodeRedisClient) {
    this.client = client
    this.#events = new ClientEventFanOut((all) =>
      attachAll(client, [
        [
          'error',
          (e: unknown) => {
            if (!(e instanceof Error)) return
            if (isLostSocket(e)) all.down()
            else {
              all.error(e)
              if (!client.isReady) all.down()
            }
          },
        ],
        ['ready', all.ready],
        ['end', downThenEnd(all)],
      ]),
    )
    client.on('error', (e: unknown) => {
      if (!(e instanceof Error)) return
      this.#lost = true
      if (!isLostSocket(e)) this.#lastError = e
    })
    client.on('ready', () => {
      this.#lost = false
      this.#lastError = undefined
    })
  }

  get state(): ClientState {
    const client = this.client
    if (!client.isOpen) return 'down'
    if (client.isReady) return 'ready'
    return this.#lost ? 'down' : 'connecting'
  }

  /** The last failed (re)connection's error since the client was last ready. */
  get lastError(): Error | undefined {
    return this.#lastError
  }

  evalsha(sha: string, numKeys: number, ...args: (string | number)[]): Promise<unknown> {
    return this.client.sendCommand(['EVALSHA', sha, String(numKeys), ...strings(args)], LOCKER_COMMAND_OPTIONS)
  }

  eval(script: string, numKeys: number, ...args: (string | number)[]): Promise<unknown> {
    return this.client.sendCommand(['EVAL', script, String(numKeys), ...strings(args)], LOCKER_COMMAND_OPTIONS)
  }

  call(...args: (string | number)[]): Promise<unknown> {
    return this.client.sendCommand(strings(args), LOCKER_COMMAND_OPTIONS)
  }

  connectionFor(): CommandTarget {
    return this
  }

  /** The client's events, through one set of listeners however many Lockers share the client (event-fan-out.ts). */
  listen(events: ClientEvents): () => void {
    return this.#events.listen(events)
  }

  subscriber(events: SubscriberEvents): SubscriberConnection {
    const sub = this.client.duplicate()
    sub.on('error', () => {
      // Reconnection is node-redis's job; waiters fall back on their backstops meanwhile.
    })
    sub.on('ready', () => events.ready())
    // A failed first connection is reported by the subscribes that wait for it (their deadline).
    const connected = sub.connect().catch(() => {})
    const listener = (message: string, channel: string): void => events.message(channel, message)
    return {
      subscribe: (channel) => sub.subscribe(channel, listener),
      unsubscribe: (channel) => (sub.isOpen ? sub.unsubscribe(channel) : Promise.resolve()),
      close: () => {
        void connected
        sub.destroy()
      },
    }
  }
}
