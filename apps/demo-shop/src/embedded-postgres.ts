/**
 * The embedded PostgreSQL of `npm run demo` without `DATABASE_URL`: an in-memory PGlite served on
 * a loopback port with pglite-socket's connection handler, so the instance processes connect to
 * it with `pg` like to a real server.
 *
 * Why not `PGLiteSocketServer` as it is: PGlite is a single session, and its queue hands that
 * session from one connection to the next between protocol *messages*. A `pg` query is a batch
 * (Parse, Bind, Describe, Execute, Sync); when another connection's Parse runs between this
 * one's Parse and Bind, the unnamed statement is replaced and the query fails or runs the wrong
 * statement. Under the demo's load that turned about half the purchases into errors. This queue
 * gives the session to one connection until its batch ends (Sync, a simple Query, Terminate, or
 * the startup message) *and* it is outside a transaction, so batches and transactions never
 * interleave. The price is serialization, which the demo accepts (use `DATABASE_URL` for speed).
 */
import { createServer, type Server, type Socket } from 'node:net'
import type { PGlite } from '@electric-sql/pglite'
import type { PGLiteSocketHandler, PGLiteSocketHandlerOptions } from '@electric-sql/pglite-socket'

interface Item {
  readonly handlerId: number
  readonly message: Uint8Array
  readonly onData: (data: Uint8Array) => void
  readonly resolve: (bytes: number) => void
  readonly reject: (error: unknown) => void
}

const SYNC = 0x53 // 'S'
const QUERY = 0x51 // 'Q'
const TERMINATE = 0x58 // 'X'
const PROTOCOL_3 = 196_608

/** True for the startup message (no type byte: int32 length, then int32 protocol version 3.0). */
function isStartup(message: Uint8Array): boolean {
  if (message.length < 8) return false
  return new DataView(message.buffer, message.byteOffset, message.byteLength).getInt32(4) === PROTOCOL_3
}

/**
 * A drop-in for pglite-socket's query queue that serializes whole batches and transactions
 * (see the module comment). Implements the methods the handler calls.
 */
export class SessionQueue {
  readonly #db: PGlite
  #queue: Item[] = []
  #owner: number | null = null
  #pumping = false

  constructor(db: PGlite) {
    this.#db = db
  }

  enqueue(handlerId: number, message: Uint8Array, onData: (data: Uint8Array) => void): Promise<number> {
    return new Promise((resolve, reject) => {
      this.#queue.push({ handlerId, message, onData, resolve, reject })
      void this.#pump()
    })
  }

  async #pump(): Promise<void> {
    if (this.#pumping) return
    this.#pumping = true
    try {
      for (;;) {
        const index = this.#owner === null ? 0 : this.#queue.findIndex((i) => i.handlerId === this.#owner)
        if (index < 0 || this.#queue.length === 0) return
        const [item] = this.#queue.splice(index, 1) as [Item]
        this.#owner = item.handlerId
        let bytes = 0
        try {
          await this.#db.runExclusive(() =>
            this.#db.execProtocolRawStream(item.message, {
              onRawData: (data: Uint8Array) => {
                bytes += data.length
                item.onData(data)
              },
            }),
          )
          item.resolve(bytes)
        } catch (error) {
          item.reject(error)
        }
        const type = item.message[0]
        const batchEnded = type === SYNC || type === QUERY || type === TERMINATE || isStartup(item.message)
        if (batchEnded && !this.#db.isInTransaction()) this.#owner = null
      }
    } finally {
      this.#pumping = false
    }
  }

  getQueueLength(): number {
    return this.#queue.length
  }

  clearQueueForHandler(handlerId: number): void {
    this.#queue = this.#queue.filter((item) => {
      if (item.handlerId !== handlerId) return true
      item.reject(new Error('connection closed'))
      return false
    })
  }

  /** A connection went away: roll back what it left open and give the session to the next. */
  async clearTransactionIfNeeded(handlerId: number): Promise<void> {
    if (this.#owner !== handlerId) return
    if (this.#db.isInTransaction()) await this.#db.exec('ROLLBACK').catch(() => {})
    this.#owner = null
    void this.#pump()
  }
}

/** An embedded PostgreSQL on a loopback port. */
export interface EmbeddedPostgres {
  readonly port: number
  readonly connectionString: string
  stop(): Promise<void>
}

/**
 * Starts an in-memory PGlite served on `127.0.0.1:<port>` (default: a free port). Takes 2-4 s and
 * about 0.5-0.9 GB of memory.
 */
export async function startEmbeddedPostgres(options: { port?: number; maxConnections?: number } = {}): Promise<EmbeddedPostgres> {
  const [{ PGlite }, { PGLiteSocketHandler }] = await Promise.all([import('@electric-sql/pglite'), import('@electric-sql/pglite-socket')])
  const db = await PGlite.create()
  const queue = new SessionQueue(db)
  const maxConnections = options.maxConnections ?? 64
  const handlers = new Set<PGLiteSocketHandler>()
  const server: Server = createServer((socket: Socket) => {
    if (handlers.size >= maxConnections) {
      socket.destroy()
      return
    }
    const handler = new PGLiteSocketHandler({ queryQueue: queue as unknown as PGLiteSocketHandlerOptions['queryQueue'], closeOnDetach: true })
    handlers.add(handler)
    const forget = () => handlers.delete(handler)
    handler.addEventListener('close', forget)
    handler.addEventListener('error', forget)
    handler.attach(socket).catch(() => socket.destroy())
  })
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen(options.port ?? 0, '127.0.0.1', () => resolve())
  })
  const port = (server.address() as { port: number }).port
  return {
    port,
    connectionString: `postgresql://postgres@127.0.0.1:${port}/postgres`,
    stop: async () => {
      for (const handler of handlers) await handler.detach(true).catch(() => {})
      handlers.clear()
      await new Promise<void>((r) => server.close(() => r()))
      await db.close().catch(() => {})
    },
  }
}
