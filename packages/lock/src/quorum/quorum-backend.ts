/**
 * Quorum mode: one lock over N independent Redis masters (the Redlock algorithm), behind the
 * same {@link LockBackend} seam as a single Redis. Each node is driven by a single-node backend
 * of its own (backend/redis-backend.ts: the same scripts, formats, deadlines and late-reply
 * clean-up); this module counts their answers, each call through one {@link Tally}, in modules of
 * their own: the nodes' health (quorum-node.ts), the delayed restart (restart-guard.ts), the
 * second phase that makes a token known to a majority (learn-token.ts) and the places in the
 * queues (fair-queue/tickets.ts).
 *
 * - Acquire: the acquire script on every node at once, one owner id for all. A lock is granted
 *   when a majority granted within the validity: `ttlMs` less the clock drift
 *   ({@link clockDriftMs}), measured from when the first request was sent. Every node's call has
 *   its own deadline, and the attempt is decided as soon as the majority is won or lost, never
 *   by waiting for a node that does not answer. A lost attempt releases what it was granted.
 * - Tokens: the grant's token is the largest the granting nodes minted, known to a majority
 *   before the lock is returned (learn-token.ts).
 * - Extend on a majority, within the validity; release on every node.
 * - A node whose connection is down is not sent anything; a node that stopped answering is sent
 *   one call at a time until one answers (quorum-node.ts). So memory stays bounded and no call
 *   waits for a node that cannot answer, whatever the client options.
 */
import type {
  AcquireOutcome,
  AcquireRequest,
  BackendListener,
  LockBackend,
  LockResource,
  ReleaseOutcome,
} from '../backend/backend.js'
import { RedisBackend, type RedisBackendOptions } from '../backend/redis-backend.js'
import type { RedisConnection } from '../client/redis-client.js'
import { fenceSlackMs } from '../backend/fence-touches.js'
import type { Deadlines } from '../deadline.js'
import { asError } from '../errors.js'
import { Tickets } from '../fair-queue/tickets.js'
import { majorityView, type LockInspection, type NodeInspection } from '../family/inspect.js'
import { nodeMarkerKey } from '../keys.js'
import { newOwnerId } from '../owner-id.js'
import { NOT_OURS } from '../scripts/release.js'
import { QuorumAttempt, type AttemptHost, type LateGrants } from './quorum-attempt.js'
import { QuorumNode, type QuorumClock } from './quorum-node.js'
import { RestartGuard } from './restart-guard.js'
import { nodesFailed, onNode, Tally } from './tally.js'

/**
 * The clock drift a quorum lock's validity allows for, in ms: 1 % of the TTL plus 2 ms (the
 * nodes' clocks may run a little fast, and expiry is to the millisecond).
 */
export function clockDriftMs(ttlMs: number): number {
  return ttlMs * 0.01 + 2
}

/** The smallest majority of `n` nodes. */
export function majorityOf(n: number): number {
  return Math.floor(n / 2) + 1
}

/** What the quorum backend needs to know: the single-node options, and the delayed restart. */
export interface QuorumBackendOptions extends RedisBackendOptions {
  /** See LockerOptions: 0 turns the restart guard off; undefined: the longest lease recorded. */
  readonly nodeRestartDelayMs: number | undefined
}

/** What a module built on a quorum's nodes runs on (see {@link QuorumBackend.parts}). */
export interface QuorumParts {
  readonly nodes: readonly QuorumNode[]
  readonly quorum: number
  readonly guard: RestartGuard
  readonly markerKey: string | undefined
}

const NONE: readonly Error[] = Object.freeze([])

/** Why each node left out of `asked` was not asked (none on the common path: every node asked). */
export function notAsked(nodes: readonly QuorumNode[], asked: readonly QuorumNode[]): readonly Error[] {
  if (asked.length === nodes.length) return NONE
  return nodes
    .filter((node) => !asked.includes(node))
    .map((node) => new Error(`node ${node.index} was not asked: ${node.whyNotAsked()}`))
}

/** A new tally over every node, the ones not asked counted as failed up front. */
function tallyOf(
  nodes: readonly QuorumNode[],
  asked: readonly QuorumNode[],
  needed: number,
  onSettle: (won: boolean, tally: Tally) => void,
  waitForAll = false,
): Tally {
  const tally = new Tally(nodes.length, needed, onSettle, { waitForAll })
  for (const error of notAsked(nodes, asked)) tally.fail(error)
  return tally
}

