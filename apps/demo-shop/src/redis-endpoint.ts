/**
 * Finds a Redis for the demos: `REDIS_URL` when set, else 127.0.0.1:6379 when it answers, else a
 * `redis-server` spawned from PATH on a free loopback port. A spawned server is *owned*: the demo
 * may restart it (chaos `redis-restart`) and stops it by PID when it exits. A Redis the demo did
 * not start is never restarted or stopped.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process'
import { createServer, Socket } from 'node:net'

/** How to get a Redis when none is found; shown in the error. */
export const NO_REDIS_HELP =
  'No Redis: set REDIS_URL, start one on 127.0.0.1:6379, or install redis-server (apt-get install redis-server) so the demo can spawn one.'

/** A Redis the demo uses. `owned` is set only when the demo spawned it. */
export interface RedisEndpoint {
  readonly url: string
  /** Where it came from, for the banner: `REDIS_URL`, `127.0.0.1:6379`, or the spawned server. */
  readonly origin: string
  /** The server the demo started, or undefined for a Redis it found. */
  readonly owned: OwnedRedis | undefined
  /** Stops the server when the demo owns it; does nothing otherwise. */
  stop(): Promise<void>
}

/** Options of {@link resolveRedis}. */
export interface ResolveRedisOptions {
  /**
   * Skip 127.0.0.1:6379 and spawn a server of our own (needed by chaos that restarts Redis).
   * `REDIS_URL` still wins when set. Default false.
   */
  preferOwned?: boolean
  /** The redis-server binary. Default `REDIS_SERVER_BIN`, else `redis-server` from PATH. */
  serverBin?: string
}

/** True when a Redis answers PING at host:port within 500 ms. */
export function redisAnswers(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = new Socket()
    let settled = false
    const done = (ok: boolean) => {
      if (settled) return
      settled = true
      socket.destroy()
      resolve(ok)
    }
    socket.setTimeout(500, () => done(false))
    socket.once('error', () => done(false))
    socket.once('close', () => done(false))
    socket.connect(port, host, () => socket.write('PING\r\n'))
    socket.once('data', (d) => done(d.toString().startsWith('+PONG')))
  })
}

/** A free TCP port on the loopback interface (free when asked; the caller binds it soon after). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer()
    server.once('error', reject)
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number }
      server.close(() => resolve(port))
    })
  })
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

/**
 * A `redis-server` started by the demo on a loopback port, without persistence (a restart
 * loses every key, as in production without AOF). Stopped and restarted by its own PID only.
 */
export class OwnedRedis {
  readonly port: number
  readonly bin: string
  #child: ChildProcess | undefined

  private constructor(bin: string, port: number) {
    this.bin = bin
    this.port = port
  }

  /** Starts a server on `port` (default: a free one) and waits until it answers. */
  static async start(options: { bin?: string; port?: number } = {}): Promise<OwnedRedis> {
    const bin = options.bin ?? process.env.REDIS_SERVER_BIN ?? 'redis-server'
    if (spawnSync(bin, ['--version']).status !== 0) throw new Error(NO_REDIS_HELP)
    const server = new OwnedRedis(bin, options.port ?? (await freePort()))
    await server.#spawn()
    return server
  }

  get url(): string {
    return `redis://127.0.0.1:${this.port}`
  }

  /** PID of the running server, or undefined while it is stopped. */
  get pid(): number | undefined {
    return this.#child?.exitCode === null ? this.#child.pid : undefined
  }

  async #spawn(): Promise<void> {
    const child = spawn(this.bin, ['--port', String(this.port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], {
      stdio: 'ignore',
    })
    child.on('error', () => {})
    // If the demo exits without stopping it (a second Ctrl-C, a crash), take it down too.
    const onExit = () => child.kill('SIGKILL')
    process.once('exit', onExit)
    child.once('exit', () => process.off('exit', onExit))
    this.#child = child
    for (let i = 0; i < 100; i++) {
      if (await redisAnswers('127.0.0.1', this.port)) return
      if (child.exitCode !== null) break
      await sleep(50)
    }
    child.kill('SIGKILL')
    throw new Error(`redis-server did not start on port ${this.port}`)
  }

  /** Stops the server (SIGTERM, then SIGKILL after 3 s) and waits for it to exit. */
  async stop(): Promise<void> {
    const child = this.#child
    this.#child = undefined
    if (child === undefined || child.exitCode !== null || child.signalCode !== null) return
    const exited = new Promise<void>((r) => child.once('exit', () => r()))
    child.kill('SIGTERM')
    const timer = setTimeout(() => child.kill('SIGKILL'), 3_000)
    await exited
    clearTimeout(timer)
  }

  /** Stops the server and starts a new one on the same port: every key is gone, as after a crash. */
  async restart(): Promise<void> {
    await this.stop()
    await this.#spawn()
  }
}

/**
 * Resolves the Redis a demo uses (see the module comment for the order).
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
  if (!options.preferOwned && (await redisAnswers('127.0.0.1', 6379))) {
    return { url: 'redis://127.0.0.1:6379', origin: '127.0.0.1:6379', owned: undefined, stop: async () => {} }
  }
  const owned = await OwnedRedis.start(options.serverBin === undefined ? {} : { bin: options.serverBin })
  return { url: owned.url, origin: `redis-server spawned on port ${owned.port}`, owned, stop: () => owned.stop() }
}
