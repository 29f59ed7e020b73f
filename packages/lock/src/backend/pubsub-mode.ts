/**
 * Which pub/sub a Locker's release messages travel on (the `pubsub` option, options.ts). On a
 * Redis Cluster, classic pub/sub (`PUBLISH`/`SUBSCRIBE`) is broadcast over the cluster bus to
 * every node, so each release costs every shard; sharded pub/sub (`SPUBLISH`/`SSUBSCRIBE`,
 * Redis 7) stays on the shard that owns the channel's slot — the resource's, as the channel
 * carries the resource's hash tag (keys.ts). Publisher and waiters must agree: a message sent
 * one way is not heard the other way (the waiter then falls back on its safety poll).
 */
import type { RedisConnection } from '../client/redis-client.js'
import type { PubSubOption } from '../options.js'

/** The pub/sub in use: classic everywhere but on a Cluster that has sharded pub/sub. */
export type PubSubKind = 'classic' | 'sharded'

/**
 * Resolves the `pubsub` option against the client: `'classic'` anywhere but on a Cluster;
 * `'sharded'` as told; `'auto'` asks the server once (`COMMAND INFO SPUBLISH`: Redis 7 knows it)
 * and keeps the answer. A failed question is asked again next time; meanwhile classic is used.
 */
export class PubSubMode {
  readonly #client: RedisConnection
  #known: PubSubKind | undefined
  #asking: Promise<PubSubKind> | undefined
  readonly #timeoutMs: number

  /** @param timeoutMs how long the question may take (then classic, and it is asked again next time). */
  constructor(client: RedisConnection, option: PubSubOption, timeoutMs: number) {
    this.#client = client
    this.#timeoutMs = timeoutMs
    if (!client.cluster || option === 'classic') this.#known = 'classic'
    else if (option === 'sharded') this.#known = 'sharded'
  }

  /** The pub/sub in use, once known (undefined while `'auto'` has not had its answer). */
  get known(): PubSubKind | undefined {
    return this.#known
  }

  /** The pub/sub in use, asking the server first if need be (`'auto'` on a Cluster). */
  resolve(): PubSubKind | Promise<PubSubKind> {
    if (this.#known !== undefined) return this.#known
    if (this.#asking) return this.#asking
    let timer: NodeJS.Timeout | undefined
    const late = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error('no answer in time')), this.#timeoutMs)
      timer.unref()
    })
    const asking = Promise.race([this.#client.call('COMMAND', 'INFO', 'SPUBLISH'), late]).then(
      (reply) => {
        // Redis 6 answers [nil] for a command it does not know.
        const kind: PubSubKind = Array.isArray(reply) && Array.isArray(reply[0]) ? 'sharded' : 'classic'
        this.#known = kind
        return kind
      },
      (): PubSubKind => {
        this.#asking = undefined
        return 'classic'
      },
    )
    void asking.finally(() => clearTimeout(timer))
    this.#asking = asking
    return asking
  }
}
