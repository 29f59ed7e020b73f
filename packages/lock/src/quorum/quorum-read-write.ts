/**
 * The read-write lock in quorum mode: the same scripts as on one Redis (scripts/read-write.ts) on
 * every node at once, counted by majority, as quorum-backend.ts counts a lock's.
 *
 * - A read or a write is granted when a majority of the nodes granted it within its validity
 *   (`ttlMs` less the clock drift, from when the try was sent); otherwise what the nodes granted is
 *   given back. Two majorities share a node, and a node never grants a read while a writer holds
 *   or a write while a reader or a writer holds: so no reader overlaps a writer's valid lease and
 *   no two writers overlap — as long as the nodes keep what they granted, which the restart guard
 *   (restart-guard.ts: a restarted node sits out for the longest lease, a node whose marker is gone
 *   grants nothing) sees to, as for the locks. Every read and write checks the node's marker.
 * - Waiting writers: each node keeps its own line, in the order of each writer's first try (the
 *   same number sent to every node: `arrival`, ties by owner id), so the nodes agree on who is
 *   first and a majority of them grant that writer. A write short of a majority gives back its
 *   grants but keeps its places in the lines; its next try puts it back where it was.
 * - Tokens: a grant's token is the largest any granting node replied with, made known to a
 *   majority before the hold is returned (learn-token.ts's second phase, on the read-write lock's
 *   counter). A write's majority then shares a node with every earlier grant's majority, so its
 *   token is above every earlier write's and read's. A read's token is at least the last write's
 *   granted before it, and below every later write's.
 * - Renewals: on a majority, within the validity. Releases: every reachable node; a grant a node
 *   answers after its hold was released is given back then.
 */
import type { RedisConnection } from '../client/redis-client.js'
import { asError } from '../errors.js'
import type { ReadWriteEngine, RawInspection, TryOutcome, TryRequest } from '../family/read-write-engine.js'
import { toRawInspection, toTryOutcome } from '../family/read-write-engine.js'
import type { ReadWriteMode } from '../family/read-write-hold.js'
import type { Wakes } from '../family/read-write.js'
import { ReadWriteWakes } from '../family/read-write-wakes.js'
import type { ReadWriteKeys } from '../keys.js'
import { PubSubMode } from '../backend/pubsub-mode.js'
import {
  isMarkerLost,
  markedRaiseFenceScript,
  markedReadScript,
  markedWriteScript,
  NodeDataLostError,
} from '../scripts/node-marker.js'
import { raiseFenceScript } from '../scripts/raise-fence.js'
import {
  extendReadScript,
  extendWriteScript,
  inspectReadWriteScript,
  readScript,
  releaseReadScript,
  releaseWriteScript,
  writeScript,
} from '../scripts/read-write.js'
import { largestToken, raiseToMajority, type NodeGrant } from './learn-token.js'
import { clockDriftMs, notAsked, type QuorumBackend, type QuorumParts } from './quorum-backend.js'
import type { QuorumNode } from './quorum-node.js'
import { nodesFailed, onNode, Tally } from './tally.js'

/** The options the engine takes of the Locker's. */
export interface QuorumReadWriteOptions {
  readonly commandTimeoutMs: number
  readonly fenceTtlMs: number
  /** How long a waiting writer keeps its place without trying again. */
  readonly queueLeaseMs: number
}

/** One try in flight or held with nodes yet to answer: a grant they answer after its end is given back. */
interface Attempt {
  pending: number
  /** The try failed, or its hold was released: a late grant is given back. */
  over: boolean
}

/** The read-write lock's round trips over a quorum of nodes (see the top of this file). */
export class QuorumReadWrite implements ReadWriteEngine {
  readonly #backend: QuorumBackend
  readonly #parts: QuorumParts
  readonly #o: QuorumReadWriteOptions
  /** Tries with nodes yet to answer, by owner id. */
  readonly #attempts = new Map<string, Attempt>()

  /** @param backend a quorum backend of the read-write lock's own (its prefix, its restart guard). */
  constructor(backend: QuorumBackend, options: QuorumReadWriteOptions) {
    this.#backend = backend
    this.#parts = backend.parts
    this.#o = options
  }

  validMs(ttlMs: number): number {
    return ttlMs - clockDriftMs(ttlMs)
  }

