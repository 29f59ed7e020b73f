/**
 * Quorum mode: one lock over N independent Redis masters (the Redlock algorithm), behind the
 * same {@link LockBackend} seam as a single Redis. Each node is driven by a single-node backend
 * of its own (redis-backend.ts: the same scripts, formats, deadlines and late-reply clean-up);
 * this module only counts their answers.
 *
 * - Acquire: the acquire script on every node at once, one owner id for all. A lock is granted
 *   when a majority granted within the validity: `ttlMs` less the clock drift
 *   ({@link clockDriftMs}), measured from when the first request was sent. Every node's call has
 *   its own deadline, and the attempt is decided as soon as the majority is won or lost, never
 *   by waiting for a node that does not answer. A lost attempt releases what it was granted.
 * - Tokens: each granting node mints its own (its counter); the grant's token is their maximum,
 *   and before the lock is returned a majority of nodes must know it (their counter at it or
 *   above). When the nodes that minted that maximum are a majority already (counters in step:
 *   the usual case) that costs nothing; otherwise a second phase raises the counters of the
 *   others (raise-fence-script.ts) until a majority acknowledges. Any later majority then
 *   includes a node whose counter is at the token or above, so every grant that starts after a
 *   grant was returned mints a larger token, whichever nodes either majority was made of.
 *   docs/LOCK.md has the argument and what it assumes.
 * - Extend on a majority, within the validity; release on every node.
 * - A node whose connection is down is not sent anything (its calls would pile up in the
 *   client's offline queue while it stays down); a node that stopped answering (a stall, a
 *   blackhole) is sent one call at a time until one answers. So memory stays bounded and no
 *   call waits for a node that cannot answer, whatever the client options.
 */
import type { AcquireOutcome, AcquireRequest, BackendListener, LockBackend, LockResource, ReleaseOutcome } from './backend.js'
import type { Deadlines } from './deadline.js'
import { asError } from './errors.js'
import { newOwnerId } from './owner-id.js'
import { RedisBackend, type RedisBackendOptions, type RedisClient } from './redis-backend.js'
import { NOT_OURS } from './release-script.js'

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

/**
 * A node whose calls in flight have had no answer for this long while other nodes answered is
 * stalled (SIGSTOP, a partition): it is sent no more acquires until one answers or misses its
 * deadline, so calls do not pile up for it meanwhile. Relative to the other nodes' answers, so a
 * pause of our own event loop (every reply waits unread) stalls no node; long enough that a node
 * merely starved of CPU for a moment on a busy machine is not taken for one.
 */
const STALL_MS = 200

/** Tickets a backend keeps (resources its locker waits for); past this it starts over. */
const TICKETS_KEPT = 1_024

/** When any node of the quorum last answered (performance.now()). */
interface QuorumClock {
  answeredAt: number
}

/** What the quorum backend needs to know: the single-node options, and the delayed restart. */
export interface QuorumBackendOptions extends RedisBackendOptions {
  /**
   * A node whose connection comes back after it restarted less than this long ago does not count
   * toward an acquire's majority until it has been up this long (0: off). See LockerOptions.
   */
  readonly nodeRestartDelayMs: number
}

