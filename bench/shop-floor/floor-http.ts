// The floor's HTTP, on node:http alone: a JSON body read with a size limit, a JSON answer, and a
// keep-alive client for the calls to the gateway.
import { Agent, createServer, request, type IncomingMessage, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'

/** Largest body read: 16 KiB, as the shop's. */
const MAX_BODY_BYTES = 16 * 1024

/** A body that is not a JSON object of at most 16 KiB. */
export class BadBody extends Error {
  constructor(message: string) {
    super(message)
    this.name = 'BadBody'
  }
}

/** Reads `req`'s body as a JSON object. */
export function readJson(req: IncomingMessage): Promise<Record<string, unknown>> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = []
    let size = 0
    req.on('data', (chunk: Buffer) => {
      size += chunk.length
      if (size <= MAX_BODY_BYTES) chunks.push(chunk)
    })
    req.on('error', reject)
    req.on('end', () => {
      if (size > MAX_BODY_BYTES) return reject(new BadBody(`the body must be at most ${MAX_BODY_BYTES} bytes`))
      if (size === 0) return resolve({})
      try {
        const body: unknown = JSON.parse(Buffer.concat(chunks).toString('utf8'))
        if (body === null || typeof body !== 'object' || Array.isArray(body)) return reject(new BadBody('the body must be a JSON object'))
        resolve(body as Record<string, unknown>)
      } catch {
        reject(new BadBody('the body is not JSON'))
      }
    })
  })
}

/** Answers `status` with `body` as JSON. */
export function sendJson(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  const text = JSON.stringify(body)
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text), ...headers })
  res.end(text)
}

/** An answer of the gateway. */
export interface JsonAnswer {
  readonly status: number
  readonly body: Record<string, unknown>
}

/** POSTs JSON to `url` over `agent`; rejects on a network failure or after `timeoutMs`. */
export function postJson(agent: Agent, url: string, body: unknown, headers: Record<string, string>, timeoutMs: number): Promise<JsonAnswer> {
  const text = JSON.stringify(body)
  return new Promise((resolve, reject) => {
    const req = request(
      url,
      { method: 'POST', agent, headers: { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(text)), ...headers } },
      (res) => {
        const chunks: Buffer[] = []
        res.on('data', (chunk: Buffer) => chunks.push(chunk))
        res.on('error', reject)
        res.on('end', () => {
          clearTimeout(timer)
          let parsed: Record<string, unknown> = {}
          try {
            parsed = JSON.parse(Buffer.concat(chunks).toString('utf8')) as Record<string, unknown>
          } catch {
            // Not JSON: the status says what happened.
          }
          resolve({ status: res.statusCode ?? 0, body: parsed })
        })
      },
    )
    const timer = setTimeout(() => req.destroy(new Error(`no answer within ${timeoutMs} ms`)), timeoutMs)
    req.on('error', (error) => {
      clearTimeout(timer)
      reject(error)
    })
    req.end(text)
  })
}

/** A port of 1-65535 or 0, from the environment. */
export function envPort(env: NodeJS.ProcessEnv, name: string): number {
  const port = Number(env[name] ?? '0')
  if (!Number.isInteger(port) || port < 0 || port > 65_535) throw new RangeError(`${name} must be a port, 0-65535 (got ${JSON.stringify(env[name])})`)
  return port
}

/** A required environment variable. */
export function envString(env: NodeJS.ProcessEnv, name: string): string {
  const value = env[name]
  if (value === undefined || value === '') throw new RangeError(`${name} must be set`)
  return value
}

/**
 * Serves `handle` on 127.0.0.1:`port` (keep-alive) and drains on the supervisor's word — SIGTERM,
 * a `shutdown` message, or the IPC channel closing: no new connection, the requests in flight
 * answered, the connections closed, then `close()` (the process's own clean-up; it exits).
 * @returns the port it listens on.
 */
export async function serveDrained(
  port: number,
  handle: (req: IncomingMessage, res: ServerResponse) => Promise<void>,
  close: () => Promise<void>,
): Promise<number> {
  let inFlight = 0
  let idle: (() => void) | undefined
  const server = createServer((req, res) => {
    inFlight++
    void handle(req, res).finally(() => {
      if (--inFlight === 0) idle?.()
    })
  })
  server.keepAliveTimeout = 5_000
  server.listen(port, '127.0.0.1')
  await new Promise<void>((resolve, reject) => {
    server.once('listening', resolve)
    server.once('error', reject)
  })
  let stopping = false
  const shutdown = async () => {
    if (stopping) return
    stopping = true
    server.close()
    server.closeIdleConnections()
    if (inFlight > 0) await new Promise<void>((resolve) => (idle = resolve))
    server.closeAllConnections()
    await close()
  }
  process.on('SIGTERM', () => void shutdown())
  process.on('message', (m: { type?: unknown }) => {
    if (m?.type === 'shutdown') void shutdown()
  })
  process.on('disconnect', () => void shutdown())
  return (server.address() as AddressInfo).port
}
