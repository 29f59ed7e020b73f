/**
 * A TCP proxy in front of Redis that can stop forwarding without closing anything: commands sent
 * through it then get no answer, as with a stalled server or a blackholed network. `tc netem` is
 * not available here, so this is how the tests make Redis calls time out for real.
 */
import { createServer, Socket, type AddressInfo, type Server } from 'node:net'
import { afterAll } from 'vitest'

export interface BlackholeProxy {
  readonly host: string
  readonly port: number
  /** From now on, bytes from clients are dropped (the connections stay open). */
  blackhole(): void
  /** Forward again. */
  restore(): void
  close(): Promise<void>
}

const proxies = new Set<BlackholeProxy>()
afterAll(async () => {
  await Promise.allSettled([...proxies].map((p) => p.close()))
})

export async function startBlackholeProxy(target: { host: string; port: number } = { host: '127.0.0.1', port: 6379 }): Promise<BlackholeProxy> {
  let dropping = false
  const sockets = new Set<Socket>()
  const server: Server = createServer((client) => {
    const upstream = new Socket()
    sockets.add(client)
    sockets.add(upstream)
    upstream.connect(target.port, target.host)
    client.on('data', (chunk) => {
      if (!dropping) upstream.write(chunk)
    })
    upstream.on('data', (chunk) => client.write(chunk))
    const close = () => {
      client.destroy()
      upstream.destroy()
      sockets.delete(client)
      sockets.delete(upstream)
    }
    client.on('close', close)
    upstream.on('close', close)
    client.on('error', close)
    upstream.on('error', close)
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const proxy: BlackholeProxy = {
    host: '127.0.0.1',
    port: (server.address() as AddressInfo).port,
    blackhole: () => {
      dropping = true
    },
    restore: () => {
      dropping = false
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy()
        server.close(() => resolve())
      }),
  }
  proxies.add(proxy)
  return proxy
}
