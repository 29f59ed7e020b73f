/**
 * The Locker and family contracts on one Redis through the other client libraries (node-redis,
 * iovalkey, GLIDE): the same suites as single-redis.test.ts, parameterized by the Locker's client.
 */
import type { Redis } from 'ioredis'
import { beforeAll } from 'vitest'
import { OTHER_CLIENT_LIBRARIES, prepareClients } from '../support/clients.js'
import { connect, ready } from '../support/connections.js'
import { startRedisServer, type RedisServer } from '../support/redis-server.js'
import { fencedStore } from '../support/fenced-store.js'
import { singleRedisDeployment } from './deployments.js'
import { familyContract } from './family-contract.js'
import { lockerContract } from './locker-contract.js'

let server: RedisServer
let admin: Redis
beforeAll(async () => {
  server = await startRedisServer()
  admin = connect({ port: server.port })
  await ready(admin, server.url)
  for (const library of OTHER_CLIENT_LIBRARIES) await prepareClients(library, [server.port])
})

for (const library of OTHER_CLIENT_LIBRARIES) {
  const deployment = singleRedisDeployment(
    library,
    () => server.port,
    () => admin,
  )
  lockerContract(`one Redis, through ${library}`, deployment)
  familyContract(`one Redis, through ${library}`, deployment, () => fencedStore(admin))
}
