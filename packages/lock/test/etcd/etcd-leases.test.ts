/**
 * What `ttlMs` becomes on etcd (src/etcd/etcd-leases.ts; docs/LOCK.md, "etcd"), whose leases count
 * whole seconds, at least its minimum (2 s with the default election timeout). The choice: a lock
 * keeps the `ttlMs` it was given — `lock.ttlMs`, `remainingMs()`, the events, and when a live
 * holder that does not renew loses it — and only its key's lease, which frees the lock of a holder
 * that died or paused, is rounded up. Nothing is refused: every `ttlMs` is honoured for a live
 * holder (its Locker deletes the key when the lock runs out), and the lease is only ever longer.
 */
import { beforeAll, describe, expect, it } from 'vitest'
import { InvalidLockOptionError } from '../../src/index.js'
import { unique } from '../support/connections.js'
import { eventLog } from '../support/events.js'
import { settle } from '../support/timing.js'
import { etcdClient, etcdLocker, lockRange, startEtcdServer, type EtcdMember } from './etcd-support.js'

let member: EtcdMember
beforeAll(async () => {
  member = await startEtcdServer()
})

/** The lease behind the key of `resource`'s holder: its id, the TTL etcd granted (s), and the key's create_revision. */
async function leaseOf(resource: string): Promise<{ id: string; grantedTTL: number; rev: bigint }> {
  const admin = etcdClient(member.endpoint)
  const [kv] = (await admin.getAll().prefix(lockRange(resource)).exec()).kvs
  const lease = await admin.leaseClient.leaseTimeToLive({ ID: kv!.lease })
  return { id: kv!.lease, grantedTTL: Number(lease.grantedTTL), rev: BigInt(kv!.create_revision) }
}

describe('ttlMs on etcd', () => {
  it("500 ms, below etcd's minimum lease: the lock is 500 ms (ttlMs, remainingMs, the acquired event, and a live holder that does not renew loses it then), its key's lease is etcd's minimum, 2 s", async () => {
    const r = unique('e-ttl-500')
    const log = eventLog()
    const holder = etcdLocker(member.endpoint, { onEvent: log.onEvent })
    const since = performance.now()
    const lock = await holder.acquire(r, { ttlMs: 500 })
    expect(lock.ttlMs).toBe(500)
    expect(lock.remainingMs()).toBeLessThanOrEqual(500)
    expect(log.of('acquired', r)).toMatchObject([{ ttlMs: 500 }])
    // The lease is read off a lock of the same ttlMs the watchdog keeps: the one above is gone at
    // 500 ms, sooner than a loaded machine may read it (a clean-clone run found no key).
    const probe = unique('e-ttl-500-probe')
    const kept = await holder.acquire(probe, { ttlMs: 500, autoExtend: true })
    expect((await leaseOf(probe)).grantedTTL).toBe(2)
    await kept.release()

    // Not renewed: its Locker deletes the key when the 500 ms run out. The lease alone would keep
    // it as long as the Locker lives (its keep-alives go on), so the defect is "never" here.
    const next = await etcdLocker(member.endpoint).acquire(r, { waitMs: 10_000 })
    const waited = performance.now() - since
    expect(waited).toBeGreaterThanOrEqual(495)
    expect(waited).toBeLessThan(5_000)
    expect(next.token > lock.token).toBe(true)
    expect(lock.isHeld()).toBe(false)
    expect(await lock.release()).toBe(false)
    expect(log.of('released', r)).toMatchObject([{ outcome: 'expired' }])
    await next.release()
  })

  it('rounded up to whole seconds: 1500 ms and 500 ms share a lease of 2 s, 2500 ms gets 3 s; extend(20 s) moves the key to a 20 s lease with the same revision (the token)', async () => {
    const locker = etcdLocker(member.endpoint)
    const [a, b, c] = [unique('e-ttl-a'), unique('e-ttl-b'), unique('e-ttl-c')]
    const locks = await Promise.all([
      locker.acquire(a, { ttlMs: 1_500 }),
      locker.acquire(b, { ttlMs: 500, autoExtend: true }),
      locker.acquire(c, { ttlMs: 2_500 }),
    ])
    const [la, lb, lc] = await Promise.all([leaseOf(a), leaseOf(b), leaseOf(c)])
    expect([la.grantedTTL, lb.grantedTTL, lc.grantedTTL]).toEqual([2, 2, 3])
    expect(la.id).toBe(lb.id)
    await locks[0].extend(20_000)
    const moved = await leaseOf(a)
    expect(moved.grantedTTL).toBe(20)
    expect(moved.rev).toBe(locks[0].token)
    expect(locks[0].remainingMs()).toBeGreaterThan(19_000)
    expect(locks[0].remainingMs()).toBeLessThanOrEqual(20_000)
    for (const lock of locks) await lock.release()
  })

  it('bad ttlMs is refused as on Redis, typed and naming the field, before any I/O', async () => {
    const locker = etcdLocker(member.endpoint)
    for (const ttlMs of [0, -1, 1.5, Number.NaN]) {
      const { error } = await settle(() => locker.acquire(unique('e-ttl-bad'), { ttlMs }))
      expect(error).toBeInstanceOf(InvalidLockOptionError)
      expect(error).toMatchObject({ field: 'ttlMs' })
    }
    expect(() => etcdLocker(member.endpoint, { ttlMs: 0 })).toThrow(InvalidLockOptionError)
  })
})
