/**
 * The leases of one Locker on etcd: one per TTL in whole seconds that its locks use (most Lockers
 * use one), like a session of etcd's own concurrency package. Every key the Locker writes for a
 * lock or a waiter is attached to one of them, so a Locker that dies or pauses past the TTL loses
 * all of them at once, by etcd's clock, and nothing of it is left behind.
 *
 * A lease is kept alive from its grant until the Locker closes, every third of its TTL, whatever
 * its keys: a waiter's key must live as long as the waiter. `extend()` of a lock sends a
 * keep-alive of its own (its validity then runs from that send). When a keep-alive says the
 * lease is gone (expired, revoked) or none has been answered within the TTL, the lease is lost:
 * `onLost` is told, and the next lock of that TTL gets a new lease.
 */
import type { EtcdClient, EtcdLeaseHandle } from './etcd-client.js'
import type { EtcdCalls } from './etcd-calls.js'

/** etcd's least TTL with its default election timeout (1 s): it raises a shorter one to this. */
export const ETCD_MIN_LEASE_SECONDS = 2

/** The lease TTL, in whole seconds, for a lock of `ttlMs`: rounded up, and at least etcd's minimum. */
export function leaseSeconds(ttlMs: number): number {
  return Math.max(ETCD_MIN_LEASE_SECONDS, Math.ceil(ttlMs / 1_000))
}

/** One lease of the Locker. */
export class EtcdLease {
  readonly seconds: number
  /** The lease id (a decimal int64), once granted. */
  id = ''
  /** performance.now() until which etcd keeps the lease for sure: the last answered keep-alive's send time + TTL. */
  validUntil = 0
  lost = false
  readonly handle: EtcdLeaseHandle
  timer: NodeJS.Timeout | undefined

  constructor(seconds: number, handle: EtcdLeaseHandle) {
    this.seconds = seconds
    this.handle = handle
  }

  get ttlMs(): number {
    return this.seconds * 1_000
  }
}

/** A grant of a lease of one TTL: pending until etcd answers, then the lease in use. */
class Granting {
  lease!: Promise<EtcdLease>
  pending = true
  /** performance.now() when the grant was sent. */
  readonly sentAt = performance.now()
}

export class EtcdLeases {
  readonly #client: EtcdClient
  readonly #calls: EtcdCalls
  readonly #commandTimeoutMs: number
  readonly #onLost: (lease: EtcdLease) => void
  /** The live (or granting) lease of each TTL. */
  readonly #leases = new Map<number, Granting>()
  readonly #all = new Set<EtcdLease>()
  #closed = false

  constructor(client: EtcdClient, calls: EtcdCalls, commandTimeoutMs: number, onLost: (lease: EtcdLease) => void) {
    this.#client = client
    this.#calls = calls
    this.#commandTimeoutMs = commandTimeoutMs
    this.#onLost = onLost
  }

