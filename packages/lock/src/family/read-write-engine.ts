/**
 * What a read-write lock (family/read-write.ts) runs on: its round trips, behind one small seam,
 * so that the waiting, the holds and the events are the same on one Redis (this module's
 * {@link SingleReadWrite}: one script per call) and in quorum mode (quorum/quorum-read-write.ts:
 * the same scripts on every node, counted by majority).
 */
import type { Deadlines } from '../deadline.js'
import type { ReadWriteKeys } from '../keys.js'
import type { RedisConnection } from '../client/redis-client.js'
import type { Script } from '../scripts/define-script.js'
import {
  extendReadScript,
  extendWriteScript,
  inspectReadWriteScript,
  readScript,
  releaseReadScript,
  releaseWriteScript,
  shardedReleaseReadScript,
  shardedReleaseWriteScript,
  writeScript,
} from '../scripts/read-write.js'
import type { PubSubMode } from '../backend/pubsub-mode.js'
import type { ReadWriteMode } from './read-write-hold.js'

/** One try's outcome: granted with a token, or refused with a hint (ms until it may be free, -1: writers wait). */
export type TryOutcome =
  { readonly granted: true; readonly token: bigint } | { readonly granted: false; readonly holderMs: number }

/** One read's or write's try. */
export interface TryRequest {
  readonly ownerId: string
  readonly ttlMs: number
  /** A write: on a miss, take (or keep) a place among the waiting writers. */
  readonly join: boolean
  /** A write: when it first tried (Date.now()), the order of its place among the waiting writers. */
  readonly arrival: number
}

/** What Redis holds for one read-write lock, as `inspect()` reads it (the majority's view in quorum mode). */
export interface RawInspection {
  readonly writerToken: bigint | undefined
  readonly writerTtlMs: number | undefined
  readonly readers: number
  readonly waitingWriters: number
  readonly lastToken: bigint | undefined
}

/** The round trips of the read-write locks of one Locker. Each call has its deadline. */
export interface ReadWriteEngine {
  /**
   * One try. Rejects when its outcome is unknown (no answer in time, a dropped connection; in
   * quorum mode no majority answered): the caller then gives back whatever it may have done.
   */
  try(keys: ReadWriteKeys, mode: ReadWriteMode, request: TryRequest): Promise<TryOutcome>
  /** Owner-checked renewal: true when renewed, false when the lease is not ours any more. */
  extend(keys: ReadWriteKeys, mode: ReadWriteMode, ownerId: string, ttlMs: number): Promise<boolean>
  /** Owner-checked release (a writer also leaves the waiting writers): true when our lease was live. */
  release(keys: ReadWriteKeys, mode: ReadWriteMode, ownerId: string): Promise<boolean>
  inspect(keys: ReadWriteKeys): Promise<RawInspection>
  /**
   * Of a lease of `ttlMs` granted (or renewed) at the moment its request was sent, how long is
   * ours for certain: `ttlMs` on one Redis, less the clock drift allowed for in quorum mode.
   */
  validMs(ttlMs: number): number
  /** Gives up what the engine opened of its own (quorum mode: its nodes' calls in flight), by `until`. */
  close?(until?: number): Promise<void>
}

/** A reply `{1, token}` or `{0, ms}` of the read and write scripts. */
export function toTryOutcome(reply: unknown): TryOutcome {
  const [granted, value] = reply as [number, number | string]
  return granted === 1 ? { granted: true, token: BigInt(value) } : { granted: false, holderMs: Number(value) }
}

/** The reply of the inspect script. */
export function toRawInspection(reply: unknown): RawInspection & { readonly writerOwner: string | undefined } {
  const [writerToken, writerTtl, readers, waiting, last, owner] = reply as [
    string | null,
    number,
    number,
    number,
    string | null,
    string | null,
  ]
  const writing = writerToken !== null && writerTtl !== -2
  return {
    writerToken: writing ? BigInt(writerToken) : undefined,
    writerTtlMs: writing ? writerTtl : undefined,
    writerOwner: writing && owner !== null ? owner : undefined,
    readers,
    waitingWriters: waiting,
    lastToken: last === null ? undefined : BigInt(last),
  }
}

/** One Redis (also Sentinel, Cluster): one script per call on the Locker's client. */
export class SingleReadWrite implements ReadWriteEngine {
  readonly #client: RedisConnection
  readonly #deadlines: Deadlines
  readonly #o: { readonly commandTimeoutMs: number; readonly fenceTtlMs: number; readonly queueLeaseMs: number }
  readonly #pubsub: PubSubMode

  constructor(
    client: RedisConnection,
    deadlines: Deadlines,
    options: { readonly commandTimeoutMs: number; readonly fenceTtlMs: number; readonly queueLeaseMs: number },
    pubsub: PubSubMode,
  ) {
    this.#client = client
    this.#deadlines = deadlines
    this.#o = options
    this.#pubsub = pubsub
  }

  async try(keys: ReadWriteKeys, mode: ReadWriteMode, r: TryRequest): Promise<TryOutcome> {
    const { fenceTtlMs, queueLeaseMs } = this.#o
    const reply =
      mode === 'read'
        ? await this.#run(readScript, keys, { ownerId: r.ownerId, ttlMs: r.ttlMs, fenceTtlMs })
        : await this.#run(writeScript, keys, {
            ownerId: r.ownerId,
            ttlMs: r.ttlMs,
            fenceTtlMs,
            queueLeaseMs,
            join: r.join ? '1' : '0',
            // One Redis orders its waiting writers by its own clock.
            arrival: '',
          })
    return toTryOutcome(reply)
  }

  async extend(keys: ReadWriteKeys, mode: ReadWriteMode, ownerId: string, ttlMs: number): Promise<boolean> {
    const script = mode === 'read' ? extendReadScript : extendWriteScript
    return (await this.#run(script, keys, { ownerId, ttlMs })) === 1
  }

  async release(keys: ReadWriteKeys, mode: ReadWriteMode, ownerId: string): Promise<boolean> {
    // Announced with the pub/sub in use (sharded on a Cluster that has it).
    const sharded = (await this.#pubsub.resolve()) === 'sharded'
    const script =
      mode === 'read'
        ? sharded
          ? shardedReleaseReadScript
          : releaseReadScript
        : sharded
          ? shardedReleaseWriteScript
          : releaseWriteScript
    return (await this.#run(script, keys, { ownerId })) === 1
  }

  async inspect(keys: ReadWriteKeys): Promise<RawInspection> {
    const { writerOwner: _, ...raw } = toRawInspection(await this.#run(inspectReadWriteScript, keys, {}))
    return raw
  }

  validMs(ttlMs: number): number {
    return ttlMs
  }

  #run<K extends keyof ReadWriteKeys, A extends string>(
    script: Script<K, A>,
    keys: ReadWriteKeys,
    args: { readonly [a in A]: string | number },
  ): Promise<unknown> {
    return script.run(this.#client, keys, args, { deadlines: this.#deadlines, ms: this.#o.commandTimeoutMs })
  }
}
