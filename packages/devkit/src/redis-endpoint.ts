/**
 * Finds a Redis for the demos and tools: `REDIS_URL` when set, else 127.0.0.1:6379 when it
 * answers, else a `redis-server` spawned from PATH (or `REDIS_SERVER_BIN`) on a free loopback
 * port. A spawned server is *owned*: the caller may restart it (the demo's `redis-restart` chaos)
 * and it is stopped by PID when the process exits. A Redis the caller did not start is never
 * restarted or stopped.
 */
import { spawnSync } from 'node:child_process'
import { answersPing } from './net.js'
import { redisServerBin, startRedisServer, type RedisServer } from './redis-server.js'

/** How to get a Redis when none is found; shown in the error. */
export const NO_REDIS_HELP =
  'No Redis: set REDIS_URL, start one on 127.0.0.1:6379, or install redis-server (apt-get install redis-server) so the demo can spawn one.'

/** A Redis to use. `owned` is set only when it was spawned for this process. */
export interface RedisEndpoint {
  readonly url: string
  /** Where it came from, for a banner: `REDIS_URL`, `127.0.0.1:6379`, or the spawned server. */
  readonly origin: string
  /** The server spawned for this process, or undefined for a Redis that was found. */
  readonly owned: RedisServer | undefined
  /** Stops the server when it is owned; does nothing otherwise. */
  stop(): Promise<void>
}

/** Options of {@link resolveRedis}. */
export interface ResolveRedisOptions {
  /**
   * Skip 127.0.0.1:6379 and spawn a server of our own (needed by chaos that restarts Redis).
   * `REDIS_URL` still wins when set. Default false.
   */
  readonly preferOwned?: boolean
}

/**
 * Resolves the Redis to use (see the module comment for the order).
 * @throws Error with {@link NO_REDIS_HELP} when none is found and none can be spawned.
 * @example
 * ```ts
 * const redis = await resolveRedis()
 * console.log(`Redis: ${redis.origin}`)
 * process.on('exit', () => void redis.stop())
 * ```
 */
export async function resolveRedis(options: ResolveRedisOptions = {}): Promise<RedisEndpoint> {
  const fromEnv = process.env.REDIS_URL
  if (fromEnv) return { url: fromEnv, origin: 'REDIS_URL', owned: undefined, stop: async () => {} }
  if (!options.preferOwned && (await answersPing('127.0.0.1', 6379, 500))) {
    return { url: 'redis://127.0.0.1:6379', origin: '127.0.0.1:6379', owned: undefined, stop: async () => {} }
  }
  if (spawnSync(redisServerBin(), ['--version']).status !== 0) throw new Error(NO_REDIS_HELP)
  const owned = await startRedisServer()
  return { url: owned.url, origin: `redis-server spawned on port ${owned.port}`, owned, stop: () => owned.dispose() }
}
