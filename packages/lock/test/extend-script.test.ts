import type { Redis } from 'ioredis'
import { beforeAll, describe, expect, it } from 'vitest'
import { extendOnce } from './support/scripts.js'
import { resourceKeys } from '../src/index.js'
import { connectShared, unique } from './support/connections.js'

const PREFIX = unique('fl-test-extend') + ':'
let redis: Redis
beforeAll(async () => {
  redis = await connectShared()
})

describe('extendOnce (owner-checked PEXPIRE)', () => {
  it("resets the owner's TTL from the server's now", async () => {
    const keys = resourceKeys(PREFIX, unique('own'))
    await redis.set(keys.lock, 'me', 'PX', 200)
    expect(await extendOnce(redis, keys, 'me', 5_000)).toBe(true)
    expect(await redis.pttl(keys.lock)).toBeGreaterThan(4_500)
    expect(await redis.get(keys.lock)).toBe('me')
  })

  it("leaves another owner's key and TTL alone", async () => {
    const keys = resourceKeys(PREFIX, unique('other'))
    await redis.set(keys.lock, 'them', 'PX', 1_000)
    expect(await extendOnce(redis, keys, 'me', 60_000)).toBe(false)
    expect(await redis.pttl(keys.lock)).toBeLessThanOrEqual(1_000)
    expect(await redis.get(keys.lock)).toBe('them')
    // Control: without the owner check, the same PEXPIRE would have stretched their lease.
    await redis.pexpire(keys.lock, 60_000)
    expect(await redis.pttl(keys.lock)).toBeGreaterThan(50_000)
  })

  it('does not resurrect a key that expired or was deleted', async () => {
    const keys = resourceKeys(PREFIX, unique('gone'))
    expect(await extendOnce(redis, keys, 'me', 5_000)).toBe(false)
    expect(await redis.exists(keys.lock)).toBe(0)
  })
})
