/**
 * The Locker on etcd: the {@link LockBackend} seam over an `etcd3` client (docs/LOCK.md, "etcd").
 *
 * The recipe (etcd's own, from its concurrency package): each Locker that holds or waits for a
 * resource has one key under the resource's range, created in a transaction and attached to one
 * of the Locker's leases (etcd-leases.ts). The key created first holds the lock, and its
 * `create_revision` is the fencing token: etcd's revisions increase across the whole cluster, by
 * Raft, so per resource each grant's token is larger than the one before, across leader changes
 * and restarts. The others wait in the order of their keys, each watching only the key before its
 * own (predecessor-watch.ts): one wake-up per release, nothing polled. The lease is the watchdog
 * of the process: a Locker that dies or pauses past the TTL loses every key at once.
 *
 * How the seam's Redis-shaped parts map:
 * - queue modes: `none` creates our key only when no key of anyone's exists (one transaction);
 *   `join`/`stay` create it whatever (or keep it) and so stand in the queue. A Locker has one key
 *   per resource, so its own second acquire waits locally for its first (the Locker's wait queue
 *   does that), then joins at the back.
 * - the fair queue's hand-off does not exist here: etcd's order of keys is the queue, and a
 *   release deletes the key, which wakes exactly the waiter behind it. `handedTo` is always
 *   undefined; `handoffMs` and `fenceTtlMs` do not apply.
 * - the safety poll of a waiter costs nothing: a try while our key waits behind a live
 *   predecessor is answered here, without a call, until the watch says it is gone.
 * - a lock's `ttlMs`: its lease is the Locker's lease of `ceil(ttlMs / 1000)` s (at least etcd's
 *   minimum, 2 s); a lock that is not renewed within its `ttlMs` is deleted by this Locker when
 *   that runs out, so a live holder's lock ends as on Redis, and a dead or paused one's when the
 *   lease does.
 */
import type {
  AcquireOutcome,
  AcquireRequest,
  BackendListener,
  LockBackend,
  LockResource,
  ReleaseOutcome,
} from '../backend/backend.js'
import type { Deadlines } from '../deadline.js'
import { withinDeadline } from '../deadline.js'
import { asError, InvalidLockOptionError } from '../errors.js'
import type { LockInspection } from '../family/inspect.js'
import { resourceKeys } from '../keys.js'
import { checkResource } from '../options.js'
import { newOwnerId } from '../owner-id.js'
import { EtcdCalls, EtcdTimeoutError } from './etcd-calls.js'
import type { EtcdClient, EtcdKeyValue, EtcdRequestOp, EtcdTxnRequest, EtcdTxnResponse } from './etcd-client.js'
import { checkEtcdResource, etcdKeys, type EtcdKeys } from './etcd-keys.js'
import { EtcdLeases, leaseSeconds, type EtcdLease } from './etcd-leases.js'
import { endpointCount } from './etcd-reachability.js'
import { PredecessorWatch } from './predecessor-watch.js'

/** What the etcd backend takes from the Locker's options. */
export interface EtcdBackendOptions {
  readonly prefix: string
  readonly commandTimeoutMs: number
  /** Must be 0: etcd commits every write on a majority before it answers. */
  readonly replicas: number
}

// etcd's enums, by number (etcd3 takes either).
const EQUAL = 0
const CREATE = 1
const ASCEND = 1
const DESCEND = 2
const BY_CREATE = 2

/** Not ours yet: the lock is held, or our key waits behind another. */
const NOT_YET: AcquireOutcome = Object.freeze({ granted: false, holderTtlMs: -1 })
/** Our key was gone or stale: try again at once, with a new key. */
const AGAIN: AcquireOutcome = Object.freeze({ granted: false, holderTtlMs: 0 })

