/**
 * The adapter of a Valkey GLIDE cluster client (`GlideClusterClient` of `@valkey/valkey-glide`
 * 2.x) to the client seam (redis-client.ts). What the standalone adapter does (glide-client.ts),
 * plus the routes a cluster needs:
 * - A script goes out as `EVALSHA`/`EVAL` through `customCommand`, routed to the primary of its
 *   first key's slot (`{ type: 'primarySlotKey', key }`): every key of a resource shares its hash
 *   tag (keys.ts), so the script runs where its keys live. A command without a key (`COMMAND
 *   INFO`) goes to a random node; `WAIT` and `ROLE` (the `replicas` option) to the primary of the
 *   key's slot, the node that ran the script.
 * - A failover to a replica that missed the latest grants leaves the new primary an older token
 *   counter. GLIDE has no topology events, and it moves a slot's calls to the new primary on its
 *   own (it follows `MOVED`, even for a call routed by address, and refreshes its slots after any
 *   call's error, the user's own included): nothing the adapter sees comes before the first call
 *   there. So every grant through it mints `max(INCR, clock)` (`reroutesSilently`,
 *   backend/generations.ts), where other clients do so only after a reconnection or a change of
 *   topology. Measured (test/client/glide-cluster.test.ts): a failover with no call in flight,
 *   reported only by a `CLUSTER SLOTS` poll, let a grant through with a token already handed out.
 *   A connection lost with a call in flight fails the call (`ConnectionError`; GLIDE does not
 *   send it again), and is reported as a change of topology all the same.
 * - Redis down (every node refuses): found by TCP probes of the nodes it knows, as on a
 *   standalone client (glide-reachability.ts): the configured addresses and the nodes `CLUSTER
 *   SLOTS` last listed (read when an engine starts listening, then every {@link NODES_CHECK_MS}).
 *   A cluster with one shard's primary gone still accepts: its calls fail by their deadlines
 *   while the cluster fails over.
 * - Pub/sub on a second GLIDE cluster client created from the configuration; classic channels
 *   with `SUBSCRIBE`, sharded ones (the `pubsub: 'sharded'` option) with GLIDE's `SSUBSCRIBE`,
 *   which it sends to the shard that owns the channel's slot and moves with it.
 */
import {
  createSubscriberClient,
  flattened,
  GlideAdapter,
  noScriptAsRedisSaysIt,
  strings,
  SUBSCRIBE_TIMEOUT_MS,
  type GlideConfiguration,
} from './glide-client.js'
import type { ProbeAddress } from './glide-reachability.js'
import type {
  ClientEvents,
  CommandTarget,
  RedisConnection,
  SubscriberConnection,
  SubscriberEvents,
} from './redis-client.js'

/** A GLIDE route: the primary of a key's slot, or any node. */
type Route = { readonly type: 'primarySlotKey'; readonly key: string } | 'randomNode'

/**
 * A Valkey GLIDE cluster client (`GlideClusterClient.createClient()` of `@valkey/valkey-glide`
 * 2.x), by shape: the Locker neither loads GLIDE nor names it in its types.
 */
export interface GlideClusterClient {
  customCommand(args: string[], options?: { route?: Route }): Promise<unknown>
  subscribe(channels: Iterable<string>, timeoutMs: number): Promise<void>
  unsubscribe(channels: Iterable<string> | null, timeoutMs: number): Promise<void>
  ssubscribe(channels: Iterable<string>, timeoutMs: number): Promise<void>
  sunsubscribe(channels: Iterable<string> | null, timeoutMs: number): Promise<void>
  close(errorMessage?: string): void
  getSubscriptions(): Promise<unknown>
}

/** How often the cluster's nodes are read (`CLUSTER SLOTS`) while an engine listens: the addresses to probe. */
export const NODES_CHECK_MS = 10_000

/** GLIDE's error for a call a lost connection left unanswered. */
const isConnectionError = (error: unknown): boolean =>
  (error as { constructor?: { name?: unknown } } | null)?.constructor?.name === 'ConnectionError'

/** The slots' primaries from a `CLUSTER SLOTS` reply, as one string to compare, and every node's address. */
function topologyOf(reply: unknown): { primaries: string; nodes: ProbeAddress[] } | undefined {
  if (!Array.isArray(reply)) return undefined
  const primaries: string[] = []
  const nodes: ProbeAddress[] = []
  for (const range of reply as unknown[]) {
    if (!Array.isArray(range) || range.length < 3) continue
    const [start, end, ...owners] = range as unknown[]
    owners.forEach((owner, i) => {
      if (!Array.isArray(owner)) return
      const [host, port, id] = owner as unknown[]
      if (i === 0) primaries.push(`${String(start)}-${String(end)}:${String(id)}`)
      nodes.push({ host: String(host), port: Number(port) })
    })
  }
  return { primaries: primaries.sort().join(','), nodes }
}

