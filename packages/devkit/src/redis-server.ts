/**
 * Throw-away `redis-server` processes, for the tests, the benchmarks, the chaos suite and the
 * demo's own Redis: kill, SIGSTOP/SIGCONT, restart on the same port (all data gone). Each server
 * runs from PATH (or `REDIS_SERVER_BIN`) on a free loopback port with nothing on disk (`--save ""
 * --appendonly no`) and `DEBUG` allowed from loopback. Every server is stopped by PID, with
 * {@link stopAllRedisServers}, and again (SIGKILL, synchronously) when the process exits, so no
 * process is left behind even when a run fails half-way.
 *
 * No Vitest here: plain processes use it too. A test file adds `afterAll(stopAllRedisServers)`
 * (each package's test support does).
 */
import { execFileSync } from 'node:child_process'
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { CannotStartError } from './cli.js'
import { clockOffsetEnv } from './clock-shim.js'
import { answersPing, freePort } from './net.js'
import { ServerProcess } from './server-process.js'

export interface RedisServerOptions {
  /** Start in cluster mode (needed for `CLUSTER KEYSLOT`); no slots are assigned. */
  readonly cluster?: boolean
  /** Extra `redis-server` arguments. */
  readonly args?: readonly string[]
  /**
   * Run the server with its wall clock this many ms ahead (negative: behind), through the clock
   * shim (clock-shim.ts): `TIME`, token seeds and expiry instants see the shifted clock.
   */
  readonly clockOffsetMs?: number
  /**
   * Run a Sentinel (`redis-server <file> --sentinel`) with this configuration (its `sentinel
   * monitor ...` lines); it is written into the server's own directory, where Sentinel may rewrite
   * it. A restart starts from the file as Sentinel last rewrote it.
   */
  readonly sentinelConfig?: string
}

const HOST = '127.0.0.1'
const live = new Set<RedisServer>()

/** One spawned redis-server. Use {@link startRedisServer}. */
export class RedisServer {
  readonly host = HOST
  #port: number
  readonly #process: ServerProcess
  readonly #dir: string
  readonly #options: RedisServerOptions

  /** @internal */
  constructor(port: number, dir: string, options: RedisServerOptions) {
    this.#port = port
    this.#dir = dir
    this.#options = options
    this.#process = new ServerProcess(`redis-server on port ${port}`)
  }

  get port(): number {
    return this.#port
  }

  get url(): string {
    return `redis://${HOST}:${this.#port}`
  }

  /** PID of the running process; throws when it is not running. */
  get pid(): number {
    return this.#process.pid
  }

  get running(): boolean {
    return this.#process.running
  }

  /** Spawns the process and resolves once it answers PING. */
  async spawn(): Promise<void> {
    const sentinel = this.#options.sentinelConfig
    let config: string[] = []
    if (sentinel !== undefined) {
      const file = join(this.#dir, 'sentinel.conf')
      if (!existsSync(file)) writeFileSync(file, sentinel)
      config = [file, '--sentinel']
    }
    const args = [
      ...config,
      '--port', String(this.#port),
      '--bind', HOST,
      '--save', '',
      '--appendonly', 'no',
      '--enable-debug-command', 'local',
      '--dir', this.#dir,
      '--logfile', '',
      // A lone cluster node announces its IP as "" unless told, and ioredis's Cluster then
      // cannot reach it.
      ...(this.#options.cluster
        ? ['--cluster-enabled', 'yes', '--cluster-config-file', join(this.#dir, `nodes-${this.#port}.conf`), '--cluster-announce-ip', HOST]
        : []),
      ...(this.#options.args ?? []),
    ]
    const env = this.#options.clockOffsetMs === undefined ? process.env : { ...process.env, ...clockOffsetEnv(this.#options.clockOffsetMs) }
    this.#process.start(redisServerBin(), args, env)
    const spawnError = this.#process.spawnError
    live.add(this)
    const deadline = performance.now() + 5_000
    while (performance.now() < deadline) {
      if (!this.running) break
      if (await Promise.race([answersPing(HOST, this.#port), spawnError])) return
      await new Promise((r) => setTimeout(r, 15))
    }
    const log = this.#process.log
    await this.stop()
    throw new Error(`redis-server did not come up on port ${this.#port}:\n${log}`)
  }

  /** Kills the process by PID (SIGKILL: a crash, nothing saved) and waits until it is gone. */
  async stop(): Promise<void> {
    await this.#process.kill()
  }

  /** SIGSTOP: the process keeps its sockets open but answers nothing. */
  pause(): void {
    this.#process.pause()
  }

  /** SIGCONT after {@link pause}. */
  resume(): void {
    this.#process.resume()
  }

  /** Kills the process and starts a fresh one on the same port: all data is gone. */
  async restart(): Promise<void> {
    await this.stop()
    await this.spawn()
  }

  /** Stops the process for good and removes its directory. */
  async dispose(): Promise<void> {
    await this.stop()
    live.delete(this)
    rmSync(this.#dir, { recursive: true, force: true })
  }

  /** @internal Synchronous last-resort kill for the process exit hook. */
  killNow(): void {
    this.#process.killNow()
    rmSync(this.#dir, { recursive: true, force: true })
  }
}

/**
 * Spawns a redis-server on a free loopback port (retrying another port if one is taken).
 * @throws CannotStartError when the binary cannot be run at all (not installed, not executable).
 */
export async function startRedisServer(options: RedisServerOptions = {}): Promise<RedisServer> {
  let lastError: unknown
  for (let i = 0; i < 5; i++) {
    const port = await freePort()
    const server = new RedisServer(port, mkdtempSync(join(tmpdir(), 'fencelock-redis-')), options)
    try {
      await server.spawn()
      return server
    } catch (error) {
      lastError = error
      await server.dispose()
      // Another port will not help a binary that is missing.
      const code = (error as NodeJS.ErrnoException).code
      if (code === 'ENOENT' || code === 'EACCES') {
        throw new CannotStartError(`${redisServerBin()} cannot be run (${code}): install Debian's redis-server, or set REDIS_SERVER_BIN`, { cause: error })
      }
    }
  }
  throw lastError
}

/** Stops every server this module spawned in this process. */
export async function stopAllRedisServers(): Promise<void> {
  await Promise.all([...live].map((server) => server.dispose()))
}

process.once('exit', () => {
  for (const server of live) server.killNow()
})

/** The redis-server binary: `REDIS_SERVER_BIN`, else `redis-server` from PATH. */
export function redisServerBin(): string {
  return process.env.REDIS_SERVER_BIN || 'redis-server'
}

/** The version `redis-server --version` reports (`7.0.15`), or `unknown` when it cannot run. */
export function redisServerVersion(bin = redisServerBin()): string {
  try {
    return /v=(\S+)/.exec(execFileSync(bin, ['--version'], { encoding: 'utf8' }))?.[1] ?? 'unknown'
  } catch {
    return 'unknown'
  }
}
