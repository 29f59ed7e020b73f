import { Cluster, type Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { LOCK_DEFAULTS, resourceKeys } from '../src/index.js'
import { resourceOfChannel } from '../src/keys.js'
import { connect, makeLocker, ready, unique } from './support/connections.js'
import { startRedisServer, type RedisServer } from './support/redis-server.js'
import { sleep, waitUntil } from './support/timing.js'

// Odd names on purpose: braces inside the resource move where Redis finds the hash tag.
const RESOURCES = [
  'order:42',
  'a{b}c',
  'x}y',
  '{x}',
  'a{',
  'a}',
  '{{}}',
  'a:b:{c}',
  'ключ',
  '🔒',
  ' ',
  'x'.repeat(1024),
]

describe('resourceKeys', () => {
  it('builds <prefix>{<resource>}:lock, :fence, :queue, :leases and the :released channel', () => {
    expect(resourceKeys('fencelock:', 'order:42')).toEqual({
      lock: 'fencelock:{order:42}:lock',
      fence: 'fencelock:{order:42}:fence',
      channel: 'fencelock:{order:42}:released',
      queue: 'fencelock:{order:42}:queue',
      leases: 'fencelock:{order:42}:leases',
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
  let server: RedisServer
  const slot = (key: string) => redis.cluster('KEYSLOT', key) as Promise<number>

  beforeAll(async () => {
    server = await startRedisServer({ cluster: true })
    redis = connect({ port: server.port })
    await ready(redis, server.url)
  })

  it('puts the lock key, the fence key and the channel of a resource in one slot, for odd names too', async () => {
    for (const prefix of ['fencelock:', '', 'app:v2:']) {
      for (const r of RESOURCES) {
        const k = resourceKeys(prefix, r)
        const lockSlot = await slot(k.lock)
        expect({ r, prefix, fence: await slot(k.fence), channel: await slot(k.channel) }).toEqual({
          r,
          prefix,
          fence: lockSlot,
          channel: lockSlot,
        })
      }
    }
  })

  it('control: a resource starting with "}" would split the keys across slots (why options reject it)', async () => {
    // `{}` is an empty hash tag, so Redis hashes each whole key: the check is able to see a split.
    const k = resourceKeys('fencelock:', '}x')
    expect(await slot(k.lock)).not.toBe(await slot(k.fence))
  })

  describe('a Locker on an ioredis Cluster (one node owning every slot: CROSSSLOT is still enforced)', () => {
    const clusters: Cluster[] = []
    afterAll(() => {
      for (const c of clusters) c.disconnect()
    })
    const clusterClient = () => {
      const c = new Cluster([{ host: server.host, port: server.port }])
      c.on('error', () => {})
      clusters.push(c)
      return c
    }

    it('acquires, hands off through pub/sub and releases odd resource names in one slot each', async () => {
      await redis.cluster('ADDSLOTSRANGE', 0, 16383)
      await waitUntil(async () => ((await redis.cluster('INFO')) as string).includes('cluster_state:ok'), {
        what: 'cluster_state:ok',
      })
      const a = makeLocker(clusterClient())
      const b = makeLocker(clusterClient(), { pollMs: 5_000 })
      for (const name of ['a{b}c', 'x}y', '{x}', 'ключ', 'a:b:{c}']) {
        const resource = `${name}${unique('')}`
        const first = await a.acquire(resource, { ttlMs: 5_000 })
        const waiting = b.acquire(resource, { waitMs: 3_000 })
        await sleep(20)
        const releasedAt = performance.now()
        expect(await first.release()).toBe(true)
        const second = await waiting
        // Pub/sub, not the 5 s poll (on a loaded machine, hundreds of ms).
        expect(performance.now() - releasedAt).toBeLessThan(1_500)
        expect(second.token).toBeGreaterThan(first.token)
        await second.extend()
        expect(await second.release()).toBe(true)
      }
    })

    it("control: a script over the keys of a resource starting with '}' is refused with CROSSSLOT", async () => {
      const k = resourceKeys('fencelock:', '}x')
      await expect(redis.eval("return redis.call('EXISTS', KEYS[1], KEYS[2])", 2, k.lock, k.fence)).rejects.toThrow(
        /CROSSSLOT/,
      )
    })
  })
})
