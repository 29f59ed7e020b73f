import type { Redis } from 'ioredis'
import { beforeAll, describe, expect, it } from 'vitest'
import { LOCK_DEFAULTS, resourceKeys } from '../src/index.js'
import { resourceOfChannel } from '../src/keys.js'
import { connect, ready } from './support/connections.js'
import { startRedisServer } from './support/redis-server.js'

// Odd names on purpose: braces inside the resource move where Redis finds the hash tag.
const RESOURCES = ['order:42', 'a{b}c', 'x}y', '{x}', 'a{', 'a}', '{{}}', 'a:b:{c}', 'ключ', '🔒', ' ', 'x'.repeat(1024)]

describe('resourceKeys', () => {
  it('builds <prefix>{<resource>}:lock, :fence and the :released channel', () => {
    expect(resourceKeys('fencelock:', 'order:42')).toEqual({
      lock: 'fencelock:{order:42}:lock',
      fence: 'fencelock:{order:42}:fence',
      channel: 'fencelock:{order:42}:released',
    })
    expect(resourceKeys('', 'r').lock).toBe('{r}:lock')
  })

  it('gives distinct resources distinct keys (no two resources share a lock or fence key)', () => {
    const all = RESOURCES.flatMap((r) => {
      const k = resourceKeys(LOCK_DEFAULTS.prefix, r)
      return [k.lock, k.fence]
    })
    expect(new Set(all).size).toBe(all.length)
  })

  it('recovers the resource from its channel, and ignores channels of another prefix', () => {
    for (const r of RESOURCES) {
      expect(resourceOfChannel('p:', resourceKeys('p:', r).channel)).toBe(r)
      expect(resourceOfChannel('q:', resourceKeys('p:', r).channel)).toBeUndefined()
    }
  })
})

describe('hash tags (CLUSTER KEYSLOT on a cluster-mode redis-server)', () => {
  let redis: Redis
  const slot = (key: string) => redis.cluster('KEYSLOT', key) as Promise<number>

  beforeAll(async () => {
    const server = await startRedisServer({ cluster: true })
    redis = connect({ port: server.port })
    await ready(redis, server.url)
  })

  it('puts the lock key, the fence key and the channel of a resource in one slot, for odd names too', async () => {
    for (const prefix of ['fencelock:', '', 'app:v2:']) {
      for (const r of RESOURCES) {
        const k = resourceKeys(prefix, r)
        const lockSlot = await slot(k.lock)
        expect({ r, prefix, fence: await slot(k.fence), channel: await slot(k.channel) }).toEqual({ r, prefix, fence: lockSlot, channel: lockSlot })
      }
    }
  })

  it('control: a resource starting with "}" would split the keys across slots (why options reject it)', async () => {
    // `{}` is an empty hash tag, so Redis hashes each whole key: the check is able to see a split.
    const k = resourceKeys('fencelock:', '}x')
    expect(await slot(k.lock)).not.toBe(await slot(k.fence))
  })
})
