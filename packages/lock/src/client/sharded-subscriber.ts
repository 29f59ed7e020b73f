/**
 * Sharded pub/sub on an ioredis (or iovalkey) `Cluster`: one subscriber connection per primary
 * that owns a subscribed slot, each channel `SSUBSCRIBE`d on the primary its slot's owner is in the
 * Cluster's slot table (redis-client.ts, `subscriber(events, true)`).
 *
 * Why not ioredis's own `shardedSubscribers` (cluster/ClusterSubscriberGroup.js, 6.0.0): it
 * subscribes again only when its re-read slot table differs from the one it had. A node that
 * drops our subscription while the table it serves ends up the same — `CLUSTER SETSLOT <slot>
 * NODE <itself>`, which `redis-cli --cluster reshard` sends to every primary, the new owner
 * included, unsubscribes the slot's shard channels there — leaves the channel unsubscribed for
 * good (test/cluster-pubsub.test.ts shows it). Here every dropped or moved channel is subscribed
 * again where the table says, whatever changed.
 *
 * What moves a subscription: a node's unsolicited `sunsubscribe` (its slot went away: a
 * resharding, a failover that made it a replica), which ioredis reports as `moved`; a connection
 * that closes (a failed primary); a change of the slot table. Each marks the channels concerned
 * as unsubscribed, and a reconciliation — at once, then every {@link RECONCILE_MS} while any
 * channel is not where the table says — re-reads the slot table and subscribes them on their
 * owner. Each move is a reconnection for the waiters (`ready`): messages sent meanwhile are gone,
 * and until then they wake by their safety poll, never later.
 */
import { keySlot } from '../backend/replication.js'
import type { SubscriberConnection, SubscriberEvents } from './redis-client.js'

type Listener = (...args: unknown[]) => void

/** A plain connection to one node, with sharded pub/sub. */
interface NodeConnection {
  readonly status: string
  ssubscribe(channel: string): Promise<unknown>
  sunsubscribe(channel: string): Promise<unknown>
  disconnect(): void
  on(event: string, listener: Listener): unknown
}

/** What of a `Cluster` this needs: its slot table, its primaries, and a way to re-read the table. */
export interface ShardedCluster {
  readonly slots: readonly (readonly string[] | undefined)[]
  nodes(role: 'master'): { readonly options: { host?: string; port?: number }; duplicate(o?: object): unknown }[]
  refreshSlotsCache(callback?: (error?: Error) => void): void
  on(event: 'refresh', listener: () => void): unknown
  off(event: 'refresh', listener: () => void): unknown
}

/** How often channels not where the slot table says are tried again, ms. */
export const RECONCILE_MS = 500

/** One subscription: the primary (`host:port`) it is on, or undefined while it is on none. */
interface Subscription {
  node: string | undefined
  /** Set once the channel was subscribed somewhere at least once (a later move is a reconnection). */
  subscribedOnce: boolean
}