  /**
   * The live lease of `seconds`, granted (within `ms`) on first use or after a loss. A grant not
   * answered within `commandTimeoutMs` is not waited for by the next try: that try sends a grant of
   * its own. etcd holds a call it got during a leader election until its request timeout (5 s + 2
   * election timeouts: 7 s by default) even once a new leader serves; a Locker that kept waiting
   * for that one grant stalled every acquire for as long (measured: 10-13 s with a 3 s election
   * timeout, test/etcd/cluster.test.ts). Whichever grant is answered first is used; a later one is
   * revoked.
   */
  get(seconds: number, ms: number): Promise<EtcdLease> {
    let granting = this.#leases.get(seconds)
    if (granting === undefined || (granting.pending && performance.now() - granting.sentAt >= this.#commandTimeoutMs)) {
      const fresh = new Granting()
      fresh.lease = this.#grant(seconds, fresh)
      this.#leases.set(seconds, fresh)
      // A grant that failed is not kept: the next lock tries again.
      fresh.lease.catch(() => {
        fresh.pending = false
        if (this.#leases.get(seconds) === fresh) this.#leases.delete(seconds)
      })
      granting = fresh
    }
    const lease = granting.lease
    return this.#calls.run(() => lease, ms, undefined, false)
  }

  async #grant(seconds: number, granting: Granting): Promise<EtcdLease> {
    const handle = this.#client.lease(seconds, { autoKeepAlive: false })
    // etcd3 reports a failed grant or keep-alive as 'lost' besides rejecting the call.
    handle.on('lost', () => {})
    const lease = new EtcdLease(seconds, handle)
    const sentAt = performance.now()
    lease.id = await this.#calls.observe(handle.grant())
    lease.validUntil = sentAt + lease.ttlMs
    if (this.#closed) {
      handle.revoke().catch(() => {})
      throw new Error('the locker was closed')
    }
    granting.pending = false
    const current = this.#leases.get(seconds)
    if (current !== undefined && current !== granting && !current.pending) {
      // A later grant was answered first and is in use: this one is not needed.
      handle.revoke().catch(() => {})
      return current.lease
    }
    // The first answered: the lease of this TTL from now on (a later grant still pending finds it).
    this.#leases.set(seconds, granting)
    this.#all.add(lease)
    this.#schedule(lease)
    return lease
  }

  /**
   * One keep-alive, within `ms`.
   * @returns the lease's new validity (performance.now() ms), or undefined when etcd says it is gone.
   * @throws on a failed call or a missed deadline.
   */
  async keepAlive(lease: EtcdLease, ms: number): Promise<number | undefined> {
    if (lease.lost) return undefined
    const sentAt = performance.now()
    let ttl: string
    try {
      ttl = (await this.#calls.run(() => lease.handle.keepaliveOnce(), ms)).TTL
    } catch (error) {
      // etcd3 rejects a keep-alive of a lease etcd does not know (expired, revoked) with this.
      if (error instanceof Error && error.name === 'EtcdLeaseInvalidError') {
        this.#lose(lease)
        return undefined
      }
      throw error
    }
    if (Number(ttl) <= 0) {
      this.#lose(lease)
      return undefined
    }
    lease.validUntil = Math.max(lease.validUntil, sentAt + lease.ttlMs)
    return lease.validUntil
  }

  /** The next keep-alive in a third of the TTL; after a failed one, sooner (a tenth). */
  #schedule(lease: EtcdLease, failed = false): void {
    clearTimeout(lease.timer)
    if (this.#closed || lease.lost) return
    lease.timer = setTimeout(() => void this.#tick(lease), lease.ttlMs / (failed ? 10 : 3))
    lease.timer.unref()
  }

  async #tick(lease: EtcdLease): Promise<void> {
    try {
      await this.keepAlive(lease, Math.min(this.#commandTimeoutMs, lease.ttlMs / 3))
      this.#schedule(lease)
    } catch {
      // etcd did not answer: the lease may still live, until its validity runs out here.
      if (performance.now() >= lease.validUntil) this.#lose(lease)
      this.#schedule(lease, true)
    }
  }

  #lose(lease: EtcdLease): void {
    if (lease.lost) return
    lease.lost = true
    clearTimeout(lease.timer)
    this.#all.delete(lease)
    const granting = this.#leases.get(lease.seconds)
    void granting?.lease.then(
      (current) => {
        if (current === lease && this.#leases.get(lease.seconds) === granting) this.#leases.delete(lease.seconds)
      },
      () => {},
    )
    // Should it still live (etcd was unreachable, not gone), its keys must not outlive us.
    lease.handle.revoke().catch(() => {})
    this.#onLost(lease)
  }

  /** Stops every keep-alive and revokes every lease (etcd deletes their keys), within `until`. */
  async close(until: number): Promise<void> {
    this.#closed = true
    const leases = [...this.#all]
    this.#all.clear()
    this.#leases.clear()
    await Promise.allSettled(
      leases.map((lease) => {
        clearTimeout(lease.timer)
        lease.lost = true
        return this.#calls.run(() => lease.handle.revoke(), Math.max(1, until - performance.now()))
      }),
    )
  }
}
