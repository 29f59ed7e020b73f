/**
 * Finds a Redis for the demos and tools: `REDIS_URL` when set, else 127.0.0.1:6379 when it
 * answers, else a `redis-server` spawned from PATH (or `REDIS_SERVER_BIN`) on a free loopback
 * port. A spawned server is *owned*: the caller may restart it (the demo's `redis-restart` chaos)
 * and it is stopped by PID when the process exits. A Redis the caller did not start is never
 * restarted or stopped.
 */
import { spawnSync } from 'node:child_process'
import { CannotStartError } from './cli.js'
import { acceptsConnections, answersPing } from './net.js'
import { redisServerBin, startRedisServer, type RedisServer } from './redis-server.js'

/** How to get a Redis when none is found; shown in the error. */
export const NO_REDIS_HELP =
  'No Redis: set REDIS_URL, start one on 127.0.0.1:6379, or install redis-server (apt-get install redis-server) so the demo can spawn one.'

/** How long `REDIS_URL`'s host gets to accept a connection before the command gives up. */
const REDIS_URL_CONNECT_MS = 2_000

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
 * Resolves the Redis to use (see the module comment for the order). `REDIS_URL`'s host must accept
 * a TCP connection (a password or TLS is the client's business, not checked here).
 * @throws CannotStartError with {@link NO_REDIS_HELP} when none is found and none can be spawned,
 * or when `REDIS_URL` is set and nothing answers there.
 * @example
 * ```ts
 * const redis = await resolveRedis()
 * console.log(`Redis: ${redis.origin}`)
 * process.on('exit', () => void redis.stop())
 * ```
 */
export async function resolveRedis(options: ResolveRedisOptions = {}): Promise<RedisEndpoint> {
  const fromEnv = process.env.REDIS_URL
  if (fromEnv) {
    await checkRedisUrl(fromEnv)
    return { url: fromEnv, origin: 'REDIS_URL', owned: undefined, stop: async () => {} }
  }
  if (!options.preferOwned && (await answersPing('127.0.0.1', 6379, 500))) {
    return { url: 'redis://127.0.0.1:6379', origin: '127.0.0.1:6379', owned: undefined, stop: async () => {} }
  }
  if (spawnSync(redisServerBin(), ['--version']).status !== 0) throw new CannotStartError(NO_REDIS_HELP)
  const owned = await startRedisServer()
  return { url: owned.url, origin: `redis-server spawned on port ${owned.port}`, owned, stop: () => owned.dispose() }
}

/** Throws {@link CannotStartError} when `url` is not a Redis URL or nothing accepts a connection there. */
async function checkRedisUrl(url: string): Promise<void> {
  let parsed: URL | undefined
  try {
    parsed = new URL(url)
  } catch {
    // Reported below.
  }
  if (parsed === undefined || (parsed.protocol !== 'redis:' && parsed.protocol !== 'rediss:') || parsed.hostname === '') {
    throw new CannotStartError(`REDIS_URL must be a redis:// or rediss:// URL (got ${JSON.stringify(url.replace(/\/\/[^@/]*@/, '//***@'))})`)
  }
  const host = parsed.hostname.replace(/^\[(.*)\]$/, '$1')
  const port = parsed.port === '' ? 6379 : Number(parsed.port)
  if (!(await acceptsConnections(host, port, REDIS_URL_CONNECT_MS))) {
    throw new CannotStartError(`nothing answers at REDIS_URL (${host}:${port}) within ${REDIS_URL_CONNECT_MS} ms: start that Redis, or unset REDIS_URL to use 127.0.0.1:6379 or a redis-server of the command's own.`)
  }
}
