import { describe, expect, it } from 'vitest'
import { LockTimeoutError, resourceKeys, type Locker } from '../src/index.js'
import { commandCalls, unique } from './support/connections.js'
import { eventLog } from './support/events.js'
import { useScriptedServer } from './support/scripted-server.js'
import { settle, sleep, waitUntil } from './support/timing.js'

// The wait queue in Redis: a release hands the lock to the locker that has waited longest.
const env = useScriptedServer()
const lockerOn = env.lockerOn

/** Server time in ms, as the scripts see it. */
async function serverMs(): Promise<number> {
  const [s, us] = (await env.admin.time()) as unknown as [string | number, string | number]
  return Number(s) * 1000 + Math.floor(Number(us) / 1000)
}

/** `lockers` loop acquire → hold → release on one resource for `ms`; grants per locker. */
async function contend(lockers: Locker[], resource: string, ms: number, holdMs: number): Promise<number[]> {
  const counts = lockers.map(() => 0)
  const until = performance.now() + ms
  await Promise.all(
    lockers.map(async (locker, i) => {
      while (performance.now() < until) {
        const lock = await locker.acquire(resource, { ttlMs: 5_000, waitMs: 5_000 })
        counts[i]!++
        await sleep(holdMs)
        await lock.release()
      }
    }),
  )
  return counts
}

describe('the wait queue in Redis (one locker per process)', () => {
  it('8 Lockers looping on one key share it evenly, with about 4 script calls and 1 miss per grant', async () => {
    const lockers = Array.from({ length: 8 }, () => lockerOn({ pollMs: 5_000 }))
    for (const locker of lockers) await (await locker.acquire(unique('warm'))).release()
    await env.admin.config('RESETSTAT')
    const counts = await contend(lockers, unique('fair'), 2_000, 2)
    const grants = counts.reduce((a, b) => a + b, 0)
    expect(Math.min(...counts)).toBeGreaterThanOrEqual(0.7 * Math.max(...counts))
    expect(grants).toBeGreaterThan(100)
    // Each grant: its release (and the hand-off that follows, as others are queued), the named
    // locker's try, and the releaser's own miss as it queues again. A wake-everyone release
    // would cost ~8 tries per grant, 7 of them misses.
    const calls = await commandCalls(env.admin)
    const scriptCalls = (calls.evalsha ?? 0) + (calls.eval ?? 0)
    expect(scriptCalls / grants).toBeLessThanOrEqual(4.5)
    expect((calls.pttl ?? 0) / grants).toBeLessThanOrEqual(1.5)
  })

  it('skips a queued locker whose lease ran out (a crashed process): the next waiter gets the lock at once', async () => {
    const resource = unique('dead-lease')
    const keys = resourceKeys('fencelock:', resource)
    const holder = await lockerOn().acquire(resource, { ttlMs: 10_000 })
    await env.admin.rpush(keys.queue, 'crashed-locker')
    await env.admin.hset(keys.leases, 'crashed-locker', (await serverMs()) - 1)
    const l = eventLog()
    const waiting = lockerOn({ pollMs: 5_000, onEvent: l.onEvent }).acquire(resource, { waitMs: 5_000 })
    await waitUntil(async () => (await env.admin.llen(keys.queue)) === 2, { what: 'the live waiter to queue behind the dead one' })
    const releasedAt = performance.now()
    await holder.release()
    const lock = await waiting
    expect(performance.now() - releasedAt).toBeLessThan(200)
    expect(await env.admin.lrange(keys.queue, 0, -1)).toEqual([])
    expect(await env.admin.hgetall(keys.leases)).toEqual({})
    expect(await lock.release()).toBe(true)
  })

  it('a locker handed the lock that never takes it holds others up for handoffMs, not longer', async () => {
    const resource = unique('no-show')
    const keys = resourceKeys('fencelock:', resource)
    const holder = await lockerOn().acquire(resource, { ttlMs: 10_000 })
    // A live lease, but nobody behind the id: the lock is handed to it and it never comes.
    await env.admin.rpush(keys.queue, 'silent-locker')
    await env.admin.hset(keys.leases, 'silent-locker', (await serverMs()) + 60_000)
    const waiter = lockerOn({ pollMs: 5_000 })
    const waiting = waiter.acquire(resource, { waitMs: 5_000 })
    await waitUntil(async () => (await env.admin.llen(keys.queue)) === 2, { what: 'the waiter to queue behind the silent one' })
    const releasedAt = performance.now()
    await holder.release()
    expect(await env.admin.get(keys.lock)).toBe('~silent-locker')
    const lock = await waiting
    const waited = performance.now() - releasedAt
    // The releaser's handoffMs (default 500) runs out, the key expires, and the waiter's retry
    // at the key's PTTL takes it.
    expect(waited).toBeGreaterThanOrEqual(450)
    expect(waited).toBeLessThan(1_500)
    expect(await lock.release()).toBe(true)
  })

  it('a waiter that gives up leaves the queue, and a lock handed to it meanwhile is passed on', async () => {
    const resource = unique('leaver')
    const keys = resourceKeys('fencelock:', resource)
    const holderLocker = lockerOn()
    const holder = await holderLocker.acquire(resource, { ttlMs: 10_000 })
    const first = lockerOn({ pollMs: 5_000 })
    const second = lockerOn({ pollMs: 5_000 })
    const gaveUp = settle(first.acquire(resource, { waitMs: 400 }))
    await waitUntil(async () => (await env.admin.llen(keys.queue)) === 1, { what: 'the first waiter to queue' })
    const secondWaits = second.acquire(resource, { waitMs: 5_000 })
    await waitUntil(async () => (await env.admin.llen(keys.queue)) === 2, { what: 'the second waiter to queue' })
    expect((await gaveUp).error).toBeInstanceOf(LockTimeoutError)
    await waitUntil(async () => (await env.admin.llen(keys.queue)) === 1, { what: 'the first waiter to leave' })
    expect(Object.keys(await env.admin.hgetall(keys.leases))).toHaveLength(1)
    const releasedAt = performance.now()
    await holder.release()
    const lock = await secondWaits
    expect(performance.now() - releasedAt).toBeLessThan(200)
    expect(await lock.release()).toBe(true)
    expect(await env.admin.exists(keys.lock, keys.queue, keys.leases)).toBe(0)
  })
})
