import type {
  AcquireOutcome,
  AcquireRequest,
  BackendListener,
  LockBackend,
  LockResource,
  ReleaseOutcome,
} from './backend.js'
import { AcquireCall, type AcquireCallHost } from './acquire-call.js'
import type { RedisConnection } from '../client/redis-client.js'
import { Connection } from './connection.js'
import { FenceTouches } from './fence-touches.js'
import { Reseeds } from './generations.js'
import { InFlightCalls } from './in-flight.js'
import { NotReplicatedError, waitForReplicas } from './replication.js'
import { PubSubMode, type PubSubKind } from './pubsub-mode.js'
import { Subscriber } from './subscriber.js'
import { DeadlineExceededError, type Deadlines, withinDeadline } from '../deadline.js'
import { asError } from '../errors.js'
import {
  handoffReleaseScript,
  leaveScript,
  shardedHandoffReleaseScript,
  shardedLeaveScript,
  toReleaseOutcome,
} from '../fair-queue/hand-on.js'
import { QueueMembership } from '../fair-queue/membership.js'
import { queuedAcquireScript } from '../fair-queue/queued-acquire.js'
import { inspectScript, toNodeInspection, type LockInspection } from '../family/inspect.js'
import { doneKey, resourceKeys } from '../keys.js'
import { checkResource, type PubSubOption } from '../options.js'
import { newOwnerId } from '../owner-id.js'
import { acquireScript, toAcquireReply } from '../scripts/acquire.js'
import type { Handling, Script } from '../scripts/define-script.js'
import { extendScript, isExtended } from '../scripts/extend.js'
import { raiseFenceScript, toRaised } from '../scripts/raise-fence.js'
import { markDoneScript, readDoneScript, toDoneToken } from '../scripts/mark-done.js'
import {
  isMarkerLost,
  markedAcquireScript,
  markedQueuedAcquireScript,
  markedRaiseFenceScript,
  NodeDataLostError,
} from '../scripts/node-marker.js'
import { FREED, MARKED, NOT_OURS, releaseScript } from '../scripts/release.js'

export type { RedisClient } from './connection.js'

/** What the single-node backend needs to know (the Locker's options, resolved). */
export interface RedisBackendOptions {
  readonly prefix: string
  readonly commandTimeoutMs: number
  readonly fenceTtlMs: number
  readonly handoffMs: number
  /** A queued locker that stops trying is dropped from a resource's queue after this long. */
  readonly queueLeaseMs: number
  /**
   * The locker's id in queues and release messages; default a fresh one. Quorum mode gives every
   * node's backend the same, so a locker has one place in each node's queue.
   */
  readonly lockerId?: string
  /**
   * Quorum mode with the restart guard on: the node marker's key (scripts/node-marker.ts), kept
   * with each resource's key names; a grant sent with an epoch checks it.
   */
  readonly nodeMarkerKey?: string
  /**
   * Quorum mode with the restart guard on: a lean grant refreshes the token counter's expiry only
   * when its last refresh by this backend is more than this long ago (backend/fence-touches.ts);
   * `fenceTtlMs` then includes it. Undefined: every grant refreshes it.
   */
  readonly fenceSlackMs?: number
  /** Replicas that must acknowledge a grant or renewal (`WAIT`), 0 for none; and WAIT's timeout. */
  readonly replicas?: number
  readonly replicasTimeoutMs?: number
  /** Classic or sharded pub/sub for release messages (a Cluster; backend/pubsub-mode.ts). Default classic. */
  readonly pubsub?: PubSubOption
}

/** How quorum mode sends an acquire to one node (see {@link RedisBackend.acquireAs}). */
export interface AcquireAs {
  /** One owner id on every node. */
  readonly ownerId: string
  /** Nothing is worth waiting for past the validity: the call is given up after this long at most. */
  readonly maxMs: number
  /** Where our locker stands in the queue, and after a grant in `stay` mode (the same on every node). */
  readonly ticket: string
  readonly stayTicket: string
}

/** A resource's key names with the node marker's (quorum mode, the restart guard on). */
type MarkedKeys = LockResource['keys'] & { readonly marker: string }

/** Resources whose key names a backend keeps built (then it starts over). */
const KEY_CACHE_SIZE = 1_024

