/**
 * A TCP proxy that delays every chunk by a fixed time in each direction: a healthy Redis that is
 * simply far away (another zone, a busy network). Order is kept: equal delays on one socket fire
 * in order. (`tc netem` is not available on every machine; a proxy in Node is.)
 */
import { createServer, Socket, type AddressInfo, type Server } from 'node:net'
import { afterAll } from 'vitest'

export interface LatencyProxy {
  readonly port: number
  close(): Promise<void>
}

const open = new Set<LatencyProxy>()

/** Listens on a free loopback port and forwards to `target`, `delayMs` late each way. */
export async function startLatencyProxy(target: { host?: string; port: number }, delayMs: number): Promise<LatencyProxy> {
  const sockets = new Set<Socket>()
  const server: Server = createServer((client) => {
    const upstream = new Socket()
    sockets.add(client)
    sockets.add(upstream)
    const pipe = (from: Socket, to: Socket) => {
      from.on('data', (chunk) => {
        setTimeout(() => {
          if (!to.destroyed) to.write(chunk)
        }, delayMs)
      })
      from.on('close', () => setTimeout(() => to.destroy(), delayMs))
      from.on('error', () => {})
    }
    pipe(client, upstream)
    pipe(upstream, client)
    upstream.connect(target.port, target.host ?? '127.0.0.1')
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const proxy: LatencyProxy = {
    port: (server.address() as AddressInfo).port,
    async close() {
      open.delete(proxy)
      for (const socket of sockets) socket.destroy()
      await new Promise<void>((resolve) => server.close(() => resolve()))
    },
  }
  open.add(proxy)
  return proxy
}

afterAll(async () => {
  await Promise.all([...open].map((proxy) => proxy.close()))
})
