import type { Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { resourceKeys } from '../src/index.js'
import { releaseOnce } from '../src/release-script.js'
import { connectShared, unique } from './support/connections.js'
import { sleep, waitUntil } from './support/timing.js'

const PREFIX = unique('fl-test-release') + ':'
let redis: Redis
let subscriber: Redis
const messages: [channel: string, message: string][] = []

beforeAll(async () => {
  redis = await connectShared()
  subscriber = await connectShared()
  subscriber.on('message', (channel: string, message: string) => messages.push([channel, message]))
})
afterAll(() => subscriber.disconnect())

describe('releaseOnce (owner-checked DEL + PUBLISH, nobody queued)', () => {
  it("deletes only the owner's key, and announces it on the resource's channel", async () => {
    const keys = resourceKeys(PREFIX, unique('r'))
    await subscriber.subscribe(keys.channel)
    await redis.set(keys.lock, 'owner', 'PX', 5_000)

    expect(await releaseOnce(redis, keys, 'intruder', 'm1', 500)).toEqual({ freed: false })
    expect(await redis.get(keys.lock)).toBe('owner')

    expect(await releaseOnce(redis, keys, 'owner', 'm2', 500)).toEqual({ freed: true, handedTo: undefined })
    expect(await redis.exists(keys.lock)).toBe(0)
    await waitUntil(() => messages.some(([c]) => c === keys.channel), { what: 'the release message' })
    await sleep(20)
    // Only the real release was announced: the refused one published nothing.
    expect(messages.filter(([c]) => c === keys.channel)).toEqual([[keys.channel, 'm2']])
  })

  it("does not delete a key someone else took after ours expired, and says so", async () => {
    const keys = resourceKeys(PREFIX, unique('taken'))
    await redis.set(keys.lock, 'next-owner', 'PX', 5_000)
    expect(await releaseOnce(redis, keys, 'expired-owner', 'x', 500)).toEqual({ freed: false })
    expect(await redis.get(keys.lock)).toBe('next-owner')
    // Control: a naive DEL (no owner check) would have freed the next owner's lock.
    await redis.del(keys.lock)
    expect(await redis.exists(keys.lock)).toBe(0)
  })

  it('is a no-op on a missing key', async () => {
    const keys = resourceKeys(PREFIX, unique('none'))
    expect(await releaseOnce(redis, keys, 'me', 'x', 500)).toEqual({ freed: false })
  })
})