/**
 * The single-node backend: one client through its adapter (client/redis-client.ts: ioredis or
 * iovalkey — a `Redis`, or a `Cluster`, where every key of a resource is in one slot — or
 * node-redis), the scripts, and the concerns around them, each in a module of its own: the
 * connection's state (connection.ts), reseeding after a reconnection (generations.ts),
 * our locker's membership in the queues in Redis (fair-queue/membership.ts), the pub/sub
 * connection (subscriber.ts) and the calls in flight (in-flight.ts).
 *
 * When the outcome of an acquire is unknown (timeout, dropped connection) a compare-and-delete of
 * the owner id is sent behind it: commands keep their order on a connection, so if the acquire
 * lands late, the delete lands right after it. Should the late acquire still come back granted
 * (its NOSCRIPT fallback, say, went out after that delete), the delete is sent again then: a grant
 * nobody waits for never stays held.
 */
export class RedisBackend implements LockBackend, AcquireCallHost {
  readonly lockerId: string
  readonly connection: Connection
  readonly #client: RedisConnection
  readonly #deadlines: Deadlines
  readonly #options: RedisBackendOptions
  readonly #keyCache = new Map<string, LockResource>()
  readonly #reseeds = new Reseeds()
  readonly #membership: QueueMembership
  readonly #subscriber: Subscriber
  readonly #pubsub: PubSubMode
  readonly #inFlight = new InFlightCalls()
  /** Smoothed round trip of acquire attempts (TCP's estimator), 0 until the first answer. */
  #srttMs = 0
  /** Replicas that must acknowledge a grant or renewal (the `replicas` option). */
  readonly #replicas: number
  /** When our grants last refreshed each counter (quorum mode, the restart guard on), else undefined. */
  readonly #touches: FenceTouches | undefined

  /**
   * @param client the adapted client, used for every call; the user's client is never closed by the backend.
   * @param listener gets the release messages of subscribed resources.
   */
  constructor(client: RedisConnection, options: RedisBackendOptions, deadlines: Deadlines, listener: BackendListener) {
    this.#client = client
    this.#options = options
    this.#deadlines = deadlines
    // Names this locker in release messages and queues. Not a secret: it grants nothing.
    this.lockerId = options.lockerId ?? newOwnerId().slice(0, 16)
    // A try in flight when the connection closes fails at once: ioredis would only send it again
    // after the reconnection (its late reply is then cleaned up, see late()).
    this.connection = new Connection(client, () =>
      deadlines.failGroup(this.connection, () => this.connection.downError()),
    )
    this.#membership = new QueueMembership((resource) => this.#sendLeave(resource))
    this.#pubsub = new PubSubMode(client, options.pubsub ?? 'classic', options.commandTimeoutMs)
    this.#subscriber = new Subscriber(client, options.prefix, this.lockerId, listener, this.#pubsub)
    this.#replicas = options.replicas ?? 0
    this.#touches = options.fenceSlackMs === undefined ? undefined : new FenceTouches(options.fenceSlackMs)
  }

