// The locks-held view of /api/state, on real Redis with a real Locker: a live lease shows its
// TTL; a holder whose lease is gone (as after a pause past the TTL) still shows, as not live;
// a release removes it.
import { Locker } from '@fencelock/lock'
import { Redis } from 'ioredis'
import { afterAll, describe, expect, it } from 'vitest'
import { heldLocksRecorder, readHeldLocks } from '../src/held-locks.js'
import { lockPrefixOf, shopKeys } from '../src/shop-keys.js'
import { REDIS_URL, uniqueRun } from './services.js'

const { runId } = uniqueRun('held')
const redis = new Redis(REDIS_URL)
const prefix = lockPrefixOf(runId)
const key = shopKeys(runId).heldLocks
const locker = new Locker(redis, { prefix, ttlMs: 5_000 })
locker.listen(heldLocksRecorder(redis, key, 'shop-x'))

afterAll(async () => {
  await locker.close()
  await redis.del(key)
  redis.disconnect()
})

const until = async (check: () => Promise<boolean>) => {
  for (let i = 0; i < 100 && !(await check()); i++) await new Promise((r) => setTimeout(r, 20))
}

describe('readHeldLocks', () => {
  it('shows a live lease with its holder, token and TTL left; a lost lease as not live; nothing after release', async () => {
    const lock = await locker.acquire('product:held-1')
    await until(async () => (await readHeldLocks(redis, key, locker)).length === 1)
    const [held] = await readHeldLocks(redis, key, locker)
    expect(held).toMatchObject({ resource: 'product:held-1', instance: 'shop-x', pid: process.pid, token: String(lock.token), leaseLive: true })
    expect(held?.ttlLeftMs).toBeGreaterThan(4_000)
    expect(held?.ttlLeftMs).toBeLessThanOrEqual(5_000)

    // The lease disappears under the holder, as when it was frozen past its TTL.
    await redis.del(`${prefix}{product:held-1}:lock`)
    const [zombie] = await readHeldLocks(redis, key, locker)
    expect(zombie).toMatchObject({ resource: 'product:held-1', leaseLive: false, ttlLeftMs: 0 })

    await lock.release()
    await until(async () => (await readHeldLocks(redis, key, locker)).length === 0)
    expect(await readHeldLocks(redis, key, locker)).toEqual([])
  })

  it('marks the older of two holders of one resource as not live once a newer token holds it', async () => {
    // The older holder is frozen past its TTL (as under SIGSTOP): it recorded its grant and can
    // record nothing more. (A live one would see its lease run out and drop its entry itself.)
    const frozen = new Locker(redis, { prefix })
    const record = heldLocksRecorder(redis, key, 'shop-frozen')
    frozen.listen((event) => {
      if (event.type === 'acquired') record(event)
    })
    const old = await frozen.acquire('order:held-2', { ttlMs: 200 })
    await new Promise((r) => setTimeout(r, 300))
    const fresh = await locker.acquire('order:held-2', { ttlMs: 5_000 })
    await until(async () => (await readHeldLocks(redis, key, locker)).filter((l) => l.resource === 'order:held-2').length === 2)
    const views = (await readHeldLocks(redis, key, locker)).filter((l) => l.resource === 'order:held-2')
    expect(views.map((v) => [v.token, v.leaseLive])).toEqual([
      [String(old.token), false],
      [String(fresh.token), true],
    ])
    await old.release()
    await fresh.release()
    await frozen.close()
  })
})

describe('heldLocksRecorder', () => {
  it('publishes no write per lock event: a burst within the flush interval writes nothing until the flush, which writes the latest list', async () => {
    const writes: string[] = []
    const counting = {
      hset: (...args: Parameters<Redis['hset']>) => (writes.push('hset'), redis.hset(...args)),
      hdel: (...args: Parameters<Redis['hdel']>) => (writes.push('hdel'), redis.hdel(...args)),
    } as Pick<Redis, 'hset' | 'hdel'>
    const burst = new Locker(redis, { prefix })
    // A flush interval no test outlasts: every write below is the leading one or an explicit flush.
    const record = heldLocksRecorder(counting, key, 'shop-burst', { flushMs: 3_600_000 })
    burst.listen(record)
    for (let i = 0; i < 20; i++) await (await burst.acquire(`order:burst-${i}`)).release()
    expect(writes, 'no write for 40 events within the flush interval').toEqual([])
    const kept = await burst.acquire('product:burst-kept')
    record.flush()
    await until(async () => (await readHeldLocks(redis, key, locker)).some((l) => l.resource === 'product:burst-kept'))
    expect((await readHeldLocks(redis, key, locker)).filter((l) => l.instance === 'shop-burst')).toMatchObject([
      { resource: 'product:burst-kept', token: String(kept.token), leaseLive: true },
    ])
    await kept.release()
    record.flush()
    expect(writes).toEqual(['hset', 'hdel'])
    await until(async () => !(await readHeldLocks(redis, key, locker)).some((l) => l.instance === 'shop-burst'))
    expect((await readHeldLocks(redis, key, locker)).filter((l) => l.instance === 'shop-burst')).toEqual([])
    await burst.close()
  })
})

