/**
 * A redis-server of the test file's own, with an admin client and every lock script loaded up
 * front (so command counts are of real work, not NOSCRIPT fallbacks), and Lockers on their own
 * connections to it. Call in a file's top level; the fields are set in its `beforeAll`.
 */
import type { Redis } from 'ioredis'
import { beforeAll } from 'vitest'
import { LOCK_SCRIPTS, type Locker } from '../../src/index.js'
import { connect, makeLocker, ready } from './connections.js'
import { startRedisServer, type RedisServer } from './redis-server.js'

export interface ScriptedServer {
  server: RedisServer
  admin: Redis
  /** A Locker on a new connection to this server. */
  lockerOn(options?: Parameters<typeof makeLocker>[1]): Locker
}

export function useScriptedServer(): ScriptedServer {
  const env = {
    lockerOn: (options: Parameters<typeof makeLocker>[1] = {}) =>
      makeLocker(connect({ port: env.server.port }), options),
  } as ScriptedServer
  beforeAll(async () => {
    env.server = await startRedisServer()
    env.admin = connect({ port: env.server.port })
    await ready(env.admin, env.server.url)
    for (const script of Object.values(LOCK_SCRIPTS)) await env.admin.script('LOAD', script.lua)
  })
  return env
}