  /**
   * Checks `name` and returns it with its key names. A name found in the cache was checked when
   * it went in (the check depends on the string alone), and nothing but a string is found there.
   */
  resource(name: string): LockResource {
    let r = this.#keyCache.get(name)
    if (r === undefined) {
      checkResource(name)
      if (this.#keyCache.size >= KEY_CACHE_SIZE) this.#keyCache.clear()
      const keys = resourceKeys(this.#options.prefix, name)
      const marker = this.#options.nodeMarkerKey
      const marked: MarkedKeys | undefined = marker === undefined ? undefined : { ...keys, marker }
      r = { name, keys: marked ?? keys }
      this.#keyCache.set(name, r)
    }
    return r
  }

  acquire(resource: LockResource, request: AcquireRequest): Promise<AcquireOutcome> {
    return this.acquireAs(resource, request, undefined)
  }

  /**
   * {@link acquire}, as quorum mode sends it to one node: with its owner id, its longest wait and
   * its tickets (default: a fresh owner id, no bound, the server's clock as the ticket).
   *
   * A try is not sent while the connection is known to be down (it would wait in the offline
   * queue); one in flight when the connection closes fails at once (ioredis sends it again after
   * the reconnection: what it brings then is cleaned up, see late()). Either fails with the
   * client's last connection error as its cause.
   *
   * `epoch` (quorum mode, the restart guard on): the grant checks the node marker holds it, and
   * fails with {@link NodeDataLostError} otherwise (the resource must come from {@link resource}
   * with `nodeMarkerKey` set).
   */
  acquireAs(
    resource: LockResource,
    request: AcquireRequest,
    as: AcquireAs | undefined,
    epoch?: string,
  ): Promise<AcquireOutcome> {
    const connection = this.connection
    // Listening from the first acquire on: before it there is no grant a failover could repeat
    // (and a Locker's constructor does nothing with the client).
    connection.watch()
    if (connection.down) return Promise.resolve({ granted: false, error: connection.downError(), cut: false })
    const timeout = this.#options.commandTimeoutMs
    // The caller's wait bounds how long we wait for a held lock, not how far away Redis may be:
    // the first attempt of an acquire always gets its round trip, a few smoothed round trips
    // once we have measured them, or the whole commandTimeoutMs before that. A try with no wait
    // at all (waitMs 0, tryAcquire) gets commandTimeoutMs. Later attempts end with the wait; if
    // one is cut short, the held lock seen before decides.
    const floor = request.first ? (this.#srttMs === 0 ? timeout : 3 * this.#srttMs + 2) : 1
    const waitUntil = request.waitUntil
    const ms = Math.min(
      as?.maxMs ?? Number.POSITIVE_INFINITY,
      waitUntil === undefined ? timeout : Math.min(timeout, Math.max(floor, waitUntil - request.sentAt)),
    )
    const mode = request.queue
    const generation = connection.generation
    const reseed = this.#client.reroutesSilently === true || this.#reseeds.needed(resource.name, generation) ? '1' : '0'
    const touches = this.#touches
    // Only the lean marked script may skip the refresh; a reseed or a queued try refreshes anyway.
    const touch =
      mode !== 'none' || reseed === '1' || touches === undefined || touches.due(resource.name, request.sentAt, ms)
        ? '1'
        : '0'
    const call = new AcquireCall(this, {
      resource,
      ownerId: as?.ownerId ?? newOwnerId(),
      ttlMs: request.ttlMs,
      ms,
      sentAt: request.sentAt,
      mode,
      fenceTtlMs: this.#options.fenceTtlMs,
      lockerId: this.lockerId,
      leaseMs: this.#options.queueLeaseMs,
      reseed,
      generation,
      leavesBefore: this.#membership.sending(resource, mode),
      ticket: as?.ticket ?? '',
      stayTicket: as?.stayTicket ?? '',
      epoch: epoch ?? '',
      touch,
      deadlines: this.#deadlines,
      inFlight: this.#inFlight,
      group: connection,
    })
    if (epoch !== undefined) {
      const keys = resource.keys as MarkedKeys
      if (mode === 'none') return markedAcquireScript.run(this.#client, keys, call, call)
      return markedQueuedAcquireScript.run(this.#client, keys, call, call)
    }
    if (mode === 'none') return acquireScript.run(this.#client, resource.keys, call, call)
    return queuedAcquireScript.run(this.#client, resource.keys, call, call)
  }

  /** The reply of an attempt that answered in time (AcquireCallHost). */
  answered(call: AcquireCall, raw: unknown): AcquireOutcome | Promise<AcquireOutcome> {
    const now = performance.now()
    const rtt = now - call.sentAt
    this.#srttMs = this.#srttMs === 0 ? rtt : 0.875 * this.#srttMs + 0.125 * rtt
    if (call.epoch !== '' && isMarkerLost(raw)) {
      // Nothing was written; a queued try did not join the queue (a leave would be harmless).
      return { granted: false, error: new NodeDataLostError(), cut: false }
    }
    const reply = toAcquireReply(raw)
    this.#membership.replied(
      call.resource,
      call.mode,
      call.leavesBefore,
      reply.granted,
      reply.granted && reply.handedOver,
    )
    if (!reply.granted) return reply
    if (call.reseed === '0' && call.generation !== this.connection.generation) {
      // The connection changed while this try was in flight: ioredis may have sent it again to
      // a new primary, where INCR alone can mint a token already handed out. Give the grant back;
      // the next try mints from the clock.
      this.#cleanUp(call)
      return {
        granted: false,
        error: new Error('the connection to Redis changed while the acquire was in flight; the grant was given back'),
        cut: false,
      }
    }
    const validUntil = call.sentAt + call.ttlMs
    if (now >= validUntil) {
      // The lease ran out before its grant arrived (a tiny TTL on a slow round trip): a lock
      // that is no longer ours on arrival is not returned as held.
      this.#cleanUp(call)
      return {
        granted: false,
        error: new Error(`the grant arrived after its lease of ${call.ttlMs} ms had run out; it was given back`),
        cut: false,
      }
    }
    // The lean marked script refreshed the counter when told to (the queued one always does).
    if (call.touch === '1' && this.#touches !== undefined) this.#touches.touched(call.resource.name, call.sentAt)
    const grant: AcquireOutcome = {
      granted: true,
      ownerId: call.ownerId,
      token: reply.token,
      validUntil,
      handedOver: reply.handedOver,
    }
    if (this.#replicas > 0) return this.#replicated(call, grant, validUntil)
    if (call.reseed === '1') this.#reseeds.done(call.resource.name, call.generation)
    return grant
  }

  /**
   * The `replicas` option: the grant counts once that many replicas acknowledged it (`WAIT` on
   * the connection that ran the script, the key and its token counter included), on the same
   * connection as it was sent (a new one has written nothing, and its WAIT answers at once), and
   * within the lease. Otherwise it is given back.
   */
  #replicated(call: AcquireCall, grant: AcquireOutcome, validUntil: number): Promise<AcquireOutcome> {
    const wanted = this.#replicas
    const timeoutMs = this.#options.replicasTimeoutMs ?? 500
    this.#inFlight.begin()
    const refuse = (error: Error): AcquireOutcome => {
      this.#cleanUp(call)
      return { granted: false, error, cut: false }
    }
    return waitForReplicas(this.#client, call.resource.keys.lock, wanted, timeoutMs, this.#deadlines)
      .then(
        ({ acknowledged, connected }): AcquireOutcome => {
          if (call.generation !== this.connection.generation)
            return refuse(new NotReplicatedError(wanted, 0, 'on the connection of the grant (it changed)'))
          if (acknowledged < wanted)
            return refuse(new NotReplicatedError(wanted, acknowledged, `within ${timeoutMs} ms`, connected))
          if (performance.now() >= validUntil)
            return refuse(
              new Error(
                `the grant's lease of ${call.ttlMs} ms ran out while its replicas acknowledged it; it was given back`,
              ),
            )
          if (call.reseed === '1') this.#reseeds.done(call.resource.name, call.generation)
          return grant
        },
        (error: unknown) => refuse(asError(error)),
      )
      .finally(() => this.#inFlight.end())
  }

  /** An attempt that failed, or missed its deadline: its outcome is unknown (AcquireCallHost). */
  failed(call: AcquireCall, error: unknown): AcquireOutcome {
    this.#cleanUp(call)
    const e = asError(error)
    return {
      granted: false,
      error: e,
      cut: error instanceof DeadlineExceededError && call.ms < this.#options.commandTimeoutMs,
    }
  }

  /** The reply of an attempt that answered after its deadline: a grant is given back (AcquireCallHost). */
  late(call: AcquireCall, raw: unknown): void {
    let reply
    try {
      reply = toAcquireReply(raw)
    } catch {
      return
    }
    this.#membership.replied(
      call.resource,
      call.mode,
      call.leavesBefore,
      reply.granted,
      reply.granted && reply.handedOver,
    )
    if (reply.granted) this.#cleanUp(call)
  }

  /** Compare-and-delete of the call's owner id (handing a marked key on), answered whenever. */
  #cleanUp(call: AcquireCall): void {
    const handling: Handling<ReleaseOutcome> = {
      inFlight: this.#inFlight,
      map: (reply: unknown) => (reply === MARKED ? this.handOn(call.resource, call.ownerId, false) : NOT_OURS),
    }
    releaseScript.run(this.#client, call.resource.keys, { ownerId: call.ownerId }, handling).catch(() => {})
  }

  extend(resource: LockResource, ownerId: string, ttlMs: number, timeoutMs: number): Promise<number | undefined> {
    const sentAt = performance.now()
    const generation = this.connection.generation
    return extendScript.run(
      this.#client,
      resource.keys,
      { ownerId, ttlMs },
      {
        deadlines: this.#deadlines,
        ms: timeoutMs,
        sentAt,
        inFlight: this.#inFlight,
        map: (reply: unknown) => {
          if (!isExtended(reply)) return undefined
          if (this.#replicas === 0) return sentAt + ttlMs
          // A renewal counts once the replicas acknowledged it too (see #replicated).
          const wanted = this.#replicas
          const waitMs = this.#options.replicasTimeoutMs ?? 500
          return waitForReplicas(this.#client, resource.keys.lock, wanted, waitMs, this.#deadlines).then(
            ({ acknowledged, connected }) => {
              if (generation !== this.connection.generation)
                throw new NotReplicatedError(wanted, 0, 'on the connection of the renewal (it changed)')
              if (acknowledged < wanted)
                throw new NotReplicatedError(wanted, acknowledged, `within ${waitMs} ms`, connected)
              return sentAt + ttlMs
            },
          )
        },
      },
    )
  }

  /**
   * Quorum mode's second phase on this node: raises the resource's token counter to `token`
   * (scripts/raise-fence.ts), within `timeoutMs`. Resolves once the counter is at `token` or above.
   * `epoch` (the restart guard on): a missing counter is created only while the node marker holds
   * it (scripts/node-marker.ts).
   * @throws on a failed call or a missed deadline; {@link NodeDataLostError} when the marker was gone.
   */
  raiseFence(resource: LockResource, token: bigint, timeoutMs: number, epoch?: string): Promise<void> {
    const handling = { deadlines: this.#deadlines, ms: timeoutMs, inFlight: this.#inFlight, map: toKnown }
    if (epoch !== undefined) {
      const args = { token: token.toString(), fenceTtlMs: this.#options.fenceTtlMs, epoch }
      return markedRaiseFenceScript.run(this.#client, resource.keys as MarkedKeys, args, handling)
    }
    const args = { token: token.toString(), fenceTtlMs: this.#options.fenceTtlMs }
    return raiseFenceScript.run(this.#client, resource.keys, args, handling)
  }

  /** Smoothed round trip of this backend's acquire attempts, ms; 0 until one answered. */
  get srttMs(): number {
    return this.#srttMs
  }

  release(resource: LockResource, ownerId: string, handOnAtOnce = false): Promise<ReleaseOutcome> {
    if (handOnAtOnce) return this.handOn(resource, ownerId, true)
    const call = new ReleaseCall(
      this,
      resource,
      ownerId,
      this.#deadlines,
      this.#options.commandTimeoutMs,
      this.#inFlight,
    )
    return releaseScript.run(this.#client, resource.keys, call, call)
  }

  /**
   * The release of a marked key: hands the lock to the queue's head, or frees it, announced with
   * the pub/sub in use (asked of the server first, once, with `pubsub: 'auto'` on a Cluster).
   */
  handOn(resource: LockResource, ownerId: string, withDeadline: boolean): Promise<ReleaseOutcome> {
    const kind = this.#pubsub.resolve()
    if (typeof kind === 'string') return this.#handOn(kind, resource, ownerId, withDeadline)
    return kind.then((k) => this.#handOn(k, resource, ownerId, withDeadline))
  }

  #handOn(kind: PubSubKind, resource: LockResource, ownerId: string, withDeadline: boolean): Promise<ReleaseOutcome> {
    const args = {
      ownerId,
      channel: resource.keys.channel,
      lockerId: this.lockerId,
      handoffMs: this.#options.handoffMs,
    }
    const handling: Handling<ReleaseOutcome> = withDeadline
      ? {
          deadlines: this.#deadlines,
          ms: this.#options.commandTimeoutMs,
          inFlight: this.#inFlight,
          map: toReleaseOutcome,
        }
      : { inFlight: this.#inFlight, map: toReleaseOutcome }
    const script = kind === 'sharded' ? shardedHandoffReleaseScript : handoffReleaseScript
    return script.run(this.#client, resource.keys, args, handling)
  }

  leave(resource: LockResource): void {
    this.#membership.leave(resource)
  }

  #sendLeave(resource: LockResource): Promise<ReleaseOutcome> {
    const kind = this.#pubsub.resolve()
    if (typeof kind === 'string') return this.#leave(kind, resource)
    return kind.then((k) => this.#leave(k, resource))
  }

  #leave(kind: PubSubKind, resource: LockResource): Promise<ReleaseOutcome> {
    const args = { channel: resource.keys.channel, lockerId: this.lockerId, handoffMs: this.#options.handoffMs }
    const handling = {
      deadlines: this.#deadlines,
      ms: this.#options.commandTimeoutMs,
      inFlight: this.#inFlight,
      map: toReleaseOutcome,
    }
    const script = kind === 'sharded' ? shardedLeaveScript : leaveScript
    return script.run(this.#client, resource.keys, args, handling)
  }

  subscribe(resource: LockResource): Promise<void> {
    return this.#deadlines
      .race(this.#subscriber.subscribe(resource.keys.channel), this.#options.commandTimeoutMs)
      .then(() => {})
  }

  unsubscribe(resource: LockResource): void {
    this.#subscriber.unsubscribe(resource.keys.channel)
  }

  inspect(resource: LockResource): Promise<LockInspection> {
    return inspectScript.run(
      this.#client,
      resource.keys,
      {},
      {
        deadlines: this.#deadlines,
        ms: this.#options.commandTimeoutMs,
        inFlight: this.#inFlight,
        map: (reply: unknown): LockInspection => ({ resource: resource.name, ...toNodeInspection(reply) }),
      },
    )
  }

  markDone(resource: LockResource, ownerId: string, token: bigint, ttlMs: number): Promise<boolean> {
    const keys = { lock: resource.keys.lock, done: doneKey(this.#options.prefix, resource.name) }
    return markDoneScript.run(
      this.#client,
      keys,
      { ownerId, token: token.toString(), ttlMs },
      {
        deadlines: this.#deadlines,
        ms: this.#options.commandTimeoutMs,
        inFlight: this.#inFlight,
        map: (reply: unknown) => reply === 1,
      },
    )
  }

  /**
   * One script of a module built on this node's calls (the read-write lock in quorum mode,
   * quorum/quorum-read-write.ts), with this backend's deadlines (`ms`) and counted in its calls
   * in flight, so that closing waits for it as for the lock's own.
   */
  run<K extends string, A extends string>(
    script: Script<K, A>,
    keys: { readonly [k in K]: string },
    args: { readonly [a in A]: string | number },
    ms: number,
  ): Promise<unknown> {
    return script.run(this.#client, keys, args, { deadlines: this.#deadlines, ms, inFlight: this.#inFlight })
  }

  readDone(resource: LockResource): Promise<bigint | undefined> {
    return readDoneScript.run(
      this.#client,
      { done: doneKey(this.#options.prefix, resource.name) },
      {},
      { deadlines: this.#deadlines, ms: this.#options.commandTimeoutMs, inFlight: this.#inFlight, map: toDoneToken },
    )
  }

  /** Calls sent and not yet answered (tries, clean-ups, releases, leaves). */
  get inFlight(): number {
    return this.#inFlight.count
  }

  connectionDown(): Error | undefined {
    return this.connection.unreachable ? this.connection.downError() : undefined
  }

  async close(until: number = performance.now() + this.#options.commandTimeoutMs): Promise<void> {
    // The leaves have their own deadlines (commandTimeoutMs from their send); the close does not
    // wait past `until` for them, nor for anything else still on the wire.
    await withinDeadline(this.#membership.leaveAll(), until)
    await this.#inFlight.idle(until - performance.now())
    this.connection.unwatch()
    this.#subscriber.close()
  }
}

/**
 * A release's first step, the lean script (its arguments and its handling in one object, no
 * closure per call); the hand-off follows when the key was marked.
 */
class ReleaseCall implements Handling<ReleaseOutcome> {
  constructor(
    readonly backend: RedisBackend,
    readonly resource: LockResource,
    readonly ownerId: string,
    readonly deadlines: Deadlines,
    readonly ms: number,
    readonly inFlight: InFlightCalls,
  ) {}

  map(reply: unknown): ReleaseOutcome | Promise<ReleaseOutcome> {
    if (reply === MARKED) return this.backend.handOn(this.resource, this.ownerId, true)
    return reply === 1 ? FREED : NOT_OURS
  }

  /** A release that answered late was still ours to finish: a marked key is handed on now. */
  onLate(reply: unknown): void {
    if (reply === MARKED) this.backend.handOn(this.resource, this.ownerId, false).catch(() => {})
  }
}

/** Raised or already there: either way the node knows the token (a bad reply throws). */
function toKnown(reply: unknown): void {
  if (isMarkerLost(reply)) throw new NodeDataLostError()
  toRaised(reply)
}