describe('heldLocksRecorder, timed writes', () => {
  it('publishes only the locks held for the flush interval: short holds (a sale\'s) are never written, a long one is, once', async () => {
    const writes: string[] = []
    const counting = {
      hset: (...args: Parameters<Redis['hset']>) => (writes.push(String(args[2])), redis.hset(...args)),
      hdel: (...args: Parameters<Redis['hdel']>) => (writes.push('hdel'), redis.hdel(...args)),
    } as Pick<Redis, 'hset' | 'hdel'>
    const sale = new Locker(redis, { prefix })
    sale.listen(heldLocksRecorder(counting, key, 'shop-short', { flushMs: 300 }))
    // Short holds for four flush intervals at least (the recorder before this change wrote every
    // interval: the latest list or an HDEL, 4 writes or more here); each is released long before due.
    const start = performance.now()
    for (let i = 0; performance.now() - start < 1_200; i++) await (await sale.acquire(`order:short-${i}`)).release()
    expect(writes, 'no write for locks held shorter than the interval').toEqual([])
    const long = await sale.acquire('product:short-long')
    // Bounded wait on the condition: the long hold's write (due 300 ms after its grant).
    for (let i = 0; i < 500 && writes.length === 0; i++) await new Promise((r) => setTimeout(r, 20))
    expect(writes).toHaveLength(1)
    expect(writes[0]).toContain('product:short-long')
    expect(writes[0]).not.toContain('order:short-')
    const seen = await readHeldLocks(redis, key, locker)
    expect(seen.filter((l) => l.instance === 'shop-short')).toMatchObject([{ resource: 'product:short-long', token: String(long.token), leaseLive: true }])
    await long.release()
    for (let i = 0; i < 500 && writes.length === 1; i++) await new Promise((r) => setTimeout(r, 20))
    expect(writes).toEqual([writes[0], 'hdel'])
    await sale.close()
  })
})

describe('readHeldLocks with the reading instance’s recorder', () => {
  it('takes its own locks from memory and hides another instance’s lock released since its last write until its lease could have run out', async () => {
    const lockerA = new Locker(redis, { prefix })
    const lockerB = new Locker(redis, { prefix })
    const a = heldLocksRecorder(redis, key, 'shop-a', { flushMs: 3_600_000 })
    const b = heldLocksRecorder(redis, key, 'shop-b', { flushMs: 3_600_000 })
    lockerA.listen(a)
    lockerB.listen(b)
    const mine = await lockerA.acquire('order:own-1', { ttlMs: 60_000 })
    const theirs = await lockerB.acquire('order:theirs-1', { ttlMs: 60_000 })
    a.flush()
    b.flush()
    await until(async () => (await readHeldLocks(redis, key, locker)).filter((l) => l.resource.endsWith('-1')).length === 2)
    await mine.release()
    await theirs.release()
    // Neither release is published yet: the raw view shows both as not live.
    const raw = (await readHeldLocks(redis, key, locker)).filter((l) => l.resource.endsWith('-1'))
    expect(raw.map((l) => [l.resource, l.leaseLive])).toEqual([['order:own-1', false], ['order:theirs-1', false]])
    // Instance A's view: its own from memory (gone), B's hidden (its lease could not have run out).
    expect((await readHeldLocks(redis, key, lockerA, a)).filter((l) => l.resource.endsWith('-1'))).toEqual([])
    a.flush()
    b.flush()
    await lockerA.close()
    await lockerB.close()
  })
})
