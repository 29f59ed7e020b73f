import type { Cluster, Redis } from 'ioredis'
import { queuedAcquireScript, acquireScript, toAcquireReply, type JoinMode } from './acquire-script.js'
import type { AcquireOutcome, AcquireRequest, BackendListener, LockBackend, LockResource, ReleaseOutcome } from './backend.js'
import { DeadlineExceededError, type Deadlines } from './deadline.js'
import { asError } from './errors.js'
import { isExtended, extendScript } from './extend-script.js'
import { parseReleaseMessage } from './formats.js'
import { resourceKeys, resourceOfChannel } from './keys.js'
import { checkResource } from './options.js'
import { newOwnerId } from './owner-id.js'
import { raiseFenceScript, toRaised } from './raise-fence-script.js'
import { FREED, handoffReleaseScript, leaveScript, MARKED, NOT_OURS, releaseScript, toReleaseOutcome } from './release-script.js'
import type { Handling } from './script.js'

/** The client a single-node backend runs on: an ioredis `Redis` or `Cluster`. */
export type RedisClient = Redis | Cluster

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
}

/**
 * Client events around which a failover may have happened: the connection closed, a
 * (re)connection, a cluster's node added or removed. A try built while disconnected (ioredis
 * queues it) belongs to the new generation already.
 */
const TOPOLOGY_EVENTS = ['close', 'ready', '+node', '-node'] as const

/** Resources whose key names a backend keeps built (then it starts over). */
const KEY_CACHE_SIZE = 1_024

/**
 * One acquire round trip: its arguments (the object is passed to the script as is), its
 * deadline, its reply, and its clean-up. One object per attempt; measured cheaper than closures.
 *
 * When the outcome is unknown (timeout, dropped connection) a compare-and-delete of the owner id
 * is sent behind it: commands keep their order on a connection, so if the acquire lands late, the
 * delete lands right after it. Should the late acquire still come back granted (its NOSCRIPT
 * fallback, say, went out after that delete), the delete is sent again then: a grant nobody
 * waits for never stays held.
 */
class AcquireCall implements Handling<AcquireOutcome> {
  readonly fenceTtlMs: number
  readonly lockerId: string
  readonly leaseMs: number
  /** '1': mint max(INCR, clock) — the first grant of the resource on this connection (see acquire-script.ts). */
  readonly reseed: '0' | '1'
  constructor(
    readonly backend: RedisBackend,
    readonly deadlines: Deadlines,
    readonly resource: LockResource,
    readonly ownerId: string,
    readonly ttlMs: number,
    readonly ms: number,
    readonly sentAt: number,
    readonly mode: JoinMode | 'none',
    options: RedisBackendOptions,
    /** How many leaves the backend had sent when this call was sent. */
    readonly leavesBefore: number,
    /** The backend's connection generation when this call was sent. */
    readonly generation: number,
    /** Whether it mints from the clock too: the resource's first grant in this generation. */
    reseedNeeded: boolean,
    /** Where our locker stands in the queue, and after a grant in `stay` mode (see queuedAcquireScript); '' for the server's clock. */
    readonly ticket: string,
    readonly stayTicket: string,
  ) {
    this.reseed = reseedNeeded ? '1' : '0'
    this.fenceTtlMs = options.fenceTtlMs
    this.lockerId = backend.lockerId
    this.leaseMs = options.queueLeaseMs
  }

  map(reply: unknown): AcquireOutcome {
    return this.backend.answered(this, reply)
  }

  mapError(error: unknown): AcquireOutcome {
    return this.backend.failed(this, error)
  }

  onLate(reply: unknown): void {
    this.backend.late(this, reply)
  }
}

