import type { Redis } from 'ioredis'
import { beforeAll, describe, expect, it } from 'vitest'
import { acquireOnce } from '../src/acquire-script.js'
import { LockError, resourceKeys, type Locker } from '../src/index.js'
import { newOwnerId } from '../src/owner-id.js'
import { connectShared, makeLocker, unique } from './support/connections.js'

const PREFIX = unique('fl-test-acquire') + ':'
const DAY = 86_400_000

let redis: Redis
beforeAll(async () => {
  redis = await connectShared()
})

/** Redis server time in µs, as bigint. */
async function serverMicros(): Promise<bigint> {
  const [s, us] = await redis.time()
  return BigInt(s ?? Number.NaN) * 1_000_000n + BigInt(us ?? Number.NaN)
}

describe('acquireOnce (one script: SET NX PX and the token)', () => {
  it('grants a free lock: our owner id in the key with the TTL, and a token minted in the same script', async () => {
    const keys = resourceKeys(PREFIX, unique('grant'))
    const owner = newOwnerId()
    const before = await serverMicros()
    const attempt = await acquireOnce(redis, keys, owner, 2_000, DAY)
    const after = await serverMicros()
    expect(attempt.granted).toBe(true)
    if (!attempt.granted) return
    expect(typeof attempt.token).toBe('bigint')
    // A fresh resource gets the server time in µs.
    expect(attempt.token).toBeGreaterThanOrEqual(before)
    expect(attempt.token).toBeLessThanOrEqual(after)
    expect(await redis.get(keys.lock)).toBe(owner)
    expect(await redis.pttl(keys.lock)).toBeGreaterThan(1_500)
    expect(await redis.get(keys.fence)).toBe(String(attempt.token))
    // The counter expires instead of leaking.
    const fencePttl = await redis.pttl(keys.fence)
    expect(fencePttl).toBeGreaterThan(DAY - 10_000)
    expect(fencePttl).toBeLessThanOrEqual(DAY)
  })

  it("misses a held lock with the holder's remaining PTTL, and touches neither key", async () => {
    const keys = resourceKeys(PREFIX, unique('miss'))
    const first = await acquireOnce(redis, keys, newOwnerId(), 5_000, DAY)
    expect(first.granted).toBe(true)
    const holder = await redis.get(keys.lock)
    const fence = await redis.get(keys.fence)
    const second = await acquireOnce(redis, keys, newOwnerId(), 5_000, DAY)
    expect(second).toEqual({ granted: false, holderTtlMs: expect.any(Number) })
    if (second.granted) return
    expect(second.holderTtlMs).toBeGreaterThan(4_000)
    expect(second.holderTtlMs).toBeLessThanOrEqual(5_000)
    expect(await redis.get(keys.lock)).toBe(holder)
    expect(await redis.get(keys.fence)).toBe(fence)
  })

  it('reports -1 for a holder key without expiry', async () => {
    const keys = resourceKeys(PREFIX, unique('persist'))
    await redis.set(keys.lock, 'someone')
    expect(await acquireOnce(redis, keys, newOwnerId(), 1_000, DAY)).toEqual({ granted: false, holderTtlMs: -1 })
    await redis.del(keys.lock)
  })

  it('mints max(last + 1, now): exactly last + 1 while the counter is ahead of the clock', async () => {
    const keys = resourceKeys(PREFIX, unique('ahead'))
    const ahead = (await serverMicros()) + 10_000_000_000n
    await redis.set(keys.fence, String(ahead))
    const attempt = await acquireOnce(redis, keys, newOwnerId(), 1_000, DAY)
    expect(attempt).toEqual({ granted: true, token: ahead + 1n, handedOver: false })
  })

  it('stays above every earlier token when the counter key is gone (expired or deleted)', async () => {
    const keys = resourceKeys(PREFIX, unique('gone'))
    const tokens: bigint[] = []
    for (let i = 0; i < 5; i++) {
      const a = await acquireOnce(redis, keys, newOwnerId(), 1_000, DAY)
      if (!a.granted) throw new Error('expected a grant')
      tokens.push(a.token)
      await redis.del(keys.lock, keys.fence)
    }
    for (let i = 1; i < tokens.length; i++) expect(tokens[i]!).toBeGreaterThan(tokens[i - 1]!)
  })

  it('control: a plain INCR counter would go back to 1 after losing its key', async () => {
    const key = resourceKeys(PREFIX, unique('incr')).fence
    await redis.incrby(key, 1_000)
    await redis.del(key)
    expect(await redis.incr(key)).toBe(1)
    await redis.del(key)
  })
})