export class ShardedSubscriber implements SubscriberConnection {
  readonly #cluster: ShardedCluster
  readonly #events: SubscriberEvents
  readonly #channels = new Map<string, Subscription>()
  readonly #connections = new Map<string, NodeConnection>()
  /**
   * Drops seen per node (its unsolicited `sunsubscribe`s, its connection's closes). A subscription
   * whose `SSUBSCRIBE` was out while its node dropped channels may have been dropped with them:
   * the reply is read before the drop's push, so the drop finds no channel on that node yet.
   */
  readonly #drops = new Map<string, number>()
  #timer: NodeJS.Timeout | undefined
  #reconciling = false
  /**
   * A reconciliation was asked for while one ran (a node dropped channels after the running one
   * had looked at them): it runs again when the running one ends, or the drop would be lost.
   */
  #again = false
  #closed = false
  readonly #timeoutMs: number
  /** The Cluster re-read its slot table (a MOVED, a failover): channels whose slot moved follow it. */
  readonly #onRefresh = (): void => {
    for (const [channel, subscription] of this.#channels) {
      if (subscription.node !== undefined && subscription.node !== this.#ownerOf(channel)) {
        this.#schedule(0)
        return
      }
    }
  }

  /** @param timeoutMs how long a reconciliation waits for one node's SSUBSCRIBE. */
  constructor(cluster: ShardedCluster, events: SubscriberEvents, timeoutMs: number) {
    this.#cluster = cluster
    this.#events = events
    this.#timeoutMs = timeoutMs
    cluster.on('refresh', this.#onRefresh)
  }

  async subscribe(channel: string): Promise<unknown> {
    const subscription: Subscription = this.#channels.get(channel) ?? { node: undefined, subscribedOnce: false }
    this.#channels.set(channel, subscription)
    const node = this.#ownerOf(channel)
    if (node === undefined) {
      this.#schedule()
      throw new Error(`no primary is known for the slot of ${channel}`)
    }
    try {
      await this.#subscribeOn(channel, subscription, node)
    } catch (error) {
      // Tried again by the reconciliation; the waiter has its safety poll meanwhile.
      this.#schedule()
      throw error
    }
    return undefined
  }

  async unsubscribe(channel: string): Promise<unknown> {
    const subscription = this.#channels.get(channel)
    this.#channels.delete(channel)
    if (subscription?.node === undefined) return undefined
    return this.#connections.get(subscription.node)?.sunsubscribe(channel)
  }

  close(): void {
    this.#closed = true
    this.#cluster.off('refresh', this.#onRefresh)
    clearTimeout(this.#timer)
    this.#timer = undefined
    for (const connection of this.#connections.values()) connection.disconnect()
    this.#connections.clear()
    this.#channels.clear()
  }

  /** The primary that owns `channel`'s slot in the Cluster's table, as `host:port`. */
  #ownerOf(channel: string): string | undefined {
    return this.#cluster.slots[keySlot(channel)]?.[0]
  }

  async #subscribeOn(channel: string, subscription: Subscription, node: string): Promise<void> {
    const connection = this.#connection(node)
    if (connection === undefined) throw new Error(`no connection to ${node}`)
    const drops = this.#drops.get(node) ?? 0
    await connection.ssubscribe(channel)
    // Unsubscribed, or moved on by a reconciliation, while the SSUBSCRIBE was out. A newer
    // subscription of the channel may have been sent on this connection since: it is left alone.
    if (this.#channels.get(channel) !== subscription) {
      if (!this.#channels.has(channel)) connection.sunsubscribe(channel).catch(() => {})
      return
    }
    subscription.subscribedOnce = true
    // The node dropped channels while this SSUBSCRIBE was out (`CLUSTER SETSLOT … NODE` sent to
    // it during a resharding): ours may be gone with them. Left on no node, it is subscribed again
    // by the reconciliation (a second SSUBSCRIBE of a channel still subscribed changes nothing),
    // and the waiters are told (`ready`), as after any move.
    if ((this.#drops.get(node) ?? 0) !== drops) {
      this.#schedule(0)
      return
    }
    subscription.node = node
  }

  /** The subscriber connection to primary `node` (`host:port`), opened on first use. */
  #connection(node: string): NodeConnection | undefined {
    const known = this.#connections.get(node)
    if (known) return known
    const primary = this.#cluster.nodes('master').find((n) => `${n.options.host}:${n.options.port}` === node)
    if (primary === undefined) return undefined
    // A duplicate of the Cluster's own connection to that node (its options, TLS, password), which
    // subscribes again by itself only through us: a node that restarts may no longer own the slot.
    const connection = primary.duplicate({ autoResubscribe: false, lazyConnect: false }) as NodeConnection
    connection.on('error', () => {
      // Its reconnection is ioredis's; the channels on it wait for the reconciliation.
    })
    connection.on('smessage', (channel, text) => this.#events.message(String(channel), String(text)))
    // The node dropped shard channels of ours (it lost a slot): find out which, subscribe again.
    connection.on('moved', () => this.#dropped(node))
    connection.on('close', () => this.#dropped(node))
    this.#connections.set(node, connection)
    return connection
  }

  /** Every channel on `node` may have been unsubscribed there: each is subscribed again where the table says. */
  #dropped(node: string): void {
    if (this.#closed) return
    this.#drops.set(node, (this.#drops.get(node) ?? 0) + 1)
    let any = false
    for (const subscription of this.#channels.values()) {
      if (subscription.node !== node) continue
      subscription.node = undefined
      any = true
    }
    if (any) this.#schedule(0)
  }

  #schedule(ms = RECONCILE_MS): void {
    if (this.#closed || this.#timer !== undefined) return
    this.#timer = setTimeout(() => {
      this.#timer = undefined
      void this.#reconcile()
    }, ms)
    this.#timer.unref()
  }

  /**
   * Re-reads the slot table, then subscribes each channel that is on no node, or not on its
   * owner, on its owner. Runs again later while any channel is left behind.
   */
  async #reconcile(): Promise<void> {
    if (this.#closed) return
    if (this.#reconciling) {
      this.#again = true
      return
    }
    this.#reconciling = true
    this.#again = false
    let moved = false
    let behind = false
    try {
      // The table is re-read first (a node that dropped us knows it changed before the client does).
      await within(
        new Promise<void>((resolve) => this.#cluster.refreshSlotsCache(() => resolve())),
        this.#timeoutMs,
      ).catch(() => {})
      await Promise.all(
        [...this.#channels].map(async ([channel, subscription]) => {
          const owner = this.#ownerOf(channel)
          if (owner !== undefined && subscription.node === owner) return
          const old = subscription.node
          subscription.node = undefined
          if (old !== undefined)
            this.#connections
              .get(old)
              ?.sunsubscribe(channel)
              .catch(() => {})
          if (owner === undefined) {
            behind = true
            return
          }
          const connection = this.#connections.get(owner)
          if (connection !== undefined && connection.status === 'reconnecting') {
            behind = true
            return
          }
          const wasSubscribed = subscription.subscribedOnce
          try {
            await within(this.#subscribeOn(channel, subscription, owner), this.#timeoutMs)
            if (wasSubscribed) moved = true
          } catch {
            behind = true
          }
        }),
      )
      // A node none of our channels is on and that does not answer (a failed primary) is let go.
      for (const [node, connection] of this.#connections) {
        if (connection.status === 'ready' || [...this.#channels.values()].some((c) => c.node === node)) continue
        connection.disconnect()
        this.#connections.delete(node)
      }
    } finally {
      this.#reconciling = false
    }
    if (this.#closed) return
    // Messages sent while a channel was on no node are gone: the waiters try now.
    if (moved) this.#events.ready()
    if (this.#again) this.#schedule(0)
    else if (behind) this.#schedule()
  }
}

/** `promise`, or a rejection after `ms` (a node that does not answer: the reconciliation goes on). */
function within<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms)
    timer.unref()
  })
  return Promise.race([promise, late]).finally(() => clearTimeout(timer))
}
