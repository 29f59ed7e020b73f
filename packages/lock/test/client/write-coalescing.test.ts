// Write coalescing on ioredis and iovalkey (src/client/write-coalescing.ts, the `coalesceWrites`
// option): the Locker's commands sent on one connection in one tick go out in a few socket
// writes, not one each. Counted where the effect lands, on the real client's socket: every call
// Node makes to write to it (`_write` for one chunk, `_writev` for several, each one system call),
// with a control of the same concurrency and `coalesceWrites: false`. And what must not change:
// every acquire granted, each held lock really in Redis, the user's own commands on the client
// answered in order, and a connection that dies while commands are held loses none of them.
import type { Socket } from 'node:net'
import { Redis } from 'ioredis'
import { Redis as Valkey } from 'iovalkey'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Locker, resourceKeys, type Lock } from '../../src/index.js'
import { COALESCE_BATCH } from '../../src/client/write-coalescing.js'
import { IoredisConnection } from '../../src/client/ioredis-client.js'
import { acquireScript } from '../../src/scripts/acquire.js'
import { extendScript } from '../../src/scripts/extend.js'
import { releaseScript } from '../../src/scripts/release.js'
import { markedAcquireScript, markedQueuedAcquireScript } from '../../src/scripts/node-marker.js'
import { queuedAcquireScript } from '../../src/fair-queue/queued-acquire.js'
import { handoffReleaseScript, leaveScript } from '../../src/fair-queue/hand-on.js'
import { ready, unique } from '../support/connections.js'
import { startRedisServer, type RedisServer } from '../support/redis-server.js'
import { waitUntil } from '../support/timing.js'

const CONCURRENT = 48

let server: RedisServer
const clients: { disconnect(): void }[] = []
beforeAll(async () => {
  server = await startRedisServer()
})
afterAll(() => {
  for (const client of clients) client.disconnect()
})

function client(library: 'ioredis' | 'iovalkey'): Redis {
  const options = { host: '127.0.0.1', port: server.port, retryStrategy: () => 20 }
  const made = (library === 'ioredis' ? new Redis(options) : new Valkey(options)) as Redis
  made.on('error', () => {})
  clients.push(made)
  return made
}

/** Counts the writes Node makes to `client`'s current socket (one system call each) until `stop()`. */
function countWrites(redis: Redis): { readonly writes: number; readonly chunks: number; stop(): void } {
  type Write = (this: Socket, ...args: unknown[]) => unknown
  const socket = (redis as unknown as { stream: Socket & { _write: Write; _writev?: Write } }).stream
  const write = socket._write
  const writev = socket._writev
  const counts = { writes: 0, chunks: 0 }
  socket._write = function (this: Socket, ...args: unknown[]) {
    counts.writes++
    counts.chunks++
    return write.apply(this, args)
  }
  if (writev)
    socket._writev = function (this: Socket, ...args: unknown[]) {
      counts.writes++
      counts.chunks += (args[0] as unknown[]).length
      return writev.apply(this, args)
    }
  return {
    get writes() {
      return counts.writes
    },
    get chunks() {
      return counts.chunks
    },
    stop() {
      socket._write = write
      if (writev) socket._writev = writev
    },
  }
}

/** `CONCURRENT` acquires on resources of their own, then their releases, each batch in one tick; the writes of each. */
async function cycle(
  redis: Redis,
  locker: Locker,
): Promise<{ acquireWrites: number; releaseWrites: number; chunks: number; locks: Lock[] }> {
  const resources = Array.from({ length: CONCURRENT }, (_, i) => unique(`wc-${i}`))
  const acquiring = countWrites(redis)
  const locks = await Promise.all(resources.map((r) => locker.acquire(r)))
  acquiring.stop()
  // Each grant is in Redis, under its own owner.
  for (const [i, lock] of locks.entries()) {
    expect(lock.isHeld()).toBe(true)
    expect(await redis.exists(resourceKeys('fencelock:', resources[i]!).lock)).toBe(1)
  }
  const releasing = countWrites(redis)
  await Promise.all(locks.map((lock) => lock.release()))
  releasing.stop()
  for (const r of resources) expect(await redis.exists(resourceKeys('fencelock:', r).lock)).toBe(0)
  return {
    acquireWrites: acquiring.writes,
    releaseWrites: releasing.writes,
    chunks: acquiring.chunks + releasing.chunks,
    locks,
  }
}

