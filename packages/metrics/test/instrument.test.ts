/**
 * Every lock metric after a known sequence of real locks on the shared Redis: acquire and
 * release, contention with a timeout, an abort, a release after the TTL ran out, a DEL from
 * outside (lost), watchdog renewals, and Redis calls that get no answer (errors).
 */
import { LockLostError, LockTimeoutError, LockAbortedError, LockUnavailableError, resourceKeys } from '@fencelock/lock'
import { Registry } from 'prom-client'
import { describe, expect, it } from 'vitest'
import { instrument } from '../src/index.js'
import { histogramOf, valueOf } from './support/metric-values.js'
import { connectShared, connectThroughProxy, makeLocker, resourceIn, sleep, uniqueGroup } from './support/redis.js'

const redis = await connectShared()

/** A registry, a Locker on the shared Redis instrumented into it, and a group of its own. */
function setUp(options: { ttlMs?: number; waitMs?: number } = {}) {
  const registry = new Registry()
  const locker = makeLocker(redis, options)
  const metrics = instrument(locker, { registry })
  const group = uniqueGroup('m')
  return { registry, locker, metrics, group }
}

const acquires = (registry: Registry, group: string, outcome: string) => valueOf(registry, 'fencelock_acquire_total', { group, outcome })
const releases = (registry: Registry, group: string, outcome: string) => valueOf(registry, 'fencelock_release_total', { group, outcome })
const renewals = (registry: Registry, group: string, outcome: string) => valueOf(registry, 'fencelock_renew_total', { group, outcome })
const held = (registry: Registry, group: string) => valueOf(registry, 'fencelock_held', { group })

async function until(condition: () => Promise<boolean> | boolean, ms = 5_000): Promise<void> {
  const end = performance.now() + ms
  while (!(await condition())) {
    if (performance.now() > end) throw new Error(`condition not met within ${ms} ms`)
    await sleep(10)
  }
}