describe('tokens through the Locker', () => {
  let locker: Locker
  let other: Locker
  beforeAll(async () => {
    locker = makeLocker(redis, { prefix: PREFIX })
    other = makeLocker(await connectShared(), { prefix: PREFIX })
  })

  it('strictly increase over 1,000 grants, alternating two Lockers on two connections', async () => {
    const resource = unique('thousand')
    let last = -1n
    let increases = 0
    for (let i = 0; i < 1_000; i++) {
      const lock = await (i % 2 ? other : locker).acquire(resource, { ttlMs: 1_000, waitMs: 0 })
      if (lock.token > last) increases++
      last = lock.token
      await lock.release()
    }
    expect(increases).toBe(1_000)
  })

  // 2^53 is where a JS number or a Lua double stops holding every integer.
  it.each([
    ['2^53 - 2', 2n ** 53n - 2n],
    ['2^53 - 1', 2n ** 53n - 1n],
    ['2^53', 2n ** 53n],
    ['2^53 + 5', 2n ** 53n + 5n],
    ['2^63 - 10', 2n ** 63n - 10n],
    ['2^63 - 2', 2n ** 63n - 2n],
  ])('stays exact above 2^53: counter at %s -> next token is exactly +1 (bigint)', async (_label, counter) => {
    const resource = unique('big')
    const keys = resourceKeys(locker.options.prefix, resource)
    await redis.set(keys.fence, String(counter))
    const lock = await locker.acquire(resource, { ttlMs: 1_000, waitMs: 0 })
    expect(typeof lock.token).toBe('bigint')
    expect(lock.token).toBe(counter + 1n)
    expect(await redis.get(keys.fence)).toBe(String(counter + 1n))
    await lock.release()
    if (counter + 2n > 2n ** 63n - 1n) return // Redis integers are signed 64-bit
    const next = await locker.acquire(resource, { ttlMs: 1_000, waitMs: 0 })
    expect(next.token).toBe(counter + 2n)
    await next.release()
  })

  it('control: a JS number cannot tell those tokens apart', () => {
    expect(Number(2n ** 53n + 1n)).toBe(Number(2n ** 53n))
    expect(Number(2n ** 63n - 9n)).toBe(Number(2n ** 63n - 10n))
  })

  it('fails, and leaves no lock behind, when the counter cannot advance (2^63 - 1)', async () => {
    const resource = unique('overflow')
    const keys = resourceKeys(locker.options.prefix, resource)
    await redis.set(keys.fence, String(2n ** 63n - 1n))
    await expect(locker.tryAcquire(resource, { ttlMs: 5_000 })).rejects.toBeInstanceOf(LockError)
    // The script set the lock key before INCR failed; the clean-up must have deleted it.
    await new Promise((r) => setTimeout(r, 50))
    expect(await redis.exists(keys.lock)).toBe(0)
    expect(await redis.get(keys.fence)).toBe(String(2n ** 63n - 1n))
  })

  it('lets the counter key expire after fenceTtlMs (no key leak)', async () => {
    const short = makeLocker(redis, { prefix: PREFIX, fenceTtlMs: 1_000 })
    const lock = await short.acquire(unique('fence-ttl'), { ttlMs: 500 })
    const pttl = await redis.pttl(resourceKeys(PREFIX, lock.resource).fence)
    expect(pttl).toBeGreaterThan(800)
    expect(pttl).toBeLessThanOrEqual(1_000)
    await lock.release()
  })
})