/** The quorum backend: N single-node backends with one locker id, counted by majority. */
export class QuorumBackend implements LockBackend {
  readonly lockerId: string
  readonly #nodes: readonly QuorumNode[]
  readonly #quorum: number
  readonly #options: QuorumBackendOptions
  readonly #listener: BackendListener
  readonly #tickets = new Tickets()
  readonly #guard: RestartGuard
  /**
   * Locks granted while some node asked had not answered yet, by owner id: a grant that node
   * answers later is the lock's too, and is given back if the lock's release did not free it
   * there (quorum-attempt.ts). Dropped when every node answered.
   */
  readonly #lateGrants = new Map<string, LateGrants>()
  /** What every acquire attempt needs of this backend (quorum-attempt.ts). */
  readonly #attemptHost: AttemptHost

  /**
   * @param clients one adapted client per node (3 or more, of one kind, checked by the Locker); never closed here.
   * @param listener gets the release messages of every node.
   */
  constructor(
    clients: readonly RedisConnection[],
    options: QuorumBackendOptions,
    deadlines: Deadlines,
    listener: BackendListener,
  ) {
    // Names this locker in every node's queues and release messages. Not a secret.
    this.lockerId = options.lockerId ?? newOwnerId().slice(0, 16)
    const guarded = options.nodeRestartDelayMs !== 0
    // With the guard on, grants refresh a counter's expiry once per slack, not each time
    // (backend/fence-touches.ts): every write of a counter then sets it to live that much longer.
    const slackMs = fenceSlackMs(options.fenceTtlMs)
    const nodeOptions: RedisBackendOptions = {
      ...options,
      lockerId: this.lockerId,
      ...(guarded
        ? {
            nodeMarkerKey: nodeMarkerKey(options.prefix),
            fenceTtlMs: options.fenceTtlMs + slackMs,
            fenceSlackMs: slackMs,
          }
        : {}),
    }
    const clock: QuorumClock = { answeredAt: 0 }
    this.#listener = listener
    this.#nodes = clients.map(
      (client, i) => new QuorumNode(i, new RedisBackend(client, nodeOptions, deadlines, listener), client, clock),
    )
    this.#quorum = majorityOf(clients.length)
    this.#options = options
    this.#guard = new RestartGuard(this.#nodes, options, deadlines)
    this.#attemptHost = {
      nodes: this.#nodes,
      quorum: this.#quorum,
      commandTimeoutMs: options.commandTimeoutMs,
      lateGrants: this.#lateGrants,
      releaseOn: (node, resource, ownerId) => this.releaseOn(node, resource, ownerId),
      granted: (resource, request, sentAtWall) => this.#tickets.granted(resource.name, request.queue, sentAtWall),
    }
  }

  /**
   * @internal What the read-write lock's quorum engine runs on (quorum/quorum-read-write.ts): the
   * nodes, the majority, the restart guard, and the node marker's key (undefined with the guard off).
   */
  get parts(): QuorumParts {
    return {
      nodes: this.#nodes,
      quorum: this.#quorum,
      guard: this.#guard,
      markerKey: this.#guard.enabled ? nodeMarkerKey(this.#options.prefix) : undefined,
    }
  }

  /** The key names are the same on every node: the first node's cache serves them. */
  resource(name: string): LockResource {
    return this.#nodes[0]!.backend.resource(name)
  }

  acquire(resource: LockResource, request: AcquireRequest): Promise<AcquireOutcome> {
    const guard = this.#guard
    guard.start()
    const nodes = this.#nodes
    let taking = 0
    for (const node of nodes) if (node.grants) taking++
    // The first acquires, or those right after a reconnection, wait for the nodes' checks: at
    // most a round trip's deadline (a stalled node's check ends by it), and not past the wait.
    if (taking < this.#quorum) {
      const timeout = this.#options.commandTimeoutMs
      const ms =
        request.waitUntil === undefined
          ? timeout
          : Math.max(1, Math.min(timeout, request.waitUntil - performance.now()))
      // The validity runs from when the requests go out, after the wait.
      return guard.untilChecked(ms).then(() => this.#acquire(resource, { ...request, sentAt: performance.now() }))
    }
    return this.#acquire(resource, request)
  }

  #acquire(resource: LockResource, request: AcquireRequest): Promise<AcquireOutcome> {
    if (this.#guard.misconfigured)
      return Promise.resolve({ granted: false, error: this.#guard.misconfigured, cut: false })
    const nodes = this.#nodes
    const validMs = request.ttlMs - clockDriftMs(request.ttlMs)
    const asked = nodes.filter((node) => node.grants)
    if (asked.length < this.#quorum) {
      const error = nodesFailed('no majority of the nodes can be asked', notAsked(nodes, asked), nodes.length)
      return Promise.resolve({ granted: false, error, cut: false })
    }
    if (validMs <= 0) {
      const error = new Error(`a ttlMs of ${request.ttlMs} leaves no validity after the clock drift allowed for`)
      return Promise.resolve({ granted: false, error, cut: false })
    }
    const ownerId = newOwnerId()
    const sentAtWall = Date.now()
    const { ticket, stayTicket } = this.#tickets.forTry(resource.name, request.queue, sentAtWall)
    // No node's answer is worth waiting for past the validity, nor past the caller's wait; but the
    // first attempt of an acquire gets its round trip (as on a single Redis), measured on the
    // nodes that have answered before: the others are never waited for longer than that, so a
    // dead node costs no more than the farthest live one.
    let srtt = 0
    for (const node of asked) if (node.backend.srttMs > srtt) srtt = node.backend.srttMs
    const floorMs = request.first ? (srtt === 0 ? this.#options.commandTimeoutMs : 3 * srtt + 2) : 1
    const waitMs = request.waitUntil === undefined ? Number.POSITIVE_INFINITY : request.waitUntil - request.sentAt
    const as = { ownerId, maxMs: Math.min(validMs, Math.max(floorMs, waitMs)), ticket, stayTicket }
    return new Promise<AcquireOutcome>((resolve) => {
      const init = { ownerId, validMs, sentAtWall, asked, notAsked: notAsked(nodes, asked) }
      const attempt = new QuorumAttempt(this.#attemptHost, resource, request, init, resolve)
      this.#guard.beforeLease(asked, request.ttlMs)
      for (const node of asked) node.acquire(node.backend.acquireAs(resource, request, as, node.epoch), attempt)
    })
  }

  /**
   * Gives back a grant we do not keep (short of a majority, too late, or after the lock's
   * release). The node hands the lock on to the head of its queue, which may be our own locker
   * (its ticket is the oldest): our
   * subscriptions do not deliver our own messages, so our waiters are told here, or they would
   * sit out the hand-off while a majority of the nodes keep it for us.
   */
  releaseOn(node: QuorumNode, resource: LockResource, ownerId: string): void {
    node.track(node.backend.release(resource, ownerId)).then(
      (outcome) => {
        if (outcome.freed && outcome.handedTo === this.lockerId)
          this.#listener.released(resource.name, this.lockerId, this.#options.handoffMs, undefined)
      },
      () => {},
    )
  }

  extend(resource: LockResource, ownerId: string, ttlMs: number, timeoutMs: number): Promise<number | undefined> {
    const sentAt = performance.now()
    const nodes = this.#nodes
    const n = nodes.length
    const q = this.#quorum
    const validUntil = sentAt + ttlMs - clockDriftMs(ttlMs)
    const asked = nodes.filter((node) => node.reachable)
    if (asked.length < q)
      return Promise.reject(nodesFailed('no majority of the nodes can be asked', notAsked(nodes, asked), n))
    return new Promise((resolve, reject) => {
      const tally = tallyOf(nodes, asked, q, (won, tally) => {
        if (won) resolve(validUntil)
        // A majority says the lock is not ours: it is lost, whatever the rest answer.
        else if (tally.no > n - q) resolve(undefined)
        else reject(nodesFailed('the lease was not renewed on a majority', tally.errors, n))
      })
      this.#guard.beforeLease(asked, ttlMs)
      for (const node of asked) {
        node.track(node.backend.extend(resource, ownerId, ttlMs, timeoutMs)).then(
          (valid) => (valid === undefined ? tally.refuse() : tally.agree()),
          (error: unknown) => tally.fail(onNode(node.index, asError(error))),
        )
      }
    })
  }

  /**
   * On every reachable node (a node whose connection is down, or that is failing, keeps our key
   * until its TTL runs out; a grant of ours that comes after this release without it freeing it
   * there is given back then, see `#lateGrants`). Freed when a majority freed it; otherwise not
   * ours, or unknown when fewer than a majority answered.
   */
  release(resource: LockResource, ownerId: string, handOnAtOnce = false): Promise<ReleaseOutcome> {
    const nodes = this.#nodes
    const n = nodes.length
    const q = this.#quorum
    const asked = nodes.filter((node) => node.reachable)
    const late = this.#lateGrants.get(ownerId)
    late?.releasing(asked)
    return new Promise((resolve, reject) => {
      const freed: ReleaseOutcome[] = []
      const tally = tallyOf(
        nodes,
        asked,
        q,
        (won, tally) => {
          if (won) resolve(combined(freed, this.lockerId))
          else if (tally.answered >= q) resolve(NOT_OURS)
          else reject(nodesFailed('the release could not be confirmed', tally.errors, n))
        },
        true,
      )
      for (const node of asked) {
        node.track(node.backend.release(resource, ownerId, handOnAtOnce)).then(
          (outcome) => {
            late?.releaseAnswered(node, outcome.freed)
            if (!outcome.freed) return tally.refuse()
            freed.push(outcome)
            tally.agree()
          },
          (error: unknown) => {
            late?.releaseAnswered(node, false)
            tally.fail(onNode(node.index, asError(error)))
          },
        )
      }
    })
  }

  leave(resource: LockResource): void {
    this.#tickets.forget(resource.name)
    for (const node of this.#nodes) node.backend.leave(resource)
  }

  /** Subscribes on every node that can be asked; resolves once a majority (or all asked) confirmed. */
  subscribe(resource: LockResource): Promise<void> {
    const asked = this.#nodes.filter((node) => node.reachable)
    if (asked.length === 0) return Promise.reject(new Error('no node can be asked'))
    return new Promise((resolve, reject) => {
      const tally = new Tally(asked.length, Math.min(this.#quorum, asked.length), (won, tally) => {
        if (won) resolve()
        else reject(nodesFailed('subscribe', tally.errors, this.#nodes.length))
      })
      for (const node of asked)
        node.backend.subscribe(resource).then(
          () => tally.agree(),
          (error: unknown) => tally.fail(onNode(node.index, asError(error))),
        )
    })
  }

  unsubscribe(resource: LockResource): void {
    for (const node of this.#nodes) node.backend.unsubscribe(resource)
  }

  /** Every node in parallel; the majority's view (family/inspect.ts) once all answered or gave up. */
  async inspect(resource: LockResource): Promise<LockInspection> {
    const settled = await Promise.allSettled(this.#nodes.map((node) => node.backend.inspect(resource)))
    const views = settled.map((s): NodeInspection | undefined => {
      if (s.status === 'rejected') return undefined
      const { resource: _, ...view } = s.value
      return view
    })
    const errors = settled.flatMap((s, i) => (s.status === 'rejected' ? [onNode(i, asError(s.reason))] : []))
    if (settled.length - errors.length < this.#quorum)
      throw nodesFailed('no majority of the nodes answered', errors, this.#nodes.length)
    return majorityView(resource.name, views, this.#quorum)
  }

  /** On every node that can be asked; recorded when a majority recorded it (run-once ticks). */
  markDone(resource: LockResource, ownerId: string, token: bigint, ttlMs: number): Promise<boolean> {
    const nodes = this.#nodes
    const n = nodes.length
    const asked = nodes.filter((node) => node.reachable)
    return new Promise((resolve, reject) => {
      const tally = tallyOf(nodes, asked, this.#quorum, (won, tally) => {
        if (won) resolve(true)
        else if (tally.answered >= this.#quorum) resolve(false)
        else reject(nodesFailed('the tick could not be recorded as done', tally.errors, n))
      })
      for (const node of asked)
        node.track(node.backend.markDone(resource, ownerId, token, ttlMs)).then(
          (recorded) => (recorded ? tally.agree() : tally.refuse()),
          (error: unknown) => tally.fail(asError(error)),
        )
    })
  }

  /** Every node; done when any of a majority of answers says so (a holder records on a majority). */
  async readDone(resource: LockResource): Promise<bigint | undefined> {
    const settled = await Promise.allSettled(this.#nodes.map((node) => node.backend.readDone(resource)))
    const errors = settled.flatMap((s) => (s.status === 'rejected' ? [asError(s.reason)] : []))
    if (settled.length - errors.length < this.#quorum)
      throw nodesFailed('no majority of the nodes answered', errors, this.#nodes.length)
    let done: bigint | undefined
    for (const s of settled)
      if (s.status === 'fulfilled' && s.value !== undefined && (done ?? -1n) < s.value) done = s.value
    return done
  }

  async close(until?: number): Promise<void> {
    this.#guard.stop()
    await Promise.allSettled(this.#nodes.map((node) => node.backend.close(until)))
  }
}

/**
 * What a release did across the nodes that freed the lock: handed to our own locker if any node
 * did (our waiters should try), freed for anyone if any node did, else handed to a locker.
 */
function combined(freed: readonly ReleaseOutcome[], self: string): ReleaseOutcome {
  let handedTo: string | undefined
  let sawFree = false
  for (const outcome of freed) {
    if (!outcome.freed) continue
    if (outcome.handedTo === self) return outcome
    if (outcome.handedTo === undefined) sawFree = true
    else handedTo ??= outcome.handedTo
  }
  return { freed: true, handedTo: sawFree ? undefined : handedTo }
}