  async try(keys: ReadWriteKeys, mode: ReadWriteMode, r: TryRequest): Promise<TryOutcome> {
    const { nodes, quorum, guard } = this.#parts
    guard.start()
    let taking = 0
    for (const node of nodes) if (node.grants) taking++
    // The first tries, or those right after a reconnection, wait for the nodes' checks (bounded).
    if (taking < quorum) await guard.untilChecked(this.#o.commandTimeoutMs)
    if (guard.misconfigured) throw guard.misconfigured
    const asked = nodes.filter((node) => node.grants)
    if (asked.length < quorum)
      throw nodesFailed('no majority of the nodes can be asked', notAsked(nodes, asked), nodes.length)
    const validMs = this.validMs(r.ttlMs)
    if (validMs <= 0) throw new Error(`a ttlMs of ${r.ttlMs} leaves no validity after the clock drift allowed for`)
    guard.beforeLease(asked, r.ttlMs)
    const sentAt = performance.now()
    const validUntil = sentAt + validMs
    const ms = Math.max(1, Math.min(this.#o.commandTimeoutMs, validMs))
    const attempt: Attempt = { pending: asked.length, over: false }
    this.#attempts.set(r.ownerId, attempt)
    const grants: NodeGrant[] = []
    let holderMs = -1
    // 'won' (the token is learned below), a refusal, or why no majority answered.
    const outcome = await new Promise<'won' | TryOutcome | Error>((resolve) => {
      const tally = new Tally(nodes.length, quorum, (won, t) => {
        if (won) return resolve('won')
        if (t.failed > nodes.length - quorum)
          resolve(nodesFailed('no majority of the nodes answered', t.errors, nodes.length))
        else resolve({ granted: false, holderMs })
      })
      for (const error of notAsked(nodes, asked)) tally.fail(error)
      for (const node of asked) {
        node.track(this.#tryOn(node, keys, mode, r, ms)).then(
          (reply) => {
            this.#answered(r.ownerId, attempt)
            if (isMarkerLost(reply)) {
              node.onDataLost?.()
              return tally.fail(onNode(node.index, new NodeDataLostError()))
            }
            const one = toTryOutcome(reply)
            if (one.granted) {
              if (attempt.over) return this.#giveBackOn(node, keys, mode, r.ownerId)
              grants.push({ node, token: one.token, handedOver: false })
              return tally.agree()
            }
            if (one.holderMs >= 0 && (holderMs < 0 || one.holderMs < holderMs)) holderMs = one.holderMs
            tally.refuse()
          },
          (error: unknown) => {
            this.#answered(r.ownerId, attempt)
            // The outcome on this node is unknown: whatever it did in our name is undone (behind
            // the try, on the same connection).
            this.#giveBackOn(node, keys, mode, r.ownerId)
            tally.fail(onNode(node.index, asError(error)))
          },
        )
      }
    })
    if (outcome !== 'won') {
      this.#fail(attempt, grants, keys, mode, r.ownerId)
      if (outcome instanceof Error) throw outcome
      return outcome
    }
    let token: bigint
    try {
      token = await this.#learn(
        keys,
        grants,
        Math.max(1, Math.min(this.#o.commandTimeoutMs, validUntil - performance.now())),
      )
    } catch (error) {
      this.#fail(attempt, grants, keys, mode, r.ownerId)
      throw error
    }
    if (performance.now() >= validUntil) {
      this.#fail(attempt, grants, keys, mode, r.ownerId)
      throw new Error(`the grant took longer than its validity (${Math.round(validMs)} ms: ttlMs less the clock drift)`)
    }
    return { granted: true, token }
  }

  extend(keys: ReadWriteKeys, mode: ReadWriteMode, ownerId: string, ttlMs: number): Promise<boolean> {
    const { nodes, quorum, guard } = this.#parts
    const n = nodes.length
    const asked = nodes.filter((node) => node.reachable)
    if (asked.length < quorum)
      return Promise.reject(nodesFailed('no majority of the nodes can be asked', notAsked(nodes, asked), n))
    guard.beforeLease(asked, ttlMs)
    const script = mode === 'read' ? extendReadScript : extendWriteScript
    return new Promise((resolve, reject) => {
      const tally = new Tally(n, quorum, (won, t) => {
        if (won) resolve(true)
        // A majority says the hold is not ours: it is lost, whatever the rest answer.
        else if (t.no > n - quorum) resolve(false)
        else reject(nodesFailed('the lease was not renewed on a majority', t.errors, n))
      })
      for (const error of notAsked(nodes, asked)) tally.fail(error)
      for (const node of asked)
        node.track(node.backend.run(script, keys, { ownerId, ttlMs }, this.#o.commandTimeoutMs)).then(
          (reply) => (reply === 1 ? tally.agree() : tally.refuse()),
          (error: unknown) => tally.fail(onNode(node.index, asError(error))),
        )
    })
  }

  release(keys: ReadWriteKeys, mode: ReadWriteMode, ownerId: string): Promise<boolean> {
    const { nodes, quorum } = this.#parts
    const n = nodes.length
    const attempt = this.#attempts.get(ownerId)
    if (attempt) attempt.over = true
    const asked = nodes.filter((node) => node.reachable)
    return new Promise((resolve, reject) => {
      const tally = new Tally(
        n,
        quorum,
        (won, t) => {
          if (won) resolve(true)
          else if (t.answered >= quorum) resolve(false)
          else reject(nodesFailed('the release could not be confirmed', t.errors, n))
        },
        { waitForAll: true },
      )
      for (const error of notAsked(nodes, asked)) tally.fail(error)
      for (const node of asked)
        node.track(this.#releaseOn(node, keys, mode, ownerId)).then(
          (reply) => (reply === 1 ? tally.agree() : tally.refuse()),
          (error: unknown) => tally.fail(onNode(node.index, asError(error))),
        )
    })
  }

  /**
   * Every node in parallel; the majority's view: a writer when a majority report the same one;
   * readers, waiting writers and the last token as many as a majority of the nodes report at least.
   */
  async inspect(keys: ReadWriteKeys): Promise<RawInspection> {
    const { nodes, quorum } = this.#parts
    const settled = await Promise.allSettled(
      nodes.map((node) => node.backend.run(inspectReadWriteScript, keys, {}, this.#o.commandTimeoutMs)),
    )
    const views: ReturnType<typeof toRawInspection>[] = []
    const errors: Error[] = []
    settled.forEach((s, i) => {
      if (s.status === 'fulfilled') views.push(toRawInspection(s.value))
      else errors.push(onNode(i, asError(s.reason)))
    })
    if (views.length < quorum) throw nodesFailed('no majority of the nodes answered', errors, nodes.length)
    // The q-th largest of the values: a majority of the nodes report it or more.
    const kth = <T extends number | bigint>(values: T[]): T | undefined =>
      values.sort((a, b) => (a > b ? -1 : a < b ? 1 : 0))[quorum - 1]
    // The writer: an owner holding on a majority. Each node keeps the token it minted, and the
    // largest is reported: at or above the hold's own (the largest of the majority that granted
    // it first; a node that answered later may have minted more, its counter ahead).
    const byOwner = new Map<string, { token: bigint; ttls: number[] }>()
    for (const v of views) {
      if (v.writerOwner === undefined || v.writerToken === undefined) continue
      const seen = byOwner.get(v.writerOwner) ?? { token: v.writerToken, ttls: [] }
      if (v.writerToken > seen.token) seen.token = v.writerToken
      seen.ttls.push(v.writerTtlMs ?? 0)
      byOwner.set(v.writerOwner, seen)
    }
    let writerToken: bigint | undefined
    let writerTtlMs: number | undefined
    for (const { token, ttls } of byOwner.values())
      if (ttls.length >= quorum) {
        writerToken = token
        writerTtlMs = kth(ttls)
      }
    return {
      writerToken,
      writerTtlMs,
      readers: kth(views.map((v) => v.readers)) ?? 0,
      waitingWriters: kth(views.map((v) => v.waitingWriters)) ?? 0,
      lastToken: kth(views.flatMap((v) => (v.lastToken === undefined ? [] : [v.lastToken]))),
    }
  }

  close(until?: number): Promise<void> {
    return this.#backend.close(until)
  }

  #tryOn(node: QuorumNode, keys: ReadWriteKeys, mode: ReadWriteMode, r: TryRequest, ms: number): Promise<unknown> {
    const { markerKey } = this.#parts
    const { fenceTtlMs, queueLeaseMs } = this.#o
    const epoch = node.epoch
    const read = { ownerId: r.ownerId, ttlMs: r.ttlMs, fenceTtlMs }
    const write = { ...read, queueLeaseMs, join: r.join ? '1' : '0', arrival: String(r.arrival) }
    if (markerKey !== undefined && epoch !== undefined) {
      const marked = { ...keys, marker: markerKey }
      return mode === 'read'
        ? node.backend.run(markedReadScript, marked, { ...read, epoch }, ms)
        : node.backend.run(markedWriteScript, marked, { ...write, epoch }, ms)
    }
    return mode === 'read'
      ? node.backend.run(readScript, keys, read, ms)
      : node.backend.run(writeScript, keys, write, ms)
  }

  #releaseOn(node: QuorumNode, keys: ReadWriteKeys, mode: ReadWriteMode, ownerId: string): Promise<unknown> {
    // Independent masters: classic pub/sub.
    const script = mode === 'read' ? releaseReadScript : releaseWriteScript
    return node.backend.run(script, keys, { ownerId }, this.#o.commandTimeoutMs)
  }

  #giveBackOn(node: QuorumNode, keys: ReadWriteKeys, mode: ReadWriteMode, ownerId: string): void {
    node.track(this.#releaseOn(node, keys, mode, ownerId)).catch(() => {})
  }

  /** A try that will not be held gives back what the nodes granted; late grants are given back as they come. */
  #fail(
    attempt: Attempt,
    grants: readonly NodeGrant[],
    keys: ReadWriteKeys,
    mode: ReadWriteMode,
    ownerId: string,
  ): void {
    attempt.over = true
    for (const g of grants) this.#giveBackOn(g.node, keys, mode, ownerId)
  }

  #answered(ownerId: string, attempt: Attempt): void {
    if (--attempt.pending === 0 && this.#attempts.get(ownerId) === attempt) this.#attempts.delete(ownerId)
  }

  /**
   * The grant's token: the largest the granting nodes replied with, known to a majority (their
   * counter at it or above) before it is returned (learn-token.ts, on the read-write counter).
   */
  #learn(keys: ReadWriteKeys, grants: readonly NodeGrant[], timeoutMs: number): Promise<bigint> {
    const { nodes, quorum, markerKey } = this.#parts
    const known = largestToken(grants)
    // Counters in step (the usual case): the granting majority replied with the token.
    if (known.knowing >= quorum) return Promise.resolve(known.token)
    const fenceTtlMs = this.#o.fenceTtlMs
    const raise = async (node: QuorumNode, token: bigint, ms: number): Promise<void> => {
      const epoch = node.epoch
      const args = { token: token.toString(), fenceTtlMs }
      const reply =
        markerKey !== undefined && epoch !== undefined
          ? await node.backend.run(
              markedRaiseFenceScript,
              { fence: keys.fence, marker: markerKey },
              { ...args, epoch },
              ms,
            )
          : await node.backend.run(raiseFenceScript, { fence: keys.fence }, args, ms)
      if (isMarkerLost(reply)) throw new NodeDataLostError()
    }
    return raiseToMajority(grants, known, nodes, quorum, timeoutMs, raise)
  }
}

/**
 * Blocked reads and writes in quorum mode hear of releases from every node: one pub/sub
 * connection per node (each opened when a read or write first waits), and a release message from
 * any of them wakes the waiters of the name.
 */
export class QuorumWakes implements Wakes {
  readonly #each: readonly ReadWriteWakes[]

  constructor(clients: readonly RedisConnection[], subscribeMs: number) {
    this.#each = clients.map(
      (client) => new ReadWriteWakes(client, subscribeMs, new PubSubMode(client, 'classic', subscribeMs)),
    )
  }

  /**
   * Watches on every node; resolves once a majority of them subscribed (or gave up waiting for it):
   * a release reaches a majority of the nodes, and a node that is down does not hold up the first
   * wait of every name by its subscribe's timeout.
   */
  watch(channel: string, wake: () => void): Promise<() => void> {
    const stops: (() => void)[] = []
    let stopped = false
    const unwatch = (): void => {
      stopped = true
      for (const stop of stops.splice(0)) stop()
    }
    const needed = Math.floor(this.#each.length / 2) + 1
    return new Promise((resolve) => {
      let settled = 0
      for (const w of this.#each)
        void w.watch(channel, wake).then((stop) => {
          // A node that subscribed after the waiter stopped watching is let go at once.
          if (stopped) stop()
          else stops.push(stop)
          if (++settled === needed) resolve(unwatch)
        })
    })
  }

  close(): void {
    for (const w of this.#each) w.close()
  }
}

/** The read-write engine and wakes of a quorum Locker. */
export function quorumReadWrite(
  backend: QuorumBackend,
  clients: readonly RedisConnection[],
  options: QuorumReadWriteOptions,
): { engine: QuorumReadWrite; wakes: QuorumWakes } {
  const wakes = new QuorumWakes(clients, options.commandTimeoutMs)
  return { engine: new QuorumReadWrite(backend, options), wakes }
}
