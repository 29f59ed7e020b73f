/**
 * The Locker contract (locker-contract.ts) on a Redis Cluster of 3 primaries with a replica each,
 * through each client library with a Cluster client (ioredis's `Cluster`, GLIDE's
 * `GlideClusterClient`: one, connected before the tests, shared by the file's Lockers, as GLIDE
 * multiplexes its connections): every key of a resource shares its hash tag, so each script runs on
 * the shard that owns it, and the contract's resources land on every shard.
 */
import { startCluster, type ClusterSet } from '@fencelock/devkit/redis-topology'
import { Cluster } from 'ioredis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { resourceKeys } from '../../src/index.js'
import type { SupportedRedisClient } from '../../src/index.js'
import { CLUSTER_CLIENT_LIBRARIES, glideClusterClient } from '../support/clients.js'
import { makeLocker, unique } from '../support/connections.js'
import { fencedStore } from '../support/fenced-store.js'
import { familyContract } from './family-contract.js'
import { lockerContract, type ContractDeployment } from './locker-contract.js'

let set: ClusterSet
let admin: Cluster
const clusters: Cluster[] = []
let glide: SupportedRedisClient
beforeAll(async () => {
  set = await startCluster()
  admin = cluster()
  glide = await glideClusterClient(set.nodes)
}, 60_000)
afterAll(async () => {
  for (const c of clusters) c.disconnect()
  await set.dispose()
})

function cluster(): Cluster {
  const c = new Cluster([...set.nodes])
  c.on('error', () => {})
  clusters.push(c)
  return c
}

const keysOf = (resource: string) => resourceKeys('fencelock:', resource)

/** A Cluster client of `library` (GLIDE: the file's one). */
const clientOf = (library: (typeof CLUSTER_CLIENT_LIBRARIES)[number]): SupportedRedisClient =>
  library === 'glide' ? glide : cluster()

for (const library of CLUSTER_CLIENT_LIBRARIES) {
  const deployment: ContractDeployment = {
    locker: (options) => makeLocker(clientOf(library), options),
    steal: async (resource) => {
      await admin.del(keysOf(resource).lock)
    },
    traces: async (resource) => ({
      held: await admin.exists(keysOf(resource).lock),
      queued: await admin.zcard(keysOf(resource).queue),
    }),
  }

  const name = `a Redis Cluster (3 shards, a replica each), through ${library}`
  lockerContract(name, deployment)
  familyContract(name, deployment, () => fencedStore(admin))

  describe(`resources on every shard, through ${library}`, () => {
    it('30 resources are locked on all three shards, each script on the shard of its hash tag', async () => {
      const locker = makeLocker(clientOf(library))
      const shards = new Set<number>()
      for (let i = 0; i < 30; i++) {
        const r = unique('c-shard')
        const lock = await locker.acquire(r)
        const slot = await set.keySlot(keysOf(r).lock)
        expect(await set.keySlot(keysOf(r).fence)).toBe(slot)
        shards.add((await set.primaryOf(slot)).port)
        expect(await admin.exists(keysOf(r).lock)).toBe(1)
        await lock.release()
      }
      expect(shards.size).toBe(3)
    })
  })

  describe(`acquireAll across shards, through ${library}`, () => {
    it('takes resources whose keys live on three different shards, each held on its own shard, and frees them all', async () => {
      const byShard = new Map<number, string>()
      while (byShard.size < 3) {
        const r = unique('c-all')
        byShard.set((await set.primaryOf(await set.keySlot(keysOf(r).lock))).port, r)
      }
      const resources = [...byShard.values()]
      const locker = makeLocker(clientOf(library))
      const all = await locker.acquireAll(resources)
      for (const r of resources) expect(await admin.get(keysOf(r).fence)).toBe(String(all.tokens.get(r)))
      expect(await Promise.all(resources.map((r) => admin.exists(keysOf(r).lock)))).toEqual([1, 1, 1])
      expect(await all.release()).toBe(true)
      expect(await Promise.all(resources.map((r) => admin.exists(keysOf(r).lock)))).toEqual([0, 0, 0])
    })
  })
}
