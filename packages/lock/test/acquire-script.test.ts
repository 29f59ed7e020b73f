import type { Redis } from 'ioredis'
import { beforeAll, describe, expect, it } from 'vitest'
import { acquireOnce } from './support/scripts.js'
import { LockError, resourceKeys, type Locker } from '../src/index.js'
import { newOwnerId } from '../src/owner-id.js'
import { connectShared, makeLocker, unique } from './support/connections.js'

const PREFIX = unique('fl-test-acquire') + ':'
const DAY = 86_400_000
/** The locker id a try sends: a key handed to it ('~' + id) is the try's to take. */
const LOCKER = 'test-locker'

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
    const attempt = await acquireOnce(redis, keys, { ownerId: owner, ttlMs: 2_000, fenceTtlMs: DAY, lockerId: LOCKER })
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
    const first = await acquireOnce(redis, keys, {
      ownerId: newOwnerId(),
      ttlMs: 5_000,
      fenceTtlMs: DAY,
      lockerId: LOCKER,
    })
    expect(first.granted).toBe(true)
    const holder = await redis.get(keys.lock)
    const fence = await redis.get(keys.fence)
    const second = await acquireOnce(redis, keys, {
      ownerId: newOwnerId(),
      ttlMs: 5_000,
      fenceTtlMs: DAY,
      lockerId: LOCKER,
    })
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
    expect(
      await acquireOnce(redis, keys, { ownerId: newOwnerId(), ttlMs: 1_000, fenceTtlMs: DAY, lockerId: LOCKER }),
    ).toEqual({ granted: false, holderTtlMs: -1 })
    await redis.del(keys.lock)
  })

  it('INCRs an existing counter: exactly last + 1, ahead of the clock or behind it, and gives it a fresh fenceTtlMs (it lives that long from its last grant)', async () => {
    const keys = resourceKeys(PREFIX, unique('ahead'))
    const ahead = (await serverMicros()) + 10_000_000_000n
    await redis.set(keys.fence, String(ahead), 'PX', 60_000)
    const attempt = await acquireOnce(redis, keys, {
      ownerId: newOwnerId(),
      ttlMs: 1_000,
      fenceTtlMs: DAY,
      lockerId: LOCKER,
    })
    expect(attempt).toEqual({ granted: true, token: ahead + 1n, handedOver: false })
    expect(await redis.pttl(keys.fence)).toBeGreaterThan(DAY - 5_000)

    const behind = resourceKeys(PREFIX, unique('behind'))
    await redis.set(behind.fence, '41')
    expect(
      await acquireOnce(redis, behind, { ownerId: newOwnerId(), ttlMs: 1_000, fenceTtlMs: DAY, lockerId: LOCKER }),
    ).toEqual({ granted: true, token: 42n, handedOver: false })
  })

  it('seeds a missing counter from the server clock (µs), above every token minted since the last seed', async () => {
    const keys = resourceKeys(PREFIX, unique('reseed'))
    const first = await acquireOnce(redis, keys, {
      ownerId: newOwnerId(),
      ttlMs: 1_000,
      fenceTtlMs: DAY,
      lockerId: LOCKER,
    })
    if (!first.granted) throw new Error('expected a grant')
    let last = first.token
    for (let i = 0; i < 200; i++) {
      await redis.del(keys.lock)
      const a = await acquireOnce(redis, keys, {
        ownerId: newOwnerId(),
        ttlMs: 1_000,
        fenceTtlMs: DAY,
        lockerId: LOCKER,
      })
      if (!a.granted) throw new Error('expected a grant')
      expect(a.token).toBe(last + 1n)
      last = a.token
    }
    // 200 grants took far more than 200 µs, so the clock is past the counter: a new seed jumps.
    await redis.del(keys.lock, keys.fence)
    const before = await serverMicros()
    const seeded = await acquireOnce(redis, keys, {
      ownerId: newOwnerId(),
      ttlMs: 1_000,
      fenceTtlMs: DAY,
      lockerId: LOCKER,
    })
    if (!seeded.granted) throw new Error('expected a grant')
    expect(seeded.token).toBeGreaterThan(last)
    expect(seeded.token).toBeGreaterThanOrEqual(before)
  })

  it("takes a key handed to its locker ('~' + locker id) and says so; a key handed to another locker is a miss", async () => {
    const keys = resourceKeys(PREFIX, unique('handed'))
    await redis.set(keys.lock, `~${LOCKER}`, 'PX', 500)
    const owner = newOwnerId()
    const attempt = await acquireOnce(redis, keys, { ownerId: owner, ttlMs: 5_000, fenceTtlMs: DAY, lockerId: LOCKER })
    expect(attempt).toMatchObject({ granted: true, handedOver: true })
    expect(await redis.get(keys.lock)).toBe(owner)
    expect(await redis.pttl(keys.lock)).toBeGreaterThan(4_000)
    await redis.set(keys.lock, '~another-locker', 'PX', 500)
    expect(
      await acquireOnce(redis, keys, { ownerId: newOwnerId(), ttlMs: 5_000, fenceTtlMs: DAY, lockerId: LOCKER }),
    ).toEqual({
      granted: false,
      holderTtlMs: expect.any(Number),
    })
    expect(await redis.get(keys.lock)).toBe('~another-locker')
  })

  it('stays above every earlier token when the counter key is gone (expired or deleted)', async () => {
    const keys = resourceKeys(PREFIX, unique('gone'))
    const tokens: bigint[] = []
    for (let i = 0; i < 5; i++) {
      const a = await acquireOnce(redis, keys, {
        ownerId: newOwnerId(),
        ttlMs: 1_000,
        fenceTtlMs: DAY,
        lockerId: LOCKER,
      })
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

  // 2^53 is where a JS number or a Lua double stops holding every integer; the script hands
  // tokens over as strings from 2^52 on (the client's integer parser is off just under 2^53).
  it.each([
    ['2^52 - 2', 2n ** 52n - 2n],
    ['2^52 - 1', 2n ** 52n - 1n],
    ['2^53 - 64', 2n ** 53n - 64n],
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

  it('control: a JS number cannot tell those tokens apart, nor can the client read an integer reply just under 2^53', async () => {
    expect(Number(2n ** 53n + 1n)).toBe(Number(2n ** 53n))
    expect(Number(2n ** 63n - 9n)).toBe(Number(2n ** 63n - 10n))
    expect(BigInt((await redis.eval(`return ${2n ** 53n - 1n}`, 0)) as number)).not.toBe(2n ** 53n - 1n)
    expect(BigInt((await redis.eval(`return ${2n ** 52n - 1n}`, 0)) as number)).toBe(2n ** 52n - 1n)
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
