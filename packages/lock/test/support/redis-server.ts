/**
 * The spawned redis-servers of the lock tests (the devkit's test kit), stopped by PID in
 * `afterAll` of every test file that imports this module.
 */
import { stopAllRedisServers } from '@fencelock/devkit/redis-server'
import { afterAll } from 'vitest'

export {
  RedisServer,
  startRedisServer,
  stopAllRedisServers,
  type RedisServerOptions,
} from '@fencelock/devkit/redis-server'

afterAll(stopAllRedisServers)
