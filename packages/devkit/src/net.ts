/** Loopback networking the tools and tests need: a free port, a raw PING of a Redis, a bare TCP check. */
import { createServer, Socket } from 'node:net'

/** A TCP port nobody listens on now, on `host` (the OS picks it; another process may take it later). */
export function freePort(host = '127.0.0.1'): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer()
    server.once('error', reject)
    server.listen(0, host, () => {
      const { port } = server.address() as { port: number }
      server.close(() => resolve(port))
    })
  })
}

/**
 * Opens a raw socket to host:port and settles with what `decide` makes of it, or false on an
 * error or after `ms`; the socket is closed either way.
 */
function probe(host: string, port: number, ms: number, decide: (socket: Socket, done: (ok: boolean) => void) => void): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = new Socket()
    const done = (ok: boolean) => {
      socket.destroy()
      resolve(ok)
    }
    socket.setTimeout(ms, () => done(false))
    socket.once('error', () => done(false))
    decide(socket, done)
  })
}

/** Whether a Redis answers `PING` on host:port within `ms`, over a raw socket (no client library, no retries). */
export function answersPing(host: string, port: number, ms = 300): Promise<boolean> {
  return probe(host, port, ms, (socket, done) => {
    socket.once('data', (data) => done(data.toString().startsWith('+PONG')))
    socket.connect(port, host, () => socket.write('PING\r\n'))
  })
}

/**
 * Whether something accepts a TCP connection on host:port within `ms` (it need not speak any
 * protocol: a Redis behind a password or TLS counts).
 */
export function acceptsConnections(host: string, port: number, ms = 1_000): Promise<boolean> {
  return probe(host, port, ms, (socket, done) => {
    socket.connect(port, host, () => done(true))
  })
}