/** Where this Locker stands on one resource. */
interface Entry {
  readonly resource: LockResource
  readonly keys: EtcdKeys
  /** `queued`: our key waits; `held`: a lock of ours holds it. */
  state: 'none' | 'queued' | 'held'
  /** Our key's create_revision (queued or held): the token. */
  rev: bigint
  lease: EtcdLease | undefined
  /** Queued: the predecessor is gone (or the watch failed): the next try looks again. */
  recheck: boolean
  watch: PredecessorWatch | undefined
  /** Held: performance.now() at which the lock ends unless renewed (it is then deleted). */
  validUntil: number
  expiry: NodeJS.Timeout | undefined
  /** The calls for this resource, one at a time: each reads and sets `state` without a race. */
  chain: Promise<unknown>
  pending: number
}

export class EtcdBackend implements LockBackend {
  readonly lockerId: string
  readonly #client: EtcdClient
  readonly #o: EtcdBackendOptions
  readonly #listener: BackendListener
  readonly #calls: EtcdCalls
  readonly #leases: EtcdLeases
  readonly #resources = new Map<string, LockResource>()
  readonly #entries = new Map<string, Entry>()
  #closed = false

  /** @throws InvalidLockOptionError for an option that does not apply to etcd, before any I/O. */
  constructor(client: EtcdClient, options: EtcdBackendOptions, deadlines: Deadlines, listener: BackendListener) {
    if (options.replicas !== 0)
      throw new InvalidLockOptionError(
        'replicas',
        'is for Redis with replicas: etcd commits every grant on a majority of its members before it answers',
        options.replicas,
      )
    this.#client = client
    this.#o = options
    this.#listener = listener
    this.lockerId = newOwnerId()
    this.#calls = new EtcdCalls(deadlines, endpointCount(client))
    this.#leases = new EtcdLeases(client, this.#calls, options.commandTimeoutMs, (lease) => this.#leaseLost(lease))
  }

  resource(name: string): LockResource {
    let r = this.#resources.get(name)
    if (r) return r
    checkEtcdResource(checkResource(name))
    r = { name, keys: resourceKeys(this.#o.prefix, name) }
    if (this.#resources.size >= 10_000) this.#resources.clear()
    this.#resources.set(name, r)
    return r
  }

  acquire(resource: LockResource, request: AcquireRequest): Promise<AcquireOutcome> {
    const e = this.#entry(resource)
    const now = performance.now()
    let ms = this.#o.commandTimeoutMs
    let cut = false
    if (!request.first && request.waitUntil !== undefined && request.waitUntil - now < ms) {
      ms = request.waitUntil - now
      cut = true
    }
    const until = now + ms
    return this.#serial(e, () => this.#acquire(e, request, until)).catch((error: unknown): AcquireOutcome => ({
      granted: false,
      error: asError(error),
      cut: cut && error instanceof EtcdTimeoutError,
    }))
  }

