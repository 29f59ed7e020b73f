/**
 * The Locker contract (locker-contract.ts) on a Redis Cluster of 3 primaries with a replica each,
 * the Locker on each client library that has a Cluster client (ioredis `Cluster`, node-redis
 * `createCluster`, GLIDE `GlideClusterClient`): every key of a resource shares its hash tag, so each
 * script runs on the shard that owns it, and the contract's resources land on every shard.
 * node-redis's Cluster clients come from a pool connected before the tests, several Lockers on each
 * (each one is a discovery and a connection to every primary, as for the Sentinel clients of
 * sentinel.test.ts); GLIDE's is one, connected before the tests and shared by the file's Lockers,
 * as GLIDE multiplexes its connections. The admin client that looks behind the Locker's back stays
 * ioredis.
 */
import { startCluster, type ClusterSet } from '@fencelock/devkit/redis-topology'
import { Cluster } from 'ioredis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { resourceKeys, type SupportedRedisClient } from '../../src/index.js'
import {
  CLUSTER_CLIENT_LIBRARIES,
  clusterClientOf,
  clusterClientReady,
  glideClusterClient,
} from '../support/clients.js'
import { makeLocker, unique } from '../support/connections.js'
import { fencedStore } from '../support/fenced-store.js'
import { waitUntil } from '../support/timing.js'
import { familyContract } from './family-contract.js'
import { lockerContract, type ContractDeployment } from './locker-contract.js'

let set: ClusterSet
let admin: Cluster
const pool: SupportedRedisClient[] = []
let next = 0
let glide: SupportedRedisClient
beforeAll(async () => {
  set = await startCluster()
  admin = clusterClientOf('ioredis', set.nodes) as Cluster
  for (let i = 0; i < 5; i++) pool.push(clusterClientOf('node-redis', set.nodes))
  glide = await glideClusterClient(set.nodes)
  await waitUntil(() => pool.every(clusterClientReady), { timeoutMs: 30_000, what: 'the node-redis Cluster clients' })
}, 60_000)
afterAll(async () => {
  await set.dispose()
})

const keysOf = (resource: string) => resourceKeys('fencelock:', resource)

/** A Cluster client of `library` for a Locker (node-redis: one of the pool's; GLIDE: the file's one). */
function clientFor(library: (typeof CLUSTER_CLIENT_LIBRARIES)[number]): SupportedRedisClient {
  if (library === 'glide') return glide
  return library === 'node-redis' ? pool[next++ % pool.length]! : clusterClientOf(library, set.nodes)
}

for (const library of CLUSTER_CLIENT_LIBRARIES) {
  const deployment: ContractDeployment = {
    locker: (options) => makeLocker(clientFor(library), options),
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
}

describe.each(CLUSTER_CLIENT_LIBRARIES)('resources on every shard, through %s', (library) => {
  it('30 resources are locked on all three shards, each script on the shard of its hash tag', async () => {
    const locker = makeLocker(clientFor(library))
    const slots: number[] = []
    for (let i = 0; i < 30; i++) {
      const r = unique('c-shard')
      const lock = await locker.acquire(r)
      const slot = await set.keySlot(keysOf(r).lock)
      expect(await set.keySlot(keysOf(r).fence)).toBe(slot)
      slots.push(slot)
      expect(await admin.exists(keysOf(r).lock)).toBe(1)
      await lock.release()
    }
    // The owners from one CLUSTER SLOTS (a redis-cli process per slot took 11 s of the test's 30 at load 7).
    const owners = await set.primaries(slots)
    for (const [i, owner] of owners.entries()) expect(owner, `the owner of slot ${slots[i]}`).toBeDefined()
    const shards = new Set(owners.map((owner) => owner!.port))
    expect(shards.size).toBe(3)
  })
})

describe.each(CLUSTER_CLIENT_LIBRARIES)('acquireAll across shards, through %s', (library) => {
  it('takes resources whose keys live on three different shards, each held on its own shard, and frees them all', async () => {
    const byShard = new Map<number, string>()
    while (byShard.size < 3) {
      const r = unique('c-all')
      byShard.set((await set.primaryOf(await set.keySlot(keysOf(r).lock))).port, r)
    }
    const resources = [...byShard.values()]
    const locker = makeLocker(clientFor(library))
    const all = await locker.acquireAll(resources)
    for (const r of resources) expect(await admin.get(keysOf(r).fence)).toBe(String(all.tokens.get(r)))
    expect(await Promise.all(resources.map((r) => admin.exists(keysOf(r).lock)))).toEqual([1, 1, 1])
    expect(await all.release()).toBe(true)
    expect(await Promise.all(resources.map((r) => admin.exists(keysOf(r).lock)))).toEqual([0, 0, 0])
  })
})