/** Adapts a GLIDE cluster client to the client seam. */
export class GlideClusterConnection extends GlideAdapter implements RedisConnection {
  readonly cluster = true
  readonly reroutesSilently: boolean = true
  readonly client: GlideClusterClient
  readonly #config: GlideConfiguration
  /** The nodes `CLUSTER SLOTS` last listed (probed with the configured addresses). */
  #nodes: readonly ProbeAddress[] = []
  #primaries: string | undefined
  readonly #topologyListeners = new Set<() => void>()
  #topologyTimer: NodeJS.Timeout | undefined

  /**
   * @param config what `client` was created with (glide-client.ts `glideConfigurationOf`).
   * @param options `probe` (default true): probe the nodes when calls go unanswered.
   */
  constructor(client: GlideClusterClient, config: GlideConfiguration, options: { probe?: boolean } = {}) {
    super(client, options.probe ?? true)
    this.client = client
    this.#config = config
  }

  protected probeAddresses(): readonly ProbeAddress[] {
    return [...this.#config.addresses, ...this.#nodes]
  }

  /** Sends `args` along `route`; a lost connection is reported as a change of topology. */
  #send(args: string[], route: Route): Promise<unknown> {
    return this.tracked(this.client.customCommand(args, { route })).catch((error: unknown) => {
      if (isConnectionError(error)) this.#topologyChanged()
      throw error
    })
  }

  evalsha(sha: string, numKeys: number, ...args: (string | number)[]): Promise<unknown> {
    return this.#send(['EVALSHA', sha, String(numKeys), ...strings(args)], routeOf(numKeys, args)).catch(
      noScriptAsRedisSaysIt,
    )
  }

  eval(script: string, numKeys: number, ...args: (string | number)[]): Promise<unknown> {
    return this.#send(['EVAL', script, String(numKeys), ...strings(args)], routeOf(numKeys, args))
  }

  call(...args: (string | number)[]): Promise<unknown> {
    return this.#send(strings(args), 'randomNode').then(flattened)
  }

  connectionFor(key: string): CommandTarget {
    const route: Route = { type: 'primarySlotKey', key }
    return { call: (...args) => this.#send(strings(args), route).then(flattened) }
  }

  override listen(events: ClientEvents): () => void {
    const unlisten = super.listen(events)
    const topology = events.topology?.bind(events)
    if (topology === undefined) return unlisten
    this.#topologyListeners.add(topology)
    if (this.#topologyTimer === undefined) {
      void this.#checkTopology()
      this.#topologyTimer = setInterval(() => void this.#checkTopology(), NODES_CHECK_MS)
      this.#topologyTimer.unref()
    }
    return () => {
      unlisten()
      this.#topologyListeners.delete(topology)
      if (this.#topologyListeners.size === 0) {
        clearInterval(this.#topologyTimer)
        this.#topologyTimer = undefined
      }
    }
  }

  /** Reads the cluster's nodes, and its slots' primaries: a change since the last reading is a change of topology. */
  async #checkTopology(): Promise<void> {
    if (this.state === 'down') return
    const reply = await this.client.customCommand(['CLUSTER', 'SLOTS'], { route: 'randomNode' }).catch(() => undefined)
    const topology = topologyOf(reply)
    if (topology === undefined || topology.primaries === '') return
    this.#nodes = topology.nodes
    const before = this.#primaries
    this.#primaries = topology.primaries
    if (before !== undefined && before !== topology.primaries) this.#topologyChanged()
  }

  #topologyChanged(): void {
    for (const listener of [...this.#topologyListeners]) listener()
  }

  /**
   * Subscribes on a GLIDE cluster client of our own, a copy of the user's with a message callback
   * ({@link GlideAdapter.lazySubscriber}); `sharded`: its channels are `SSUBSCRIBE`d (GLIDE sends
   * each to its slot's shard).
   */
  subscriber(events: SubscriberEvents, sharded = false): SubscriberConnection {
    const timeoutMs = this.#config.requestTimeout ?? SUBSCRIBE_TIMEOUT_MS
    return this.lazySubscriber(
      events,
      () => createSubscriberClient<GlideClusterClient>(this.client, this.#config, events),
      sharded
        ? {
            subscribe: (sub, channel) => sub.ssubscribe([channel], timeoutMs),
            unsubscribe: (sub, channel) => sub.sunsubscribe([channel], timeoutMs),
          }
        : {
            subscribe: (sub, channel) => sub.subscribe([channel], timeoutMs),
            unsubscribe: (sub, channel) => sub.unsubscribe([channel], timeoutMs),
          },
    )
  }
}

/** Where a script goes: the primary of its first key's slot (every key of a resource shares its hash tag). */
function routeOf(numKeys: number, args: readonly (string | number)[]): Route {
  return numKeys > 0 && args.length > 0 ? { type: 'primarySlotKey', key: String(args[0]) } : 'randomNode'
}
