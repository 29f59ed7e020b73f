/**
 * The Locker contract (locker-contract.ts) through Redis Sentinel: a primary, 2 replicas and 3
 * Sentinels of this file's own, the Locker on each client library that has a Sentinel client
 * (ioredis `new Redis({ sentinels })`, node-redis `createSentinel`).
 */
import { startSentinelSet, type SentinelSet } from '@fencelock/devkit/redis-topology'
import { Redis } from 'ioredis'
import { afterAll, beforeAll } from 'vitest'
import { resourceKeys } from '../../src/index.js'
import { SENTINEL_CLIENT_LIBRARIES, sentinelClientOf } from '../support/clients.js'
import { connect, makeLocker } from '../support/connections.js'
import { fencedStore } from '../support/fenced-store.js'
import { familyContract } from './family-contract.js'
import { lockerContract, type ContractDeployment } from './locker-contract.js'

let set: SentinelSet
let admin: Redis
beforeAll(async () => {
  set = await startSentinelSet()
  admin = connect({ port: (await set.primary()).port })
}, 60_000)
afterAll(async () => {
  await set.dispose()
})

const keysOf = (resource: string) => resourceKeys('fencelock:', resource)

for (const library of SENTINEL_CLIENT_LIBRARIES) {
  const deployment: ContractDeployment = {
    locker: (options) => makeLocker(sentinelClientOf(library, set), options),
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