/** A release's first step, the lean script; the hand-off follows when the key was marked. */
class ReleaseCall implements Handling<ReleaseOutcome> {
  constructor(
    readonly backend: RedisBackend,
    readonly deadlines: Deadlines,
    readonly ms: number,
    readonly resource: LockResource,
    readonly ownerId: string,
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

/**
 * The single-node backend: one ioredis client (a `Redis`, or a `Cluster`, where every key of a
 * resource is in one slot), the scripts, a subscriber connection (a duplicate of the client,
 * opened when an acquire first has to wait), and the membership of our locker in the resources'
 * queues in Redis.
 */
export class RedisBackend implements LockBackend {
  readonly lockerId: string
  readonly #client: RedisClient
  readonly #deadlines: Deadlines
  readonly #options: RedisBackendOptions
  readonly #listener: BackendListener
  readonly #keyCache = new Map<string, LockResource>()
  /**
   * Resources whose queue in Redis our locker may be in: set when a joining try is sent (its
   * outcome may stay unknown), cleared when a grant took us out or a leave was sent.
   */
  readonly #members = new Map<string, LockResource>()
  /** Leaves sent so far: tells a joining try whether a leave went out after it. */
  #leaves = 0
  #subscriber: RedisClient | undefined
  /**
   * Bumped whenever the client's connection closes or comes up and whenever a cluster's nodes
   * change: after a failover the counter may have gone back, so the first grant of each resource
   * in a new generation mints from the server clock too (`reseed`, acquire-script.ts).
   */
  #generation = 0
  /** Resource → the generation its last reseeding grant was made in. */
  readonly #seeded = new Map<string, number>()
  readonly #onTopology = (): void => {
    this.#generation++
  }
  #watching = false
  /** Smoothed round trip of acquire attempts (TCP's estimator), 0 until the first answer. */
  #srttMs = 0
  readonly #onClientEnd = (): void => this.#dropSubscriber()

  /**
   * @param client used for every call; never closed by the backend.
   * @param listener gets the release messages of subscribed resources.
   */
  constructor(client: RedisClient, options: RedisBackendOptions, deadlines: Deadlines, listener: BackendListener) {
    this.#client = client
    this.#options = options
    this.#deadlines = deadlines
    this.#listener = listener
    // Names this locker in release messages and queues. Not a secret: it grants nothing.
    this.lockerId = options.lockerId ?? newOwnerId().slice(0, 16)
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
      r = { name, keys: resourceKeys(this.#options.prefix, name) }
      this.#keyCache.set(name, r)
    }
    return r
  }

  acquire(resource: LockResource, request: AcquireRequest): Promise<AcquireOutcome> {
    return this.acquireAs(resource, request, newOwnerId())
  }

  /**
   * {@link acquire} writing `ownerId` (quorum mode writes one owner id on every node), its call
   * given up after `maxMs` at most (quorum mode: nothing is worth waiting for past the validity),
   * standing in the queue at `ticket`, and at `stayTicket` after a grant in `stay` mode (quorum
   * mode gives every node the same; default: the server's clock, the order of arrival).
   */
  acquireAs(resource: LockResource, request: AcquireRequest, ownerId: string, maxMs = Number.POSITIVE_INFINITY, ticket = '', stayTicket = ''): Promise<AcquireOutcome> {
    const timeout = this.#options.commandTimeoutMs
    // The caller's wait bounds how long we wait for a held lock, not how far away Redis may be:
    // the first attempt of an acquire always gets its round trip, a few smoothed round trips
    // once we have measured them, or the whole commandTimeoutMs before that (as waitMs 0 gets).
    // Later attempts end with the wait; if one is cut short, the held lock seen before decides.
    const floor = request.first ? (this.#srttMs === 0 ? timeout : 3 * this.#srttMs + 2) : 1
    const waitUntil = request.waitUntil
    const ms = Math.min(maxMs, waitUntil === undefined ? timeout : Math.min(timeout, Math.max(floor, waitUntil - request.sentAt)))
    const mode = request.queue
    // Listening from the first acquire on: before it there is no grant a failover could repeat
    // (and a Locker's constructor does nothing with the client).
    if (!this.#watching) {
      this.#watching = true
      // A client that emits no events (a wrapper with only the commands) cannot say it reconnected:
      // then every grant's counter is trusted as the first one was.
      if (typeof (this.#client as Partial<RedisClient>).on === 'function') for (const event of TOPOLOGY_EVENTS) this.#client.on(event, this.#onTopology)
    }
    const generation = this.#generation
    const reseed = this.#seeded.get(resource.name) !== generation
    const call = new AcquireCall(this, this.#deadlines, resource, ownerId, request.ttlMs, ms, request.sentAt, mode, this.#options, this.#leaves, generation, reseed, ticket, stayTicket)
    if (mode === 'none') return acquireScript.run(this.#client, resource.keys, call, call)
    this.#members.set(resource.name, resource)
    return queuedAcquireScript.run(this.#client, resource.keys, call, call)
  }

  /** @internal The reply of an attempt that answered in time. */
  answered(call: AcquireCall, raw: unknown): AcquireOutcome {
    const rtt = performance.now() - call.sentAt
    this.#srttMs = this.#srttMs === 0 ? rtt : 0.875 * this.#srttMs + 0.125 * rtt
    const reply = toAcquireReply(raw)
    this.#membership(call, reply.granted, reply.granted && reply.handedOver)
    if (!reply.granted) return reply
    if (call.reseed === '0' && call.generation !== this.#generation) {
      // The connection changed while this try was in flight: ioredis may have sent it again to
      // a new primary, where INCR alone can mint a token already handed out. Give the grant back;
      // the next try mints from the clock.
      this.#cleanUp(call)
      return { granted: false, error: new Error('the connection to Redis changed while the acquire was in flight; the grant was given back'), cut: false }
    }
    if (call.reseed === '1') {
      if (this.#seeded.size >= KEY_CACHE_SIZE) this.#seeded.clear()
      this.#seeded.set(call.resource.name, call.generation)
    }
    return { granted: true, ownerId: call.ownerId, token: reply.token, validUntil: call.sentAt + call.ttlMs, handedOver: reply.handedOver }
  }

  /** @internal An attempt that failed, or missed its deadline: its outcome is unknown. */
  failed(call: AcquireCall, error: unknown): AcquireOutcome {
    this.#cleanUp(call)
    const e = asError(error)
    return { granted: false, error: e, cut: error instanceof DeadlineExceededError && call.ms < this.#options.commandTimeoutMs }
  }

  /** @internal The reply of an attempt that answered after its deadline: a grant is given back. */
  late(call: AcquireCall, raw: unknown): void {
    let reply
    try {
      reply = toAcquireReply(raw)
    } catch {
      return
    }
    this.#membership(call, reply.granted, reply.granted && reply.handedOver)
    if (reply.granted) this.#cleanUp(call)
  }

  /** What a reply says about our place in the resource's queue. */
  #membership(call: AcquireCall, granted: boolean, handedOver: boolean): void {
    const { name } = call.resource
    if (granted) {
      // A hand-off popped us from the queue; a joining try that found the lock free left it;
      // `stay` kept our place.
      if (handedOver ? call.mode !== 'stay' : call.mode === 'join') this.#members.delete(name)
    } else if (call.mode !== 'none') {
      // The miss queued us. A leave sent after the try normally landed after it too; but a try
      // that fell back to EVAL (NOSCRIPT) lands after that leave and leaves us queued: leave again.
      if (this.#leaves === call.leavesBefore) this.#members.set(name, call.resource)
      else if (!this.#members.has(name)) this.#sendLeave(call.resource).catch(() => {})
    }
  }

  #cleanUp(call: AcquireCall): void {
    releaseScript
      .run(this.#client, call.resource.keys, { ownerId: call.ownerId }, { map: (reply: unknown) => (reply === MARKED ? this.handOn(call.resource, call.ownerId, false) : NOT_OURS) })
      .catch(() => {})
  }

  extend(resource: LockResource, ownerId: string, ttlMs: number, timeoutMs: number): Promise<number | undefined> {
    const sentAt = performance.now()
    return extendScript.run(this.#client, resource.keys, { ownerId, ttlMs }, {
      deadlines: this.#deadlines,
      ms: timeoutMs,
      sentAt,
      map: (reply: unknown) => (isExtended(reply) ? sentAt + ttlMs : undefined),
    })
  }

  /**
   * Quorum mode's second phase on this node: raises the resource's token counter to `token`
   * (raise-fence-script.ts), within `timeoutMs`. Resolves once the counter is at `token` or above.
   * @throws on a failed call or a missed deadline.
   */
  raiseFence(resource: LockResource, token: bigint, timeoutMs: number): Promise<void> {
    return raiseFenceScript.run(this.#client, resource.keys, { token: token.toString(), fenceTtlMs: this.#options.fenceTtlMs }, { deadlines: this.#deadlines, ms: timeoutMs, map: toKnown })
  }

  /** Smoothed round trip of this backend's acquire attempts, ms; 0 until one answered. */
  get srttMs(): number {
    return this.#srttMs
  }

  /**
   * True while the client says its connection is down (ioredis is reconnecting, or the client was
   * closed): a call now would only wait in its offline queue. False for a client that is
   * connecting for the first time, or lazily (a call is what makes it connect).
   */
  get disconnected(): boolean {
    const status = (this.#client as { status?: unknown }).status
    return status === 'reconnecting' || status === 'close' || status === 'end'
  }

  release(resource: LockResource, ownerId: string): Promise<ReleaseOutcome> {
    return releaseScript.run(this.#client, resource.keys, { ownerId }, new ReleaseCall(this, this.#deadlines, this.#options.commandTimeoutMs, resource, ownerId))
  }

  /** @internal The release of a marked key: hands the lock to the queue's head, or frees it. */
  handOn(resource: LockResource, ownerId: string, withDeadline: boolean): Promise<ReleaseOutcome> {
    const args = { ownerId, channel: resource.keys.channel, lockerId: this.lockerId, handoffMs: this.#options.handoffMs }
    const handling = withDeadline ? { deadlines: this.#deadlines, ms: this.#options.commandTimeoutMs, map: toReleaseOutcome } : PLAIN_RELEASE
    return handoffReleaseScript.run(this.#client, resource.keys, args, handling)
  }

  leave(resource: LockResource): void {
    if (!this.#members.delete(resource.name)) return
    this.#sendLeave(resource).catch(() => {})
  }

  #sendLeave(resource: LockResource): Promise<ReleaseOutcome> {
    this.#leaves++
    const args = { channel: resource.keys.channel, lockerId: this.lockerId, handoffMs: this.#options.handoffMs }
    return leaveScript.run(this.#client, resource.keys, args, { deadlines: this.#deadlines, ms: this.#options.commandTimeoutMs, map: toReleaseOutcome })
  }

  subscribe(resource: LockResource): Promise<void> {
    return this.#deadlines.race(this.#subscriberConnection().subscribe(resource.keys.channel), this.#options.commandTimeoutMs).then(() => {})
  }

  unsubscribe(resource: LockResource): void {
    this.#subscriber?.unsubscribe(resource.keys.channel).catch(() => {})
  }

  async close(): Promise<void> {
    if (this.#watching && typeof (this.#client as Partial<RedisClient>).off === 'function') {
      for (const event of TOPOLOGY_EVENTS) this.#client.off(event, this.#onTopology)
    }
    const leaving = [...this.#members.values()].map((r) => this.#sendLeave(r))
    this.#members.clear()
    await Promise.allSettled(leaving)
    this.#dropSubscriber()
  }

  #subscriberConnection(): RedisClient {
    if (this.#subscriber) return this.#subscriber
    // Both clients have duplicate(); their signatures differ only in optional overrides.
    const sub = (this.#client as { duplicate(): RedisClient }).duplicate()
    sub.on('error', () => {
      // Reconnection is ioredis's job; waiters fall back on their backstops meanwhile.
    })
    sub.on('message', (channel: string, text: string) => {
      const message = parseReleaseMessage(text)
      // Our own release woke our waiters already, one round trip sooner.
      if (message === undefined || message.sender === this.lockerId) return
      const name = resourceOfChannel(this.#options.prefix, channel)
      if (name !== undefined) this.#listener.released(name, message.handedTo, message.handoffMs, message.next)
    })
    // Messages sent while we were disconnected are gone: after a reconnect, every queue tries.
    sub.on('ready', () => this.#listener.reconnected())
    // A process that quits its client without closing the Locker must still be able to exit:
    // the subscriber, a connection of ours, follows the client out.
    this.#client.once('end', this.#onClientEnd)
    this.#subscriber = sub
    return sub
  }

  #dropSubscriber(): void {
    if (!this.#subscriber) return
    this.#client.off('end', this.#onClientEnd)
    this.#subscriber.disconnect()
    this.#subscriber = undefined
  }
}

const PLAIN_RELEASE: Handling<ReleaseOutcome> = { map: toReleaseOutcome }

/** Raised or already there: either way the node knows the token (a bad reply throws). */
function toKnown(reply: unknown): void {
  toRaised(reply)
}
