/**
 * A TCP proxy on loopback in front of a server (Redis), for faults a test injects in the network:
 * latency (every chunk delayed each way, order kept); a blackhole (every byte dropped both ways,
 * connections left open and new ones accepted: calls get no answer, as with a stalled server or a
 * peer gone behind a dead link without a FIN or RST; the connections it cut are of no use after
 * it, as bytes are missing from their streams); and a partition (every byte held both ways until
 * it heals, then delivered in order, as TCP delivers after a network partition heals: the
 * connections carry on, and calls made during it are answered late). `tc netem` is not available
 * on every machine; a proxy in Node is. Close it with `close()`, or all with
 * {@link closeAllProxies} (a test file's `afterAll`).
 */
import { createServer, Socket, type AddressInfo, type Server } from 'node:net'

export interface TcpProxy {
  readonly host: string
  readonly port: number
  /**
   * From now on, every byte is dropped both ways (the connections stay open); with `replies`,
   * only what the server sends (requests still arrive and run: a reply lost on the way back).
   */
  blackhole(direction?: 'both' | 'replies'): void
  /** Forward again after {@link blackhole} (what was dropped stays lost). */
  restore(): void
  /**
   * Chunks dropped so far by {@link blackhole}. A test that wants a reply lost waits for this to
   * grow before it restores: that the server ran the request (its effect is visible on another
   * connection) does not mean the reply has reached the proxy yet, and one that reaches it after
   * `restore()` is delivered.
   */
  readonly dropped: number
  /** From now on, every byte is held both ways (the connections stay open). */
  partition(): void
  /** Delivers what was held, in order, and forwards again. */
  heal(): void
  close(): Promise<void>
}

/** Options of {@link startTcpProxy}. */
export interface TcpProxyOptions {
  /** Delay of every chunk, each way, in ms. Default 0. */
  readonly delayMs?: number
}

const open = new Set<TcpProxy>()

/** Listens on a free loopback port and forwards to `target`. */
export async function startTcpProxy(target: { host?: string; port: number }, options: TcpProxyOptions = {}): Promise<TcpProxy> {
  const delayMs = options.delayMs ?? 0
  /** What is dropped: nothing, everything, or only the server's bytes. */
  let dropping: 'none' | 'both' | 'replies' = 'none'
  /** While partitioned: what each connection's writes would have been, in order. */
  let held: { to: Socket; chunk: Buffer }[] | undefined
  let dropped = 0
  const sockets = new Set<Socket>()
  const server: Server = createServer((client) => {
    const upstream = new Socket()
    sockets.add(client)
    sockets.add(upstream)
    const later = (fn: () => void) => (delayMs > 0 ? setTimeout(fn, delayMs) : fn())
    const pipe = (from: Socket, to: Socket) => {
      const fromServer = from === upstream
      from.on('data', (chunk: Buffer) => {
        if (dropping === 'both' || (dropping === 'replies' && fromServer)) {
          dropped++
          return
        }
        if (held) {
          held.push({ to, chunk })
          return
        }
        later(() => {
          if (!to.destroyed) to.write(chunk)
        })
      })
      from.on('close', () => {
        sockets.delete(from)
        later(() => to.destroy())
      })
      from.on('error', () => {})
    }
    pipe(client, upstream)
    pipe(upstream, client)
    upstream.connect(target.port, target.host ?? '127.0.0.1')
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const proxy: TcpProxy = {
    host: '127.0.0.1',
    port: (server.address() as AddressInfo).port,
    blackhole: (direction = 'both') => {
      dropping = direction
    },
    restore: () => {
      dropping = 'none'
    },
    get dropped() {
      return dropped
    },
    partition: () => {
      held ??= []
    },
    heal: () => {
      const queued = held ?? []
      held = undefined
      for (const { to, chunk } of queued) if (!to.destroyed) to.write(chunk)
    },
    async close() {
      open.delete(proxy)
      for (const socket of sockets) socket.destroy()
      await new Promise<void>((resolve) => server.close(() => resolve()))
    },
  }
  open.add(proxy)
  return proxy
}

/** Closes every proxy this module started in this process. */
export async function closeAllProxies(): Promise<void> {
  await Promise.allSettled([...open].map((proxy) => proxy.close()))
}
