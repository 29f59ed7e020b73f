// Finds a Redis for a demo: REDIS_URL when set, else 127.0.0.1:6379 when it answers, else a
// redis-server spawned from PATH on a free port (stopped by PID on exit).
import { spawn, spawnSync } from 'node:child_process'
import { createServer, Socket } from 'node:net'

export interface RedisEndpoint {
  url: string
  origin: string
  stop(): void
}

function answers(host: string, port: number): Promise<boolean> {
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

export async function resolveRedisUrl(): Promise<RedisEndpoint> {
  if (process.env.REDIS_URL) return { url: process.env.REDIS_URL, origin: 'REDIS_URL', stop: () => {} }
  if (await answers('127.0.0.1', 6379)) return { url: 'redis://127.0.0.1:6379', origin: '127.0.0.1:6379', stop: () => {} }
  if (spawnSync('redis-server', ['--version']).status !== 0) {
    throw new Error('No Redis: set REDIS_URL, start one on 127.0.0.1:6379, or install redis-server (apt-get install redis-server).')
  }
  const port = await freePort()
  const child = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], { stdio: 'ignore' })
  for (let i = 0; i < 50 && !(await answers('127.0.0.1', port)); i++) await new Promise((r) => setTimeout(r, 100))
  return { url: `redis://127.0.0.1:${port}`, origin: `redis-server spawned on port ${port}`, stop: () => child.kill('SIGTERM') }
}
