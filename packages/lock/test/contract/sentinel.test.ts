/**
 * The Locker contract (locker-contract.ts) through Redis Sentinel: a primary, 2 replicas and 3
 * Sentinels of this file's own, the Locker on each client library that has a Sentinel client
 * (ioredis `new Redis({ sentinels })`, node-redis `createSentinel`). node-redis's Sentinel clients
 * come from a pool connected before the tests, several Lockers on each: connecting one costs a
 * whole discovery (~120 ms of CPU; the 20 Lockers of the semaphore case ran past 30 s at load 24,
 * all of it in node-redis's connects).
 */
import { startSentinelSet, type SentinelSet } from '@fencelock/devkit/redis-topology'
import { Redis } from 'ioredis'
import { afterAll, beforeAll } from 'vitest'
import { resourceKeys } from '../../src/index.js'
import type { SupportedRedisClient } from '../../src/index.js'
import { SENTINEL_CLIENT_LIBRARIES, sentinelClientOf, sentinelClientReady } from '../support/clients.js'
import { connect, makeLocker } from '../support/connections.js'
import { fencedStore } from '../support/fenced-store.js'
import { waitUntil } from '../support/timing.js'
import { familyContract } from './family-contract.js'
import { lockerContract, type ContractDeployment } from './locker-contract.js'

let set: SentinelSet
let admin: Redis
const pool: SupportedRedisClient[] = []
let next = 0
beforeAll(async () => {
  set = await startSentinelSet()
  admin = connect({ port: (await set.primary()).port })
  for (let i = 0; i < 5; i++) pool.push(sentinelClientOf('node-redis', set))
  await waitUntil(() => pool.every(sentinelClientReady), { timeoutMs: 30_000, what: 'the node-redis Sentinel clients' })
}, 60_000)
afterAll(async () => {
  await set.dispose()
})

const keysOf = (resource: string) => resourceKeys('fencelock:', resource)

for (const library of SENTINEL_CLIENT_LIBRARIES) {
  const deployment: ContractDeployment = {
    locker: (options) =>
      makeLocker(library === 'node-redis' ? pool[next++ % pool.length]! : sentinelClientOf(library, set), options),
    steal: async (resource) => {
      await admin.del(keysOf(resource).lock)
    },
    traces: async (resource) => ({
      held: await admin.exists(keysOf(resource).lock),
      queued: await admin.zcard(keysOf(resource).queue),
    }),
  }
  const name = `Redis Sentinel (a primary, 2 replicas, 3 Sentinels), through ${library}`
  lockerContract(name, deployment)
  familyContract(name, deployment, () => fencedStore(admin))
}
