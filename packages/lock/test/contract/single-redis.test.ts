/** The Locker contract (locker-contract.ts) on one Redis: a redis-server of this file's own. */
import type { Redis } from 'ioredis'
import { beforeAll } from 'vitest'
import { resourceKeys } from '../../src/index.js'
import { connect, makeLocker, ready } from '../support/connections.js'
import { startRedisServer, type RedisServer } from '../support/redis-server.js'
import { fencedStore } from '../support/fenced-store.js'
import { familyContract } from './family-contract.js'
import { lockerContract, type ContractDeployment } from './locker-contract.js'

let server: RedisServer
let admin: Redis
beforeAll(async () => {
  server = await startRedisServer()
  admin = connect({ port: server.port })
  await ready(admin, server.url)
})

const keysOf = (resource: string) => resourceKeys('fencelock:', resource)

const deployment: ContractDeployment = {
  locker: (options) => makeLocker(connect({ port: server.port }), options),
  steal: async (resource) => {
    await admin.del(keysOf(resource).lock)
  },
  traces: async (resource) => ({
    held: await admin.exists(keysOf(resource).lock),
    queued: await admin.zcard(keysOf(resource).queue),
  }),
}

lockerContract('one Redis', deployment)
familyContract('one Redis', deployment, () => fencedStore(admin))
