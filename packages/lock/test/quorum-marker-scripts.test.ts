/**
 * Quorum mode's scripts with the node marker (scripts/node-marker.ts), driven directly: the lean
 * acquire reads the marker only when the resource's token counter is missing, and a raise never
 * brings a counter back onto a node whose marker is gone. Each with the variant that would let a
 * node that lost its data grant: the plain raise recreates the counter, and the lean acquire then
 * grants without noticing. On the shared Redis, under a prefix of this file's own.
 */
import type { Redis } from 'ioredis'
import { beforeAll, describe, expect, it } from 'vitest'
import { resourceKeys } from '../src/index.js'
import { nodeMarkerKey } from '../src/keys.js'
import { newOwnerId } from '../src/owner-id.js'
import { toAcquireReply } from '../src/scripts/acquire.js'
import { isMarkerLost, markedAcquireScript, markedRaiseFenceScript } from '../src/scripts/node-marker.js'
import { raiseFenceScript } from '../src/scripts/raise-fence.js'
import { connectShared, unique } from './support/connections.js'

const DAY = 86_400_000

let redis: Redis
beforeAll(async () => {
  redis = await connectShared()
})

/** A fresh prefix: its node marker, and the keys of one resource under it. */
function node() {
  const prefix = unique('fl-test-marker') + ':'
  const keys = { ...resourceKeys(prefix, unique('r')), marker: nodeMarkerKey(prefix) }
  return { keys }
}

function acquire(keys: ReturnType<typeof node>['keys'], epoch: string, touch: '0' | '1' = '1', fenceTtlMs = DAY) {
  const args = { ownerId: newOwnerId(), ttlMs: 10_000, fenceTtlMs, lockerId: 'test-locker', reseed: '0', epoch, touch }
  return markedAcquireScript.run(redis, keys, args)
}

describe('the lean marked acquire', () => {
  it('a node that lost its data (no counter, no marker) grants nothing: it replies MARKER_LOST and writes nothing', async () => {
    const { keys } = node()
    const reply = await acquire(keys, 'epoch-we-knew')
    expect(isMarkerLost(reply)).toBe(true)
    expect(await redis.exists(keys.lock, keys.fence, keys.marker)).toBe(0)
  })

  it('control: with its marker and no counter (a new resource) it grants and seeds the counter', async () => {
    const { keys } = node()
    await redis.set(keys.marker, 'epoch-we-knew')
    const reply = toAcquireReply(await acquire(keys, 'epoch-we-knew'))
    expect(reply.granted).toBe(true)
    expect(await redis.get(keys.fence)).toBe(reply.granted ? String(reply.token) : null)
  })

  it('touch 0 keeps the counter expiry as it is; touch 1 refreshes it to fenceTtlMs', async () => {
    const { keys } = node()
    await redis.set(keys.marker, 'e')
    await acquire(keys, 'e', '1', 60_000)
    await redis.del(keys.lock)
    await redis.pexpire(keys.fence, 30_000)
    await acquire(keys, 'e', '0', 60_000)
    expect(await redis.pttl(keys.fence)).toBeLessThanOrEqual(30_000)
    await redis.del(keys.lock)
    await acquire(keys, 'e', '1', 60_000)
    expect(await redis.pttl(keys.fence)).toBeGreaterThan(50_000)
  })
})

describe('the marked raise (the second phase)', () => {
  it('never creates a counter on a node whose marker is gone; with the marker it does', async () => {
    const lost = node().keys
    const reply = await markedRaiseFenceScript.run(redis, lost, { token: '123456', fenceTtlMs: DAY, epoch: 'e' })
    expect(isMarkerLost(reply)).toBe(true)
    expect(await redis.exists(lost.fence)).toBe(0)

    const kept = node().keys
    await redis.set(kept.marker, 'e')
    expect(await markedRaiseFenceScript.run(redis, kept, { token: '123456', fenceTtlMs: DAY, epoch: 'e' })).toBe(1)
    expect(await redis.get(kept.fence)).toBe('123456')
  })

  it('control: the plain raise recreates the counter on a node that lost its data, and the lean acquire then grants there without noticing', async () => {
    const { keys } = node()
    await raiseFenceScript.run(redis, keys, { token: '123456', fenceTtlMs: DAY })
    const reply = toAcquireReply(await acquire(keys, 'epoch-we-knew'))
    expect(reply.granted).toBe(true)
    expect(await redis.exists(keys.marker)).toBe(0)
  })
})