  async #acquire(e: Entry, request: AcquireRequest, until: number): Promise<AcquireOutcome> {
    if (this.#closed) return { granted: false, error: new Error('the locker was closed'), cut: false }
    // Held by a lock of ours: its release wakes our next waiter. Queued behind a live predecessor:
    // its deletion wakes us. Neither needs a call. A single try (`tryAcquire()`) never takes the
    // place our waiters queued for.
    if (e.state === 'held' || (e.state === 'queued' && (!e.recheck || request.queue === 'none'))) return NOT_YET
    const seconds = leaseSeconds(request.ttlMs)
    let lease = await this.#leases.get(seconds, left(until))
    // The keep-alives keep two thirds of the TTL ahead; less means they failed lately (etcd was
    // away): a grant on it would be short, so the lease is renewed first (or replaced, if gone).
    if (
      lease.validUntil < performance.now() + lease.ttlMs / 2 &&
      (await this.#leases.keepAlive(lease, left(until))) === undefined
    )
      lease = await this.#leases.get(seconds, left(until))
    if (e.state === 'queued') return this.#checkTurn(e, request, lease, until)
    return request.queue === 'none' ? this.#tryOnce(e, request, lease, until) : this.#join(e, request, lease, until)
  }

  /** A single try that never queues: our key is created only where nobody's is. */
  async #tryOnce(e: Entry, request: AcquireRequest, lease: EtcdLease, until: number): Promise<AcquireOutcome> {
    const k = e.keys
    const r = await this.#txn(
      {
        compare: [{ target: CREATE, result: EQUAL, key: k.from, range_end: k.end, create_revision: '0' }],
        success: [{ request_put: { key: k.own, lease: lease.id } }],
        failure: [{ request_range: { key: k.own } }],
      },
      until,
      (late) => {
        if (late.succeeded) this.#deleteLate(e, BigInt(late.header.revision))
      },
    )
    if (r.succeeded) {
      e.rev = BigInt(r.header.revision)
      return this.#hold(e, request, lease)
    }
    // A key of ours nobody here knows (a try that answered after its deadline): not to be kept.
    const stale = firstKv(r, 0)
    if (stale) await this.#delete(e.keys, BigInt(stale.create_revision), until)
    return stale ? AGAIN : NOT_YET
  }

  /** Creates our key at the back of the queue; the lock is ours if nobody's key is older. */
  async #join(e: Entry, request: AcquireRequest, lease: EtcdLease, until: number): Promise<AcquireOutcome> {
    const k = e.keys
    const r = await this.#txn(
      {
        compare: [{ target: CREATE, result: EQUAL, key: k.own, create_revision: '0' }],
        success: [
          { request_put: { key: k.own, lease: lease.id } },
          {
            request_range: {
              key: k.from,
              range_end: k.end,
              sort_order: ASCEND,
              sort_target: BY_CREATE,
              keys_only: true,
            },
          },
        ],
        failure: [{ request_range: { key: k.own } }],
      },
      until,
      (late) => {
        if (late.succeeded) this.#deleteLate(e, BigInt(late.header.revision))
      },
    )
    if (!r.succeeded) {
      // A key of ours from a try that answered after its deadline, or a lock of ours that ran
      // out: never taken over (its revision may be a token already handed out), deleted.
      const stale = firstKv(r, 0)
      if (stale) await this.#delete(e.keys, BigInt(stale.create_revision), until)
      return AGAIN
    }
    const rev = BigInt(r.header.revision)
    e.state = 'queued'
    e.rev = rev
    e.lease = lease
    const queue = r.responses[1]?.response_range?.kvs ?? []
    let predecessor: EtcdKeyValue | undefined
    for (const kv of queue) if (BigInt(kv.create_revision) < rev) predecessor = kv
    if (!predecessor) return this.#hold(e, request, lease)
    this.#watch(e, predecessor, rev)
    return NOT_YET
  }

  /** Our key waits and its predecessor went: is it first now? If not, watch the new predecessor. */
  async #checkTurn(e: Entry, request: AcquireRequest, lease: EtcdLease, until: number): Promise<AcquireOutcome> {
    const k = e.keys
    const rev = e.rev
    // The try that is granted may ask for another TTL than the one that queued: the key moves to
    // that lease (same key, same create_revision).
    const move = e.lease !== lease
    const ops: EtcdRequestOp[] = move ? [{ request_put: { key: k.own, ignore_value: true, lease: lease.id } }] : []
    ops.push({
      request_range: {
        key: k.from,
        range_end: k.end,
        sort_order: DESCEND,
        sort_target: BY_CREATE,
        max_create_revision: String(rev - 1n),
        limit: 1,
        keys_only: true,
      },
    })
    e.recheck = false
    const r = await this.#txn(
      { compare: [{ target: CREATE, result: EQUAL, key: k.own, create_revision: String(rev) }], success: ops },
      until,
    )
    if (e.state !== 'queued' || e.rev !== rev) return AGAIN
    if (!r.succeeded) {
      // Our key is gone (its lease ended, or someone deleted it): queue again, afresh.
      this.#forget(e)
      return AGAIN
    }
    if (move) e.lease = lease
    const predecessor = firstKv(r, ops.length - 1)
    if (!predecessor) return this.#hold(e, request, lease)
    this.#watch(e, predecessor, BigInt(r.header.revision))
    return NOT_YET
  }

  #watch(e: Entry, predecessor: EtcdKeyValue, revision: bigint): void {
    e.watch?.cancel()
    const rev = e.rev
    e.watch = new PredecessorWatch(this.#client, predecessor.key, revision, () => {
      if (e.state !== 'queued' || e.rev !== rev) return
      e.recheck = true
      this.#listener.released(e.resource.name, undefined, 0, undefined)
    })
  }

  /** The lock is ours: our key is the oldest. */
  #hold(e: Entry, request: AcquireRequest, lease: EtcdLease): AcquireOutcome {
    e.watch?.cancel()
    e.watch = undefined
    e.recheck = false
    e.state = 'held'
    e.lease = lease
    const validUntil = Math.min(request.sentAt + request.ttlMs, lease.validUntil)
    this.#arm(e, validUntil)
    return { granted: true, ownerId: String(e.rev), token: e.rev, validUntil, handedOver: false }
  }

  /** The lock ends at `validUntil` unless renewed: then it is deleted (a live holder's lock ends as on Redis). */
  #arm(e: Entry, validUntil: number): void {
    e.validUntil = validUntil
    clearTimeout(e.expiry)
    const rev = e.rev
    e.expiry = setTimeout(
      () => {
        void this.#serial(e, async () => {
          if (e.state !== 'held' || e.rev !== rev) return
          // libuv runs timers on its cached loop time, so one can fire a little early: then it is
          // armed again for the rest (returning would leave the key to the lease, kept alive).
          if (performance.now() < e.validUntil) return this.#arm(e, e.validUntil)
          this.#forget(e)
          this.#deleteLate(e, rev)
          this.#listener.released(e.resource.name, undefined, 0, undefined)
        })
      },
      Math.max(1, Math.ceil(validUntil - performance.now())),
    )
    e.expiry.unref()
  }

  async extend(resource: LockResource, ownerId: string, ttlMs: number, timeoutMs: number): Promise<number | undefined> {
    const e = this.#entry(resource)
    return this.#serial(e, async () => {
      if (e.state !== 'held' || String(e.rev) !== ownerId) return undefined
      const sentAt = performance.now()
      if (sentAt >= e.validUntil) return undefined
      const until = sentAt + timeoutMs
      const rev = e.rev
      const lease = await this.#leases.get(leaseSeconds(ttlMs), left(until))
      let leaseUntil: number | undefined
      if (lease !== e.lease) {
        const k = e.keys
        const r = await this.#txn(
          {
            compare: [{ target: CREATE, result: EQUAL, key: k.own, create_revision: String(rev) }],
            success: [{ request_put: { key: k.own, ignore_value: true, lease: lease.id } }],
          },
          until,
        )
        if (r.succeeded) {
          e.lease = lease
          leaseUntil = lease.validUntil
        }
      } else {
        // One deadline for both, taken before either is sent: a second left() that threw (the
        // first call can take milliseconds to send on a loaded machine) left the keep-alive
        // already sent with nobody to see it fail (an unhandled rejection in a clean-clone CI run).
        const ms = left(until)
        const [alive, kv] = await Promise.all([
          this.#leases.keepAlive(lease, ms),
          this.#calls.run(() => this.#client.kv.range({ key: e.keys.own }), ms),
        ])
        if (alive !== undefined && kv.kvs[0] && BigInt(kv.kvs[0].create_revision) === rev) leaseUntil = alive
      }
      if (e.state !== 'held' || e.rev !== rev) return undefined
      if (leaseUntil === undefined) {
        // Not ours any more (deleted, or its lease is gone).
        this.#forget(e)
        return undefined
      }
      // An answer after the lock ran out renews nothing: the holder has been told it is lost.
      if (performance.now() >= e.validUntil) return undefined
      const validUntil = Math.min(sentAt + ttlMs, leaseUntil)
      this.#arm(e, validUntil)
      return validUntil
    })
  }

  async release(resource: LockResource, ownerId: string): Promise<ReleaseOutcome> {
    const e = this.#entry(resource)
    return this.#serial(e, async () => {
      if (e.state !== 'held' || String(e.rev) !== ownerId) return { freed: false }
      const rev = e.rev
      const lease = e.lease
      this.#forget(e)
      const until = performance.now() + this.#o.commandTimeoutMs
      const k = e.keys
      const release = (withLast: boolean) =>
        this.#txn(
          {
            compare: [{ target: CREATE, result: EQUAL, key: k.own, create_revision: String(rev) }],
            success: [
              { request_delete_range: { key: k.own } },
              // The last token released, for inspect(): on our lease, so it is gone with the Locker.
              ...(withLast && lease && !lease.lost
                ? [{ request_put: { key: k.last, value: Buffer.from(String(rev)), lease: lease.id } }]
                : []),
            ],
          },
          until,
        )
      let r: EtcdTxnResponse
      try {
        try {
          r = await release(true)
        } catch (error) {
          // The lease ended between our check and etcd's: release without the record.
          if (!/lease not found/i.test(asError(error).message)) throw error
          r = await release(false)
        }
      } catch (error) {
        this.#deleteLate(e, rev)
        throw error
      }
      return r.succeeded ? { freed: true, handedTo: undefined } : { freed: false }
    })
  }

  leave(resource: LockResource): void {
    const e = this.#entries.get(resource.name)
    if (!e) return
    void this.#serial(e, async () => {
      if (e.state !== 'queued') return
      const rev = e.rev
      this.#forget(e)
      this.#deleteLate(e, rev)
    })
  }

  /**
   * etcd is unreachable: the client's last calls, lately, failed to connect (etcd-reachability.ts).
   * An acquire then ends at once, as on Redis, rather than wait out its `waitMs`.
   */
  connectionDown(): Error | undefined {
    return this.#calls.reachability.down()
  }

  /** Nothing to subscribe to: a waiter's watch is set up by its own try. */
  subscribe(): Promise<void> {
    return Promise.resolve()
  }

  unsubscribe(): void {}

  async inspect(resource: LockResource): Promise<LockInspection> {
    const k = this.#keysOf(resource.name)
    const until = performance.now() + this.#o.commandTimeoutMs
    const r = await this.#txn(
      {
        success: [
          {
            request_range: {
              key: k.from,
              range_end: k.end,
              sort_order: ASCEND,
              sort_target: BY_CREATE,
              keys_only: true,
            },
          },
          { request_range: { key: k.last } },
        ],
      },
      until,
    )
    const queue = r.responses[0]?.response_range?.kvs ?? []
    const head = queue[0]
    const lastKv = firstKv(r, 1)
    const last = lastKv ? BigInt(lastKv.value.toString()) : undefined
    if (!head) return { resource: resource.name, state: 'free', holderTtlMs: 0, lastToken: last, waiting: 0 }
    const ttl = await this.#calls.run(() => this.#client.leaseClient.leaseTimeToLive({ ID: head.lease }), left(until))
    const token = BigInt(head.create_revision)
    return {
      resource: resource.name,
      state: 'held',
      holderTtlMs: Math.max(0, Number(ttl.TTL)) * 1_000,
      lastToken: last !== undefined && last > token ? last : token,
      waiting: queue.length - 1,
    }
  }

  async markDone(resource: LockResource, ownerId: string, token: bigint, ttlMs: number): Promise<boolean> {
    const e = this.#entry(resource)
    if (e.state !== 'held' || String(e.rev) !== ownerId) return false
    const until = performance.now() + this.#o.commandTimeoutMs
    // A lease of its own, never kept alive: the record ends with it, after ttlMs (rounded up to seconds).
    const ms = left(until) // before the lease is made: etcd3 sends its grant at once
    const record = this.#client.lease(leaseSeconds(ttlMs), { autoKeepAlive: false })
    record.on('lost', () => {})
    const id = await this.#calls.run(() => record.grant(), ms)
    const k = e.keys
    const r = await this.#txn(
      {
        compare: [{ target: CREATE, result: EQUAL, key: k.own, create_revision: String(e.rev) }],
        success: [{ request_put: { key: k.done, value: Buffer.from(String(token)), lease: id } }],
      },
      until,
    )
    if (!r.succeeded) record.revoke().catch(() => {})
    return r.succeeded
  }

  async readDone(resource: LockResource): Promise<bigint | undefined> {
    const k = this.#keysOf(resource.name)
    const r = await this.#calls.run(() => this.#client.kv.range({ key: k.done }), this.#o.commandTimeoutMs)
    const kv = r.kvs[0]
    return kv ? BigInt(kv.value.toString()) : undefined
  }

  async close(until: number = performance.now() + this.#o.commandTimeoutMs): Promise<void> {
    this.#closed = true
    for (const e of this.#entries.values()) {
      e.watch?.cancel()
      clearTimeout(e.expiry)
    }
    // A key created by a call still on the wire lands first; revoking the leases then deletes
    // every key of ours at once.
    await withinDeadline(this.#calls.inFlight.idle(Math.max(0, until - performance.now())), until)
    await this.#leases.close(until)
  }

  /** A lease of ours ended: our waiters on it queue again (our holders learn at their next renewal). */
  #leaseLost(lease: EtcdLease): void {
    for (const e of this.#entries.values()) {
      if (e.lease !== lease || e.state !== 'queued') continue
      void this.#serial(e, async () => {
        if (e.lease !== lease || e.state !== 'queued') return
        this.#forget(e)
        this.#listener.released(e.resource.name, undefined, 0, undefined)
      })
    }
  }

  #entry(resource: LockResource): Entry {
    let e = this.#entries.get(resource.name)
    if (!e) {
      e = {
        resource,
        keys: this.#keysOf(resource.name),
        state: 'none',
        rev: 0n,
        lease: undefined,
        recheck: false,
        watch: undefined,
        validUntil: 0,
        expiry: undefined,
        chain: Promise.resolve(),
        pending: 0,
      }
      this.#entries.set(resource.name, e)
    }
    return e
  }

  #keysOf(name: string): EtcdKeys {
    return etcdKeys(this.#o.prefix, name, this.lockerId)
  }

  /** Runs `op` after every earlier call for the entry; an entry with nothing left of ours is dropped. */
  #serial<T>(e: Entry, op: () => Promise<T>): Promise<T> {
    e.pending++
    const run = e.chain.then(op)
    e.chain = run.catch(() => {})
    return run.finally(() => {
      if (--e.pending === 0 && e.state === 'none' && this.#entries.get(e.resource.name) === e)
        this.#entries.delete(e.resource.name)
    })
  }

  /** Nothing of ours for the entry: no key, no watch, no timer. */
  #forget(e: Entry): void {
    e.state = 'none'
    e.rev = 0n
    e.lease = undefined
    e.recheck = false
    e.watch?.cancel()
    e.watch = undefined
    clearTimeout(e.expiry)
    e.expiry = undefined
  }

  #txn(request: EtcdTxnRequest, until: number, late?: (response: EtcdTxnResponse) => void): Promise<EtcdTxnResponse> {
    return this.#calls.run(() => this.#client.kv.txn(request), left(until), late)
  }

  /** Deletes our key if it is still the one created at `rev`, within `until`. */
  async #delete(keys: EtcdKeys, rev: bigint, until: number): Promise<void> {
    await this.#txn(
      {
        compare: [{ target: CREATE, result: EQUAL, key: keys.own, create_revision: String(rev) }],
        success: [{ request_delete_range: { key: keys.own } }],
      },
      until,
    )
  }

  /**
   * Deletes our key created at `rev` unless it is ours to keep by then, in the background, trying
   * again while etcd does not answer (a live lease would otherwise keep it, and the lock, forever);
   * closing the Locker revokes its leases, which ends it anyway.
   */
  #deleteLate(e: Entry, rev: bigint, attempt = 0): void {
    void this.#serial(e, async () => {
      if (e.state !== 'none' && e.rev === rev) return
      try {
        await this.#delete(e.keys, rev, performance.now() + this.#o.commandTimeoutMs)
      } catch {
        if (this.#closed) return
        const timer = setTimeout(() => this.#deleteLate(e, rev, attempt + 1), Math.min(1_000, 50 * 2 ** attempt))
        timer.unref()
      }
    })
  }
}

/** Time left until `until`, or a timeout error when none is. */
function left(until: number): number {
  const ms = until - performance.now()
  if (ms <= 0) throw new EtcdTimeoutError(0)
  return ms
}

function firstKv(r: EtcdTxnResponse, op: number): EtcdKeyValue | undefined {
  return r.responses[op]?.response_range?.kvs[0]
}