describe('instrument(locker)', () => {
  it('counts a free acquire and its release: acquired, a short wait, held 1 then 0, a release and its hold', async () => {
    const { registry, locker, group } = setUp()
    const lock = await locker.acquire(resourceIn(group))
    expect(await acquires(registry, group, 'acquired')).toBe(1)
    expect(await held(registry, group)).toBe(1)
    const wait = await histogramOf(registry, 'fencelock_wait_seconds', { group })
    expect(wait?.count).toBe(1)
    expect(wait?.sum).toBeLessThan(0.5)
    await sleep(30)
    expect(await lock.release()).toBe(true)
    expect(await held(registry, group)).toBe(0)
    expect(await releases(registry, group, 'released')).toBe(1)
    expect(await releases(registry, group, 'expired')).toBe(0)
    const hold = await histogramOf(registry, 'fencelock_hold_seconds', { group })
    expect(hold?.count).toBe(1)
    expect(hold?.sum).toBeGreaterThanOrEqual(0.025)
    // Held at least 30 ms: nothing at or below 10 ms.
    expect(hold?.buckets.get('0.01')).toBe(0)
  })

  it('creates every series of a group at zero on its first event, so rate() sees each first increase', async () => {
    const { registry, locker, group } = setUp()
    const lock = await locker.acquire(resourceIn(group))
    for (const outcome of ['timeout', 'aborted', 'error']) expect(await acquires(registry, group, outcome)).toBe(0)
    for (const outcome of ['released', 'expired']) expect(await releases(registry, group, outcome)).toBe(0)
    for (const outcome of ['ok', 'lost', 'error']) expect(await renewals(registry, group, outcome)).toBe(0)
    expect(await valueOf(registry, 'fencelock_lost_total', { group })).toBe(0)
    expect((await histogramOf(registry, 'fencelock_hold_seconds', { group }))?.count).toBe(0)
    await lock.release()
  })

  it('counts a contended acquire that times out, with its wait in the right bucket', async () => {
    const { registry, locker, group } = setUp()
    const other = makeLocker(redis)
    const resource = resourceIn(group)
    const holder = await other.acquire(resource)
    await expect(locker.acquire(resource, { waitMs: 150 })).rejects.toBeInstanceOf(LockTimeoutError)
    expect(await acquires(registry, group, 'timeout')).toBe(1)
    expect(await acquires(registry, group, 'acquired')).toBe(0)
    const wait = await histogramOf(registry, 'fencelock_wait_seconds', { group })
    expect(wait?.count).toBe(1)
    // Waited 150 ms (plus timer lateness): in (0.1, 0.25].
    expect(wait?.buckets.get('0.1')).toBe(0)
    expect(wait?.buckets.get('0.25')).toBe(1)
    // Then a contended acquire that succeeds once the holder releases: its wait is measured too.
    const waiting = locker.acquire(resource, { waitMs: 5_000 })
    await sleep(60)
    await holder.release()
    const lock = await waiting
    expect(await acquires(registry, group, 'acquired')).toBe(1)
    const after = await histogramOf(registry, 'fencelock_wait_seconds', { group })
    expect(after?.count).toBe(2)
    expect(after?.buckets.get('0.05')).toBe(0)
    expect(after?.buckets.get('0.25')).toBe(2)
    await lock.release()
    expect(await held(registry, group)).toBe(0)
  })

  it('counts an acquire given up through its AbortSignal as aborted', async () => {
    const { registry, locker, group } = setUp()
    const resource = resourceIn(group)
    const holder = await makeLocker(redis).acquire(resource)
    const controller = new AbortController()
    const waiting = locker.acquire(resource, { waitMs: 5_000, signal: controller.signal })
    setTimeout(() => controller.abort(), 40)
    await expect(waiting).rejects.toBeInstanceOf(LockAbortedError)
    expect(await acquires(registry, group, 'aborted')).toBe(1)
    expect((await histogramOf(registry, 'fencelock_wait_seconds', { group }))?.count).toBe(1)
    await holder.release()
  })

  it('counts a lock whose TTL ran out unreleased as lost when it runs out (not a renewal), and its late release not again', async () => {
    const { registry, locker, group } = setUp()
    const lock = await locker.acquire(resourceIn(group), { ttlMs: 50 })
    expect(await held(registry, group)).toBe(1)
    await sleep(120)
    // The lease ran out on the holder's clock: the lock is lost (its signal aborted), not held.
    expect(lock.signal.aborted).toBe(true)
    expect(await held(registry, group)).toBe(0)
    expect(await valueOf(registry, 'fencelock_lost_total', { group })).toBe(1)
    expect(await renewals(registry, group, 'lost')).toBe(0)
    expect(await lock.release()).toBe(false)
    expect(await releases(registry, group, 'expired')).toBe(0)
    expect(await releases(registry, group, 'released')).toBe(0)
    expect(await valueOf(registry, 'fencelock_lost_total', { group })).toBe(1)
    expect(await held(registry, group)).toBe(0)
  })

  it('counts watchdog renewals as ok, a DEL from outside as lost, and never counts the lost lock twice', async () => {
    const { registry, locker, group } = setUp()
    const resource = resourceIn(group)
    const lock = await locker.acquire(resource, { ttlMs: 300, autoExtend: true })
    // The watchdog renews every ttlMs / 3 = 100 ms.
    await until(async () => ((await renewals(registry, group, 'ok')) ?? 0) >= 2)
    expect(await held(registry, group)).toBe(1)
    await redis.del(resourceKeys(locker.options.prefix, resource).lock)
    await until(() => lock.signal.aborted)
    expect(lock.signal.reason).toBeInstanceOf(LockLostError)
    expect(await valueOf(registry, 'fencelock_lost_total', { group })).toBe(1)
    expect(await renewals(registry, group, 'lost')).toBe(1)
    expect(await held(registry, group)).toBe(0)
    const hold = await histogramOf(registry, 'fencelock_hold_seconds', { group })
    expect(hold?.count).toBe(1)
    expect(hold?.sum).toBeGreaterThanOrEqual(0.2)
    // Releasing the lost lock is not a second end: release_total, held and hold stay as they are.
    expect(await lock.release()).toBe(false)
    expect(await releases(registry, group, 'expired')).toBe(0)
    expect(await releases(registry, group, 'released')).toBe(0)
    expect(await held(registry, group)).toBe(0)
    expect((await histogramOf(registry, 'fencelock_hold_seconds', { group }))?.count).toBe(1)
  })

  it('counts Redis calls that get no answer: acquire errors, renew errors, a lock lost when its validity runs out', async () => {
    const { proxy, client } = await connectThroughProxy({ maxRetriesPerRequest: null })
    await client.ping()
    const registry = new Registry()
    const locker = makeLocker(client, { commandTimeoutMs: 80 })
    instrument(locker, { registry })
    const group = uniqueGroup('e')

    // Renewals: a watched lock whose renewals time out, until its local validity (600 ms) is gone.
    const watched = await locker.acquire(resourceIn(group), { ttlMs: 600, autoExtend: true })
    proxy.blackhole()
    await until(() => watched.signal.aborted, 3_000)
    expect(watched.signal.reason).toBeInstanceOf(LockLostError)
    expect(await renewals(registry, group, 'error')).toBeGreaterThanOrEqual(1)
    expect(await renewals(registry, group, 'lost')).toBe(1)
    expect(await valueOf(registry, 'fencelock_lost_total', { group })).toBe(1)
    expect(await held(registry, group)).toBe(0)

    // Acquire: the call fails as unavailable, counted once as outcome="error".
    await expect(locker.acquire(resourceIn(group), { waitMs: 0 })).rejects.toBeInstanceOf(LockUnavailableError)
    expect(await acquires(registry, group, 'error')).toBe(1)
    expect(await acquires(registry, group, 'timeout')).toBe(0)
    // Dropped commands never get a reply, so this connection is out of step for good: the
    // proxy and client are closed in afterAll.
  })

  it('takes a lock whose release got no answer off held without counting a release', async () => {
    const { proxy, client } = await connectThroughProxy({ maxRetriesPerRequest: null })
    await client.ping()
    const registry = new Registry()
    const locker = makeLocker(client, { commandTimeoutMs: 80 })
    instrument(locker, { registry })
    const group = uniqueGroup('r')
    const lock = await locker.acquire(resourceIn(group), { ttlMs: 1_000 })
    expect(await held(registry, group)).toBe(1)
    proxy.blackhole()
    await expect(lock.release()).rejects.toBeInstanceOf(LockUnavailableError)
    expect(await held(registry, group)).toBe(0)
    expect(await releases(registry, group, 'released')).toBe(0)
    expect(await releases(registry, group, 'expired')).toBe(0)
    // Dropped commands never get a reply, so this connection is out of step for good: the
    // proxy and client are closed in afterAll.
  })

  it('keeps acquired = released + expired + lost + held over a mixed run', async () => {
    const { registry, locker, group } = setUp()
    const resources = [resourceIn(group), resourceIn(group), resourceIn(group)]
    const kept = await locker.acquire(resources[0]!)
    const expiring = await locker.acquire(resources[1]!, { ttlMs: 40 })
    const lost = await locker.acquire(resources[2]!, { ttlMs: 300, autoExtend: true })
    for (let i = 0; i < 5; i++) await (await locker.acquire(resourceIn(group))).release()
    await sleep(60)
    await expiring.release()
    await redis.del(resourceKeys(locker.options.prefix, resources[2]!).lock)
    await until(() => lost.signal.aborted)
    await lost.release()
    const acquired = (await acquires(registry, group, 'acquired')) ?? 0
    const ended =
      ((await releases(registry, group, 'released')) ?? 0) +
      ((await releases(registry, group, 'expired')) ?? 0) +
      ((await valueOf(registry, 'fencelock_lost_total', { group })) ?? 0)
    expect(acquired).toBe(8)
    expect(ended + ((await held(registry, group)) ?? 0)).toBe(acquired)
    expect(await held(registry, group)).toBe(1)
    await kept.release()
    expect(await held(registry, group)).toBe(0)
  })

  it('adds two lockers instrumented into one registry into the same series', async () => {
    const registry = new Registry()
    const a = makeLocker(redis)
    const b = makeLocker(redis)
    const ma = instrument(a, { registry })
    const mb = instrument(b, { registry })
    expect(mb.metrics.acquireTotal).toBe(ma.metrics.acquireTotal)
    const group = uniqueGroup('two')
    const la = await a.acquire(resourceIn(group))
    const lb = await b.acquire(resourceIn(group))
    expect(await acquires(registry, group, 'acquired')).toBe(2)
    expect(await held(registry, group)).toBe(2)
    await la.release()
    await lb.release()
    expect(await held(registry, group)).toBe(0)
  })

  it('stop() unsubscribes and takes the locks it counted off held', async () => {
    const { registry, locker, metrics, group } = setUp()
    const lock = await locker.acquire(resourceIn(group))
    expect(await held(registry, group)).toBe(1)
    metrics.stop()
    expect(await held(registry, group)).toBe(0)
    await lock.release()
    await (await locker.acquire(resourceIn(group))).release()
    expect(await acquires(registry, group, 'acquired')).toBe(1)
    expect(await releases(registry, group, 'released')).toBe(0)
    metrics.stop()
    expect(await held(registry, group)).toBe(0)
  })

  it('does not count a lock acquired before instrument() when it ends', async () => {
    const registry = new Registry()
    const locker = makeLocker(redis)
    const group = uniqueGroup('before')
    const lock = await locker.acquire(resourceIn(group))
    instrument(locker, { registry })
    await lock.release()
    expect(await held(registry, group)).toBeUndefined()
    expect(await releases(registry, group, 'released')).toBeUndefined()
  })

  it('counts elections: fencelock_leader_changes_total per election won, fencelock_is_leader 1 while leading and 0 once demoted or stopped', async () => {
    const { registry, locker, group, metrics } = setUp()
    const other = makeLocker(redis)
    const name = resourceIn(group)
    const isLeader = () => valueOf(registry, 'fencelock_is_leader', { group })
    const changes = () => valueOf(registry, 'fencelock_leader_changes_total', { group })
    const mine = locker.lead(name, { ttlMs: 1_000, onElected: () => {} })
    await until(() => mine.isLeader)
    expect(await isLeader()).toBe(1)
    expect(await changes()).toBe(1)
    const theirs = other.lead(name, { ttlMs: 1_000, onElected: () => {} })
    await mine.stop()
    expect(await isLeader()).toBe(0)
    await until(() => theirs.isLeader)
    // Another process's election is counted there, not here.
    expect(await changes()).toBe(1)
    const again = locker.lead(name, { ttlMs: 1_000, onElected: () => {} })
    await theirs.stop()
    await until(() => again.isLeader)
    expect(await isLeader()).toBe(1)
    expect(await changes()).toBe(2)
    metrics.stop()
    expect(await isLeader()).toBe(0)
    await again.stop()
  })
})
