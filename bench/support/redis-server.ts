// A dedicated redis-server for one benchmark run: its own loopback port, nothing on disk, so no
// other test touches it and `INFO commandstats` deltas count exactly the benchmark's commands.
import { spawn, type ChildProcess } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { createServer, Socket } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

export interface BenchRedisServer {
  readonly host: string
  readonly port: number
  readonly pid: number
  /** Stops the server by its PID: SIGTERM, then SIGKILL if it has not exited after 3 s. */
  stop(): Promise<void>
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer()
    server.once('error', reject)
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number }
      server.close(() => resolve(port))
    })
  })
}

function ping(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = new Socket()
    const done = (ok: boolean) => {
      socket.destroy()
      resolve(ok)
    }
    socket.setTimeout(500, () => done(false))
    socket.once('error', () => done(false))
    socket.connect(port, host, () => socket.write('PING\r\n'))
    socket.once('data', (d) => done(d.toString().startsWith('+PONG')))
  })
}

function exited(child: ChildProcess, ms: number): Promise<boolean> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve(true)
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve(false), ms)
    child.once('exit', () => {
      clearTimeout(timer)
      resolve(true)
    })
  })
}

/** Spawns `redis-server` on a free loopback port and waits until it answers PING. */
export async function startRedisServer(bin = process.env.REDIS_SERVER_BIN ?? 'redis-server'): Promise<BenchRedisServer> {
  const host = '127.0.0.1'
  const port = await freePort()
  // --dir: a private empty directory, so even a stray SAVE could not write into the repo.
  const dir = mkdtempSync(join(tmpdir(), 'bench-lock-redis-'))
  const child = spawn(bin, ['--port', String(port), '--bind', host, '--save', '', '--appendonly', 'no', '--dir', dir, '--daemonize', 'no'], {
    stdio: ['ignore', 'ignore', 'pipe'],
  })
  let stderr = ''
  child.stderr?.on('data', (d: Buffer) => (stderr += d.toString()))
  const spawnError = new Promise<Error>((resolve) => child.once('error', resolve))
  for (let i = 0; i < 100; i++) {
    if (await ping(host, port)) break
    if (child.exitCode !== null) throw new Error(`redis-server exited (${child.exitCode}): ${stderr}`)
    const failed = await Promise.race([spawnError, new Promise<undefined>((r) => setTimeout(() => r(undefined), 50))])
    if (failed) throw new Error(`cannot spawn ${bin}: ${failed.message}`)
    if (i === 99) {
      child.kill('SIGKILL')
      throw new Error(`redis-server on port ${port} did not answer within 5 s: ${stderr}`)
    }
  }
  const pid = child.pid
  if (pid === undefined) throw new Error('redis-server has no PID')
  let stopping: Promise<void> | undefined
  return {
    host,
    port,
    pid,
    stop() {
      stopping ??= (async () => {
        if (!(await exited(child, 0))) {
          process.kill(pid, 'SIGTERM')
          if (!(await exited(child, 3000))) {
            process.kill(pid, 'SIGKILL')
            await exited(child, 3000)
          }
        }
        rmSync(dir, { recursive: true, force: true })
      })()
      return stopping
    },
  }
}
