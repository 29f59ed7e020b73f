import type { Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { releaseMessage } from '../src/fair-queue/formats.js'
import { resourceKeys } from '../src/index.js'
import { leaveScript, toReleaseOutcome } from '../src/fair-queue/hand-on.js'
import { releaseOnce } from './support/scripts.js'
import { connectShared, unique } from './support/connections.js'
import { waitUntil } from './support/timing.js'

const PREFIX = unique('fl-test-release') + ':'
let redis: Redis
let subscriber: Redis
const messages: [channel: string, message: string][] = []
const heard = (channel: string) => messages.filter(([c]) => c === channel).map(([, m]) => m)

beforeAll(async () => {
  redis = await connectShared()
  subscriber = await connectShared()
  subscriber.on('message', (channel: string, message: string) => messages.push([channel, message]))
})
afterAll(() => subscriber.disconnect())

/** Server time in ms, as the scripts see it. */
async function serverMs(): Promise<number> {
  const [s, us] = (await redis.time()) as unknown as [string, string]
  return Number(s) * 1000 + Math.floor(Number(us) / 1000)
}

describe('releaseOnce: nobody queued (an unmarked key)', () => {
  it("deletes only the owner's key, and publishes nothing (nobody waits for it)", async () => {
    const keys = resourceKeys(PREFIX, unique('r'))
    await subscriber.subscribe(keys.channel)
    await redis.set(keys.lock, 'owner', 'PX', 5_000)
    expect(await releaseOnce(redis, keys, 'intruder', 'm1', 500)).toEqual({ freed: false })
    expect(await redis.get(keys.lock)).toBe('owner')
    expect(await releaseOnce(redis, keys, 'owner', 'm2', 500)).toEqual({ freed: true, handedTo: undefined })
    expect(await redis.exists(keys.lock)).toBe(0)
    await redis.publish(keys.channel, 'probe') // a message sent after the release arrives after anything it sent
    await waitUntil(() => heard(keys.channel).includes('probe'), { what: 'the probe message' })
    expect(heard(keys.channel)).toEqual(['probe'])
  })

  it('does not delete a key someone else took after ours expired, and says so', async () => {
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

describe('releaseOnce: a key a waiting locker marked (owner id + "+")', () => {
  it('hands the lock to the oldest queued locker with a live lease, skipping lapsed ones, and names it (and the next in line) in the message', async () => {
    const keys = resourceKeys(PREFIX, unique('handoff'))
    await subscriber.subscribe(keys.channel)
    await redis.set(keys.lock, 'owner+', 'PX', 5_000)
    const now = await serverMs()
    await redis.zadd(keys.queue, 1, 'lapsed', 2, 'alive', 3, 'behind')
    await redis.hset(keys.leases, 'lapsed', now - 1, 'alive', now + 60_000, 'behind', now + 60_000)
    expect(await releaseOnce(redis, keys, 'owner', 'releaser', 700)).toEqual({ freed: true, handedTo: 'alive' })
    expect(await redis.get(keys.lock)).toBe('~alive')
    expect(await redis.pttl(keys.lock)).toBeLessThanOrEqual(700)
    expect(await redis.zrange(keys.queue, '0', '-1')).toEqual(['behind'])
    expect(Object.keys(await redis.hgetall(keys.leases))).toEqual(['behind'])
    await waitUntil(() => heard(keys.channel).length === 1, { what: 'the hand-off message' })
    expect(heard(keys.channel)).toEqual([
      releaseMessage('releaser', { lockerId: 'alive', handoffMs: 700, next: 'behind' }),
    ])
  })

  it('frees the lock, and says so, when every queued locker lapsed', async () => {
    const keys = resourceKeys(PREFIX, unique('all-lapsed'))
    await subscriber.subscribe(keys.channel)
    await redis.set(keys.lock, 'owner+', 'PX', 5_000)
    await redis.zadd(keys.queue, 1, 'gone')
    await redis.hset(keys.leases, 'gone', (await serverMs()) - 1)
    expect(await releaseOnce(redis, keys, 'owner', 'releaser', 500)).toEqual({ freed: true, handedTo: undefined })
    expect(await redis.exists(keys.lock, keys.queue, keys.leases)).toBe(0)
    await waitUntil(() => heard(keys.channel).length === 1, { what: 'the release message' })
    expect(heard(keys.channel)).toEqual([releaseMessage('releaser')])
  })

  it("leaves a marked key of someone else's alone", async () => {
    const keys = resourceKeys(PREFIX, unique('marked-other'))
    await redis.set(keys.lock, 'other+', 'PX', 5_000)
    expect(await releaseOnce(redis, keys, 'owner', 'releaser', 500)).toEqual({ freed: false })
    expect(await redis.get(keys.lock)).toBe('other+')
  })
})

describe('the leave script', () => {
  it('takes a locker out of the queue; a lock handed to it meanwhile goes on to the next live one', async () => {
    const keys = resourceKeys(PREFIX, unique('leave'))
    const now = await serverMs()
    await redis.zadd(keys.queue, 1, 'leaver', 2, 'next')
    await redis.hset(keys.leases, 'leaver', now + 60_000, 'next', now + 60_000)
    const args = { channel: keys.channel, lockerId: 'leaver', handoffMs: 500 }
    expect(await leaveScript.run(redis, keys, args, { map: toReleaseOutcome })).toEqual({ freed: false })
    expect(await redis.zrange(keys.queue, '0', '-1')).toEqual(['next'])
    await redis.zadd(keys.queue, 1, 'leaver')
    await redis.hset(keys.leases, 'leaver', now + 60_000)
    await redis.set(keys.lock, '~leaver', 'PX', 500)
    expect(await leaveScript.run(redis, keys, args, { map: toReleaseOutcome })).toEqual({
      freed: true,
      handedTo: 'next',
    })
    expect(await redis.get(keys.lock)).toBe('~next')
  })
})