describe('write coalescing (coalesceWrites) on ioredis and iovalkey', () => {
  it.each(['ioredis', 'iovalkey'] as const)(
    `%s: ${CONCURRENT} acquires sent in one tick go out in at most 1 + ceil(${CONCURRENT - 1} / ${COALESCE_BATCH}) writes, their releases too; coalesceWrites: false writes each (control)`,
    async (library) => {
      const redis = client(library)
      await ready(redis, library)
      const locker = new Locker(redis, { ttlMs: 10_000 })
      const plain = new Locker(redis, { ttlMs: 10_000, coalesceWrites: false })
      try {
        // Scripts loaded, connections settled: the counted cycles send only their own commands.
        await (await locker.acquire(unique('warm'))).release()
        await (await plain.acquire(unique('warm'))).release()
        const bound = 1 + Math.ceil((CONCURRENT - 1) / COALESCE_BATCH)
        const coalesced = await cycle(redis, locker)
        expect(coalesced.acquireWrites).toBeLessThanOrEqual(bound)
        expect(coalesced.releaseWrites).toBeLessThanOrEqual(bound)
        // Every command was written: one chunk each (an EVALSHA per acquire and per release).
        expect(coalesced.chunks).toBe(2 * CONCURRENT)
        const control = await cycle(redis, plain)
        expect(control.acquireWrites).toBe(CONCURRENT)
        expect(control.releaseWrites).toBe(CONCURRENT)
      } finally {
        await locker.close()
        await plain.close()
      }
    },
  )

  it("batched calls (acquires, releases) after the tick's first are held; any other call (a renewal, a hand-on) writes them and itself at once", async () => {
    const redis = client('ioredis')
    await ready(redis, 'ioredis')
    const connection = new IoredisConnection(redis)
    const key = unique('wc-held')
    const writes = countWrites(redis)
    const replies: Promise<unknown>[] = []
    for (let i = 0; i < 5; i++) replies.push(connection.evalshaBatched('0'.repeat(40), 1, `${key}:${i}`))
    expect(writes.chunks).toBe(1) // the tick's first, at once; 4 held
    replies.push(connection.evalsha('0'.repeat(40), 1, key))
    expect(writes.chunks).toBe(6) // the 4 held and this one, before any other code runs
    expect(writes.writes).toBe(2) // in one write
    writes.stop()
    // (No such script: each call is answered NOSCRIPT, in order.)
    for (const reply of await Promise.allSettled(replies))
      expect(String((reply as PromiseRejectedResult).reason)).toMatch(/NOSCRIPT/)
  })

  it("which calls are batched: the acquires' tries and the release of a lock nobody waits for; not a renewal, a hand-on or leaving a queue", () => {
    for (const script of [
      acquireScript,
      queuedAcquireScript,
      markedAcquireScript,
      markedQueuedAcquireScript,
      releaseScript,
    ])
      expect(script.batched).toBe(true)
    for (const script of [extendScript, handoffReleaseScript, leaveScript]) expect(script.batched).toBe(false)
  })

  it('on a client with enableAutoPipelining (ioredis writes its own batches at the next tick): every acquire and release goes through', async () => {
    const redis = new Redis({ host: '127.0.0.1', port: server.port, enableAutoPipelining: true })
    redis.on('error', () => {})
    clients.push(redis)
    await ready(redis, 'ioredis, auto-pipelining')
    const locker = new Locker(redis, { ttlMs: 10_000 })
    try {
      for (let round = 0; round < 3; round++) {
        const resources = Array.from({ length: CONCURRENT }, (_, i) => unique(`wc-auto-${i}`))
        const locks = await Promise.all(resources.map((r) => locker.acquire(r)))
        for (const lock of locks) expect(lock.isHeld()).toBe(true)
        await Promise.all(locks.map((lock) => lock.release()))
        for (const r of resources) expect(await redis.exists(resourceKeys('fencelock:', r).lock)).toBe(0)
      }
    } finally {
      await locker.close()
    }
  })

  it("the user's own commands on the client in the same tick are written with the Locker's, in the order sent, and answered", async () => {
    const redis = client('ioredis')
    await ready(redis, 'ioredis')
    const locker = new Locker(redis, { ttlMs: 10_000 })
    try {
      await (await locker.acquire(unique('warm'))).release()
      const key = unique('wc-user')
      const writes = countWrites(redis)
      const sent: Promise<unknown>[] = []
      const acquires: Promise<Lock>[] = []
      for (let i = 0; i < 20; i++) {
        acquires.push(locker.acquire(unique(`wc-mixed-${i}`)))
        sent.push(redis.incr(key))
      }
      const answers = await Promise.all(sent)
      const locks = await Promise.all(acquires)
      writes.stop()
      expect(answers).toEqual(Array.from({ length: 20 }, (_, i) => i + 1))
      expect(writes.chunks).toBe(40)
      expect(writes.writes).toBeLessThan(40)
      await Promise.all(locks.map((lock) => lock.release()))
    } finally {
      await locker.close()
    }
  })

  it('the connection dies while commands are held in its socket: ioredis sends them again on the new one, every acquire is granted and nothing is left behind', async () => {
    const redis = client('ioredis')
    await ready(redis, 'ioredis')
    const locker = new Locker(redis, { ttlMs: 10_000, commandTimeoutMs: 5_000 })
    try {
      await (await locker.acquire(unique('warm'))).release()
      const resources = Array.from({ length: CONCURRENT }, (_, i) => unique(`wc-drop-${i}`))
      const socket = (redis as unknown as { stream: Socket }).stream
      const writes = countWrites(redis)
      // Once the coalescer holds commands in the socket (its first cork), the socket is destroyed
      // a microtask later — after the other acquires' microtasks already queued, so with the
      // batches of 16 written and the last one held — before the end of the tick, so what it
      // holds never leaves the process.
      let heldBytes = -1
      let writtenBefore = -1
      const cork = socket.cork
      socket.cork = function (this: Socket) {
        cork.call(this)
        if (heldBytes !== -1) return
        heldBytes = 0
        queueMicrotask(() => {
          heldBytes = socket.writableLength
          writtenBefore = writes.chunks
          socket.destroy()
        })
      }
      const acquiring = resources.map((r) => locker.acquire(r))
      const settled = Promise.allSettled(acquiring) // whatever the assertions below say
      await waitUntil(async () => socket.destroyed, { what: 'the socket destroyed' })
      writes.stop()
      expect(writtenBefore).toBe(1 + Math.floor((CONCURRENT - 1) / COALESCE_BATCH) * COALESCE_BATCH)
      expect(heldBytes).toBeGreaterThan(0)
      const outcomes = await settled
      expect(outcomes.filter((o) => o.status === 'rejected')).toEqual([])
      const locks = await Promise.all(acquiring)
      for (const [i, lock] of locks.entries()) {
        expect(lock.isHeld()).toBe(true)
        expect(await redis.get(resourceKeys('fencelock:', resources[i]!).lock)).not.toBeNull()
      }
      await Promise.all(locks.map((lock) => lock.release()))
      await waitUntil(
        async () => {
          for (const r of resources) if ((await redis.exists(resourceKeys('fencelock:', r).lock)) !== 0) return false
          return true
        },
        { what: 'every lock released' },
      )
    } finally {
      await locker.close()
    }
  })
})