/** One node of the quorum: its single-node backend, and whether a call to it is worth sending. */
class QuorumNode {
  /** Calls sent to the node through this backend that have not settled yet. */
  #inflight = 0
  /** Its last call failed or missed its deadline, and no call has answered since. */
  #failing = false
  /** When the node last answered, and when its calls in flight began (it was idle before). */
  #answeredAt = 0
  #busySince = 0
  /** Calls that give up at once when the connection closes (ioredis would resend them later). */
  readonly #onDown = new Set<() => void>()
  /**
   * The connection closed and has not come up since. ioredis reports a reconnection attempt as
   * `connecting`, like the first connection; a call sent then waits in the offline queue too.
   */
  #down = false
  readonly #closed = (): void => {
    this.#down = true
    for (const giveUp of [...this.#onDown]) giveUp()
  }
  /** The client has been connected before: a `ready` now is a reconnection. */
  #connected = false
  /**
   * performance.now() until which the node takes no part in acquires: it restarted (maybe
   * without its data) less than the delayed restart ago. Infinity while its uptime is being read.
   */
  #youngUntil = 0
  readonly #ready = (): void => {
    this.#down = false
    if (this.#connected && this.restartDelayMs > 0) this.#checkRestart()
    this.#connected = true
  }

  constructor(
    readonly index: number,
    readonly backend: RedisBackend,
    readonly client: RedisClient,
    readonly clock: QuorumClock,
    readonly restartDelayMs: number,
  ) {
    this.#connected = (client as { status?: unknown }).status === 'ready'
    // A client that emits no events still works: its calls then end by their deadlines.
    if (typeof (client as Partial<RedisClient>).on === 'function') {
      client.on('close', this.#closed)
      client.on('ready', this.#ready)
    }
  }

  /**
   * Whether a call is worth sending: not while the client says its connection is down (a call
   * would wait in the offline queue, and calls would pile up there for as long as the node stays
   * down), nor while its last call failed or missed its deadline and another is in flight (one
   * call at a time, a probe, until one answers). Releases, renewals and the second phase go to
   * every reachable node: each follows an acquire sent to it, so they are bounded as those are.
   */
  get reachable(): boolean {
    return !this.#down && !this.backend.disconnected && !(this.#failing && this.#inflight > 0)
  }

  /**
   * Reachable, and not stalled: its calls in flight have had answers lately, or the other nodes
   * have not answered either. New acquires go only to such nodes.
   */
  get usable(): boolean {
    if (!this.reachable) return false
    return this.#inflight === 0 || this.clock.answeredAt - Math.max(this.#answeredAt, this.#busySince) <= STALL_MS
  }

  /**
   * Sends `call` and settles with its value; or rejects at once when the connection closes first
   * (the call may still land: `late` then gets its value). `failed` tells a value that means the
   * node did not answer (an acquire's outcome is a value either way).
   */
  send<T>(call: () => Promise<T>, failed?: (value: T) => boolean | undefined, late?: (value: T) => void): Promise<T> {
    if (this.#inflight++ === 0) this.#busySince = performance.now()
    return new Promise<T>((resolve, reject) => {
      let settled = false
      const giveUp = (): void => {
        settled = true
        this.#onDown.delete(giveUp)
        reject(new Error(`node ${this.index}: the connection closed before it answered`))
      }
      this.#onDown.add(giveUp)
      const done = (value: T | undefined, error: unknown, ok: boolean): void => {
        this.#onDown.delete(giveUp)
        this.#inflight--
        const health = ok ? (failed ? failed(value as T) : false) : true
        if (health === true) this.#failing = true
        else if (health === false) this.#answered()
        if (settled) {
          if (ok) late?.(value as T)
          return
        }
        settled = true
        if (ok) resolve(value as T)
        else reject(error)
      }
      call().then(
        (value) => done(value, undefined, true),
        (error: unknown) => done(undefined, error, false),
      )
    })
  }

  /** The connection is down (closed, reconnecting). */
  get connectionDown(): boolean {
    return this.#down || this.backend.disconnected
  }

  /** Usable, and not within the delayed restart: it may count toward an acquire's majority. */
  get grants(): boolean {
    return this.usable && performance.now() >= this.#youngUntil
  }

  /** Within the delayed restart after a restart seen on reconnection: ms left, else 0. */
  get youngForMs(): number {
    return Math.max(0, this.#youngUntil - performance.now())
  }

  /**
   * The connection came back: if the node restarted less than the delayed restart ago (it may
   * have lost the keys of locks still held), it sits out acquires until it has been up that long.
   * Until its uptime is known it sits out; if it cannot be read, for the whole delay.
   */
  #checkRestart(): void {
    this.#youngUntil = Number.POSITIVE_INFINITY
    const asked = performance.now()
    const fallback = (): void => {
      this.#youngUntil = asked + this.restartDelayMs
    }
    const info = (this.client as { info?: (section: string) => Promise<string> }).info
    if (typeof info !== 'function') return fallback()
    info
      .call(this.client, 'server')
      .then((text) => {
        const uptime = /^uptime_in_seconds:(\d+)/m.exec(text)
        if (!uptime) return fallback()
        const upMs = Number(uptime[1]) * 1000
        this.#youngUntil = upMs >= this.restartDelayMs ? 0 : asked + this.restartDelayMs - upMs
      }, fallback)
  }

  /**
   * Counts `call` in flight and its outcome in the node's health; lighter than {@link send} (no
   * early end when the connection closes: the call ends by its deadline), for the calls that
   * follow an acquire (releases, renewals, the second phase), whose answers are not waited for
   * once a majority answered.
   */
  track<T>(call: Promise<T>): Promise<T> {
    if (this.#inflight++ === 0) this.#busySince = performance.now()
    return call.then(
      (value) => {
        this.#inflight--
        this.#answered()
        return value
      },
      (error: unknown) => {
        this.#inflight--
        this.#failing = true
        throw error
      },
    )
  }

  #answered(): void {
    this.#failing = false
    this.#answeredAt = performance.now()
    this.clock.answeredAt = this.#answeredAt
  }

  /** Stops listening to the client; calls made afterwards (a late grant's release) still go out. */
  detach(): void {
    if (typeof (this.client as Partial<RedisClient>).off === 'function') {
      this.client.off('close', this.#closed)
      this.client.off('ready', this.#ready)
    }
  }
}

/** Why a node was not asked. */
function skipped(node: QuorumNode): Error {
  const why = node.connectionDown
    ? 'its connection is down'
    : !node.reachable
      ? 'its last call failed and a probe is in flight'
      : node.usable
        ? `it restarted lately and sits out acquires for ${Math.round(node.youngForMs)} ms more (nodeRestartDelayMs)`
        : 'its calls in flight have not been answered lately while other nodes answered'
  return new Error(`node ${node.index} was not asked: ${why}`)
}

/** Why each node left out of `asked` was not asked (none on the common path: every node asked). */
function notAsked(nodes: readonly QuorumNode[], asked: readonly QuorumNode[]): Error[] {
  return asked.length === nodes.length ? [] : nodes.filter((node) => !asked.includes(node)).map(skipped)
}

/** Many nodes' errors as one, naming how many failed and the first reason. */
function nodesFailed(what: string, errors: readonly Error[], n: number): Error {
  const first = errors[0]
  return new Error(`${what}: ${errors.length} of ${n} nodes did not answer${first ? ` (${first.message})` : ''}`, first ? { cause: first } : undefined)
}

/** A grant on one node, as the attempt counts it. */
interface NodeGrant {
  readonly node: QuorumNode
  readonly token: bigint
  readonly handedOver: boolean
}

/** The quorum backend: N single-node backends with one locker id, counted by majority. */
export class QuorumBackend implements LockBackend {
  readonly lockerId: string
  readonly #nodes: readonly QuorumNode[]
  readonly #quorum: number
  readonly #options: RedisBackendOptions
  readonly #listener: BackendListener
  /** Resource → our locker's ticket in its queues (Date.now() ms) while it waits for it. */
  readonly #tickets = new Map<string, number>()

  /**
   * @param clients one ioredis client per node (3 or more, checked by the Locker); never closed here.
   * @param listener gets the release messages of every node.
   */
  constructor(clients: readonly RedisClient[], options: QuorumBackendOptions, deadlines: Deadlines, listener: BackendListener) {
    // Names this locker in every node's queues and release messages. Not a secret.
    this.lockerId = options.lockerId ?? newOwnerId().slice(0, 16)
    const nodeOptions = { ...options, lockerId: this.lockerId }
    const clock: QuorumClock = { answeredAt: 0 }
    this.#listener = listener
    this.#nodes = clients.map((client, i) => new QuorumNode(i, new RedisBackend(client, nodeOptions, deadlines, listener), client, clock, options.nodeRestartDelayMs))
    this.#quorum = majorityOf(clients.length)
    this.#options = options
  }

  /** The key names are the same on every node: the first node's cache serves them. */
  resource(name: string): LockResource {
    return this.#nodes[0]!.backend.resource(name)
  }

  acquire(resource: LockResource, request: AcquireRequest): Promise<AcquireOutcome> {
    const nodes = this.#nodes
    const n = nodes.length
    const q = this.#quorum
    const validMs = request.ttlMs - clockDriftMs(request.ttlMs)
    const validUntil = request.sentAt + validMs
    const asked = nodes.filter((node) => node.grants)
    if (asked.length < q) {
      const errors = notAsked(nodes, asked)
      return Promise.resolve({ granted: false, error: nodesFailed('no majority of the nodes can be asked', errors, n), cut: false })
    }
    if (validMs <= 0) {
      return Promise.resolve({ granted: false, error: new Error(`a ttlMs of ${request.ttlMs} leaves no validity after the clock drift allowed for`), cut: false })
    }
    const ownerId = newOwnerId()
    // Where our locker stands in every node's queue: the time it began to wait for the resource,
    // the same on every node and on every try until it is granted, so that the nodes' queues
    // agree on who came first (see queuedAcquireScript). After a grant with more of our waiters
    // waiting (`stay`), the back of the line: the time of this try.
    const now = Date.now()
    let ticket = ''
    let stayTicket = ''
    if (request.queue !== 'none') {
      let mine = this.#tickets.get(resource.name)
      if (mine === undefined) {
        if (this.#tickets.size >= TICKETS_KEPT) this.#tickets.clear()
        mine = now
        this.#tickets.set(resource.name, mine)
      }
      ticket = String(mine)
      stayTicket = String(now)
    }
    // No node's answer is worth waiting for past the validity, nor past the caller's wait; but the
    // first attempt of an acquire gets its round trip (as on a single Redis), measured on the
    // nodes that have answered before: the others are never waited for longer than that, so a
    // dead node costs no more than the farthest live one.
    let srtt = 0
    for (const node of asked) if (node.backend.srttMs > srtt) srtt = node.backend.srttMs
    const floorMs = request.first ? (srtt === 0 ? this.#options.commandTimeoutMs : 3 * srtt + 2) : 1
    const maxMs = Math.min(validMs, request.waitUntil === undefined ? Number.POSITIVE_INFINITY : Math.max(floorMs, request.waitUntil - request.sentAt))
    return new Promise<AcquireOutcome>((resolve) => {
      const grants: NodeGrant[] = []
      const errors = notAsked(nodes, asked)
      let cutErrors = 0
      let holderTtlMs = -1
      /** Nodes asked that have not answered yet. */
      let pending = asked.length
      /** asking → won (learning the token) → held, or failed; the outcome is resolved on held or failed. */
      let state: 'asking' | 'won' | 'held' | 'failed' = 'asking'

      const fail = (outcome: AcquireOutcome): void => {
        state = 'failed'
        for (const g of grants) this.#releaseOn(g.node, resource, ownerId)
        resolve(outcome)
      }
      const settleIfLost = (): void => {
        if (state !== 'asking' || grants.length + pending >= q) return
        // No majority can be won any more: too many nodes failed (Redis is unavailable), or
        // enough nodes are held by someone else (contention).
        if (errors.length > n - q) fail({ granted: false, error: nodesFailed('no majority of the nodes answered', errors, n), cut: cutErrors === errors.length })
        else fail({ granted: false, holderTtlMs })
      }
      const won = (): void => {
        state = 'won'
        this.#learnToken(resource, grants, validUntil).then(
          (token) => {
            if (state !== 'won') return
            if (performance.now() >= validUntil) {
              return fail({ granted: false, error: new Error(`the grant took longer than its validity (${Math.round(validMs)} ms: ttlMs less the clock drift)`), cut: false })
            }
            state = 'held'
            // Granted: our place in the queues is spent (or, staying, at the back of the line).
            if (request.queue === 'stay') this.#tickets.set(resource.name, now)
            else this.#tickets.delete(resource.name)
            resolve({ granted: true, ownerId, token, validUntil, handedOver: grants.some((g) => g.handedOver) })
          },
          (error: unknown) => {
            if (state === 'won') fail({ granted: false, error: asError(error), cut: false })
          },
        )
      }

      const count = (node: QuorumNode, outcome: AcquireOutcome): void => {
        pending--
        if (state === 'failed') {
          // Too late to count: a grant nobody waits for is given back at once.
          if (outcome.granted) this.#releaseOn(node, resource, ownerId)
          return
        }
        if (outcome.granted) {
          // Once won, a grant that comes later is ours like the others (it is released with them).
          grants.push({ node, token: outcome.token, handedOver: outcome.handedOver })
          if (state === 'asking' && grants.length >= q) won()
        } else if (outcome.error === undefined) {
          if (outcome.holderTtlMs >= 0 && (holderTtlMs < 0 || outcome.holderTtlMs < holderTtlMs)) holderTtlMs = outcome.holderTtlMs
        } else {
          errors.push(outcome.error)
          if (outcome.cut) cutErrors++
        }
        settleIfLost()
      }
      for (const node of asked) {
        node
          .send(
            () => node.backend.acquireAs(resource, request, ownerId, maxMs, ticket, stayTicket),
            (outcome) => (outcome.granted || outcome.error === undefined ? false : outcome.cut ? undefined : true),
            // The connection closed and the node was counted as failed; its grant came after all.
            (outcome) => {
              if (outcome.granted) this.#releaseOn(node, resource, ownerId)
            },
          )
          .then(
            (outcome) => count(node, outcome),
            (error: unknown) => count(node, { granted: false, error: asError(error), cut: false }),
          )
      }
    })
  }

  /**
   * The token of a grant won on a majority: the largest any granting node minted, once a
   * majority of the nodes know it (their counter at it or above). The nodes that minted it know
   * it; when they are fewer than a majority, the others' counters are raised to it.
   */
  #learnToken(resource: LockResource, grants: readonly NodeGrant[], validUntil: number): Promise<bigint> {
    let token = grants[0]!.token
    for (const g of grants) if (g.token > token) token = g.token
    const knowing = new Set<QuorumNode>()
    for (const g of grants) if (g.token === token) knowing.add(g.node)
    const needed = this.#quorum - knowing.size
    if (needed <= 0) return Promise.resolve(token)
    const targets = this.#nodes.filter((node) => !knowing.has(node) && node.reachable)
    if (targets.length < needed) {
      return Promise.reject(new Error(`the token could not be made known to a majority: ${knowing.size + targets.length} of ${this.#nodes.length} nodes can be asked`))
    }
    const ms = Math.max(1, Math.min(this.#options.commandTimeoutMs, validUntil - performance.now()))
    return new Promise((resolve, reject) => {
      let acks = 0
      const errors: Error[] = []
      for (const node of targets) {
        node.track(node.backend.raiseFence(resource, token, ms)).then(
          () => {
            if (++acks === needed) resolve(token)
          },
          (error: unknown) => {
            errors.push(asError(error))
            if (targets.length - errors.length === needed - 1) reject(nodesFailed('the token could not be made known to a majority', errors, this.#nodes.length))
          },
        )
      }
    })
  }

  /**
   * Gives back a grant we do not keep (short of a majority, or too late). The node hands the lock
   * on to the head of its queue, which may be our own locker (its ticket is the oldest): our
   * subscriptions do not deliver our own messages, so our waiters are told here, or they would
   * sit out the hand-off while a majority of the nodes keep it for us.
   */
  #releaseOn(node: QuorumNode, resource: LockResource, ownerId: string): void {
    node.track(node.backend.release(resource, ownerId)).then(
      (outcome) => {
        if (outcome.freed && outcome.handedTo === this.lockerId) this.#listener.released(resource.name, this.lockerId, this.#options.handoffMs, undefined)
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
    const errors = notAsked(nodes, asked)
    if (asked.length < q) return Promise.reject(nodesFailed('no majority of the nodes can be asked', errors, n))
    return new Promise((resolve, reject) => {
      let extended = 0
      let notOurs = 0
      let pending = asked.length
      let done = false
      const check = (): void => {
        if (done) return
        if (extended >= q) {
          done = true
          resolve(validUntil)
        } else if (notOurs > n - q) {
          // A majority says the lock is not ours: it is lost, whatever the rest answer.
          done = true
          resolve(undefined)
        } else if (extended + pending < q) {
          done = true
          reject(nodesFailed('the lease was not renewed on a majority', errors, n))
        }
      }
      for (const node of asked) {
        node.track(node.backend.extend(resource, ownerId, ttlMs, timeoutMs)).then(
          (valid) => {
            pending--
            if (valid === undefined) notOurs++
            else extended++
            check()
          },
          (error: unknown) => {
            pending--
            errors.push(asError(error))
            check()
          },
        )
      }
    })
  }

  /**
   * On every reachable node (a node whose connection is down, or that is failing, keeps our key
   * until its TTL runs out). Freed when a majority freed it; otherwise not ours, or unknown when fewer than a
   * majority answered.
   */
  release(resource: LockResource, ownerId: string): Promise<ReleaseOutcome> {
    const nodes = this.#nodes
    const n = nodes.length
    const q = this.#quorum
    const asked = nodes.filter((node) => node.reachable)
    const errors = notAsked(nodes, asked)
    return new Promise((resolve, reject) => {
      const freed: ReleaseOutcome[] = []
      let notOurs = 0
      let done = false
      const check = (): void => {
        if (done) return
        const answered = freed.length + notOurs
        if (freed.length >= q) {
          done = true
          resolve(combined(freed, this.lockerId))
        } else if (answered + errors.length === n) {
          done = true
          if (answered >= q) resolve(NOT_OURS)
          else reject(nodesFailed('the release could not be confirmed', errors, n))
        }
      }
      for (const node of asked) {
        node.track(node.backend.release(resource, ownerId)).then(
          (outcome) => {
            if (outcome.freed) freed.push(outcome)
            else notOurs++
            check()
          },
          (error: unknown) => {
            errors.push(asError(error))
            check()
          },
        )
      }
      check()
    })
  }

  leave(resource: LockResource): void {
    this.#tickets.delete(resource.name)
    for (const node of this.#nodes) node.backend.leave(resource)
  }

  /** Subscribes on every node that can be asked; resolves once a majority (or all asked) confirmed. */
  subscribe(resource: LockResource): Promise<void> {
    const asked = this.#nodes.filter((node) => node.reachable)
    const want = Math.min(this.#quorum, asked.length)
    return new Promise((resolve, reject) => {
      let ok = 0
      let failed = 0
      const errors: Error[] = []
      if (asked.length === 0) return reject(new Error('no node can be asked'))
      for (const node of asked) {
        node.backend.subscribe(resource).then(
          () => {
            if (++ok === want) resolve()
          },
          (error: unknown) => {
            errors.push(asError(error))
            if (++failed > asked.length - want) reject(nodesFailed('subscribe', errors, this.#nodes.length))
          },
        )
      }
    })
  }

  unsubscribe(resource: LockResource): void {
    for (const node of this.#nodes) node.backend.unsubscribe(resource)
  }

  async close(): Promise<void> {
    await Promise.allSettled(this.#nodes.map((node) => node.backend.close()))
    for (const node of this.#nodes) node.detach()
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
