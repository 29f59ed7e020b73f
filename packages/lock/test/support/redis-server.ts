/**
 * The spawned redis-servers of the lock tests (see redis-server-process.ts), stopped by PID in
 * `afterAll` of every test file that imports this module.
 */
import { afterAll } from 'vitest'
import { stopAllRedisServers } from './redis-server-process.js'

export { RedisServer, startRedisServer, stopAllRedisServers, type RedisServerOptions } from './redis-server-process.js'

afterAll(stopAllRedisServers)
