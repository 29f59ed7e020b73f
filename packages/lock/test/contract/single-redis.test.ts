/** The Locker contract (locker-contract.ts) on one Redis: a redis-server of this file's own. */
import type { Redis } from 'ioredis'
import { beforeAll } from 'vitest'
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
})

const deployment = singleRedisDeployment(
  'ioredis',
  () => server.port,
  () => admin,
)

lockerContract('one Redis', deployment)
familyContract('one Redis', deployment, () => fencedStore(admin))
