/**
 * `locker.readWrite()` on one Redis (a redis-server of its own): readers share, a writer excludes
 * everyone, a waiting writer stops new readers, a reader's lease expires alone, holds are lost the
 * ways they break (key deleted, event loop blocked past the lease), bad input, and tokens as
 * docs/LOCK.md defines them, with a reader's derived write fenced by its token.
 */
import { Etcd3 } from 'etcd3'
import type { Redis } from 'ioredis'
import { beforeAll, describe, expect, it } from 'vitest'
import {
  InvalidLockOptionError,
  LockAbortedError,
  LockLostError,
  LockTimeoutError,
  Locker,
  type ReadWriteHold,
} from '../../src/index.js'
import { commandCalls, connect, makeLocker, ready, stallServer, unique } from '../support/connections.js'
import { fencedStore } from '../support/fenced-store.js'
import { startRedisServer, type RedisServer } from '../support/redis-server.js'
import { HANDOFF_BOUND_MS, settle, sleep, waitUntil } from '../support/timing.js'

let server: RedisServer
let client: Redis
let a: Locker
let b: Locker

beforeAll(async () => {
  server = await startRedisServer()
  client = connect({ port: server.port })
  await ready(client, server.url)
  a = makeLocker(connect({ port: server.port }), { ttlMs: 10_000 })
  b = makeLocker(connect({ port: server.port }), { ttlMs: 10_000 })
})

/** Resolves with the reason once `signal` aborts. */
function aborted(signal: AbortSignal): Promise<unknown> {
  return new Promise((resolve) => {
    if (signal.aborted) resolve(signal.reason)
    else signal.addEventListener('abort', () => resolve(signal.reason), { once: true })
  })
}

describe('readers and writers', () => {
  it('readers share: two Lockers read at once, with the same token', async () => {
    const name = unique('rw-share')
    const r1 = await a.readWrite(name).read()
    const r2 = await b.readWrite(name).read({ waitMs: 0 })
    expect(r1.isHeld() && r2.isHeld()).toBe(true)
    expect(r2.token).toBe(r1.token)
    expect((await a.readWrite(name).inspect()).readers).toBe(2)
    expect(await r1.release()).toBe(true)
    expect(await r2.release()).toBe(true)
    expect((await a.readWrite(name).inspect()).state).toBe('free')
  })

  it('a writer excludes readers and writers; once it releases, both get in', async () => {
    const name = unique('rw-excl')
    const w = await a.readWrite(name).write()
    const rw = b.readWrite(name)
    expect((await settle(rw.read({ waitMs: 150 }))).error).toBeInstanceOf(LockTimeoutError)
    expect((await settle(rw.write({ waitMs: 150 }))).error).toBeInstanceOf(LockTimeoutError)
    // The writer that timed out leaves the queue (a NOSCRIPT fallback may put that after the next call).
    await waitUntil(async () => (await rw.inspect()).waitingWriters === 0, { what: 'the writer left' })
    expect(await rw.inspect()).toMatchObject({ state: 'write', readers: 0, writerToken: w.token })
    await w.release()
    const r = await rw.read({ waitMs: 0 })
    await r.release()
    const w2 = await rw.write({ waitMs: 0 })
    expect(w2.token).toBeGreaterThan(w.token)
    await w2.release()
  })

  it('readers exclude a writer until the last one leaves', async () => {
    const name = unique('rw-readers')
    const r1 = await a.readWrite(name).read()
    const r2 = await a.readWrite(name).read()
    expect((await settle(b.readWrite(name).write({ waitMs: 150 }))).error).toBeInstanceOf(LockTimeoutError)
    // The writer that gave up left no trace: readers enter again.
    await waitUntil(async () => (await a.readWrite(name).inspect()).waitingWriters === 0, { what: 'the writer left' })
    const r3 = await b.readWrite(name).read({ waitMs: 0 })
    const writing = b.readWrite(name).write({ waitMs: 20_000 })
    await r1.release()
    await r2.release()
    expect(await Promise.race([writing.then(() => 'granted'), settle(b.readWrite(name).inspect())])).not.toBe('granted')
    await r3.release()
    const w = await writing
    expect(w.isHeld()).toBe(true)
    await w.release()
  })

  it('a waiting writer stops new readers (writer preference), then gets in before them', async () => {
    const name = unique('rw-pref')
    const rw = a.readWrite(name)
    const r1 = await rw.read()
    const writing = b.readWrite(name).write({ waitMs: 20_000 })
    await waitUntil(async () => (await rw.inspect()).waitingWriters === 1, { what: 'the writer waits' })
    // A new reader is held back while the writer waits, though only readers hold.
    expect((await settle(rw.read({ waitMs: 200 }))).error).toBeInstanceOf(LockTimeoutError)
    const reading = rw.read({ waitMs: 20_000 })
    await r1.release()
    const w = await writing
    expect(w.token).toBeGreaterThan(r1.token)
    expect((await rw.inspect()).state).toBe('write')
    await w.release()
    const r2 = await reading
    expect(r2.token).toBe(w.token)
    await r2.release()
  })

  it('a reader whose process stalls past its lease expires alone: the waiting writer gets in, other readers are untouched', async () => {
    const name = unique('rw-stall')
    const rw = a.readWrite(name)
    const healthy = await rw.read({ ttlMs: 60_000, autoExtend: true })
    // The stalled reader: a short lease, never renewed, never released.
    const stalled = await b.readWrite(name).read({ ttlMs: 300 })
    const lost = aborted(stalled.signal)
    const writing = a.readWrite(name).write({ waitMs: 20_000 })
    await healthy.release()
    const w = await writing
    expect(w.isHeld()).toBe(true)
    expect(await lost).toBeInstanceOf(LockLostError)
    expect(((await lost) as LockLostError).reason).toBe('expired')
    expect(await stalled.release()).toBe(false)
    await w.release()
  })
})

describe('losing a hold', () => {
  it("a writer's signal aborts (not-owner) when its key is deleted; its watchdog finds out", async () => {
    const name = unique('rw-del')
    // A lease far longer than the watchdog's period (ttlMs / 3): the renewal, not the local
    // expiry, finds the loss, even on a loaded machine.
    const w = await a.readWrite(name).write({ ttlMs: 3_000, autoExtend: true })
    await client.del(`fencelock:rw:{${name}}:writer`)
    const reason = (await aborted(w.signal)) as LockLostError
    expect(reason).toBeInstanceOf(LockLostError)
    expect(reason.reason).toBe('not-owner')
    expect(reason.token).toBe(w.token)
    expect(w.isHeld()).toBe(false)
  })

  it("a reader's signal aborts (not-owner) when its lease is removed; extend() throws LockLostError", async () => {
    const name = unique('rw-zrem')
    const r = await a.readWrite(name).read({ ttlMs: 5_000 })
    await client.del(`fencelock:rw:{${name}}:readers`)
    expect((await settle(r.extend())).error).toBeInstanceOf(LockLostError)
    expect(r.signal.aborted).toBe(true)
    expect((r.signal.reason as LockLostError).reason).toBe('not-owner')
  })

  it('a reader whose event loop blocks past its lease is lost (expired) though its watchdog is on; a writer gets in', async () => {
    const name = unique('rw-block')
    const r = await a.readWrite(name).read({ ttlMs: 200, autoExtend: true })
    const until = performance.now() + 600
    while (performance.now() < until) {
      // blocked: neither the watchdog nor anything else runs
    }
    const reason = (await aborted(r.signal)) as LockLostError
    expect(reason.reason).toBe('expired')
    const w = await b.readWrite(name).write({ waitMs: 0 })
    await w.release()
    await r.release()
  })

  it('a writer whose renewals cannot reach Redis (CLIENT PAUSE) is lost on its own clock (expired); then another writer gets in', async () => {
    const name = unique('rw-pause')
    const w = await a.readWrite(name).write({ ttlMs: 1_000, autoExtend: true })
    await stallServer(client, 2_500)
    const reason = (await aborted(w.signal)) as LockLostError
    expect(reason.reason).toBe('expired')
    expect(w.isHeld()).toBe(false)
    const w2 = await b.readWrite(name).write({ waitMs: 20_000 })
    expect(w2.token).toBeGreaterThan(w.token)
    await w2.release()
  })

  it('extend() renews a hold; the watchdog keeps a hold past its ttl', async () => {
    const name = unique('rw-extend')
    const w = await a.readWrite(name).write({ ttlMs: 1_000, autoExtend: true })
    const r = b.readWrite(name)
    // Held well past its ttl: readers still wait.
    expect((await settle(r.read({ waitMs: 2_500 }))).error).toBeInstanceOf(LockTimeoutError)
    expect(w.isHeld()).toBe(true)
    await w.extend(5_000)
    expect(w.ttlMs).toBe(5_000)
    await w.release()
  })

  it('close() gives back the holds of the Locker (their signals abort: closed)', async () => {
    const name = unique('rw-close')
    const own = makeLocker(connect({ port: server.port }))
    const r = await own.readWrite(name).read()
    await own.close()
    expect((r.signal.reason as LockLostError).reason).toBe('closed')
    expect((await a.readWrite(name).inspect()).readers).toBe(0)
  })
})

describe('waiting', () => {
  it("a blocked writer is woken by the last reader's release message, and a blocked reader by the writer's, not by polling", async () => {
    const name = unique('rw-wake')
    // A backoff that may grow to 10 s: only the release message can bring the try within the bound.
    const slow = makeLocker(connect({ port: server.port }), { pollMs: 10_000 })
    const r = await a.readWrite(name).read()
    const before = await commandCalls(client)
    const writing = slow.readWrite(name).write({ waitMs: 30_000 })
    // Long enough for the backoff to grow past a second (2 ms doubling: 2 s of waiting).
    await sleep(3_000)
    const during = await commandCalls(client)
    const released = performance.now()
    await r.release()
    const w = await writing
    expect(performance.now() - released).toBeLessThan(HANDOFF_BOUND_MS)
    // Tries while waiting 3 s: a dozen (backoff), not the 60 that 50 ms polling would send.
    const tries = (during.evalsha ?? 0) - (before.evalsha ?? 0)
    expect(tries).toBeLessThan(25)
    const reading = slow.readWrite(name).read({ waitMs: 30_000 })
    await sleep(3_000)
    const freed = performance.now()
    await w.release()
    const r2 = await reading
    expect(performance.now() - freed).toBeLessThan(HANDOFF_BOUND_MS)
    expect(r2.token).toBe(w.token)
    await r2.release()
  })

  it('honours an AbortSignal: LockAbortedError, and the waiting writer leaves no trace', async () => {
    const name = unique('rw-abort')
    const r = await a.readWrite(name).read()
    const controller = new AbortController()
    const writing = settle(b.readWrite(name).write({ signal: controller.signal, waitMs: 20_000 }))
    await waitUntil(async () => (await a.readWrite(name).inspect()).waitingWriters === 1)
    controller.abort()
    expect((await writing).error).toBeInstanceOf(LockAbortedError)
    await waitUntil(async () => (await a.readWrite(name).inspect()).waitingWriters === 0)
    const r2 = await a.readWrite(name).read({ waitMs: 0 })
    await Promise.all([r.release(), r2.release()])
  })

  it('usingRead / usingWrite release after fn, and `await using` at the end of the block', async () => {
    const name = unique('rw-using')
    const rw = a.readWrite(name)
    const token = await rw.usingWrite((w) => w.token)
    expect(await rw.usingRead((r) => r.token)).toBe(token)
    {
      await using w = await rw.write()
      expect(w.mode).toBe('write')
    }
    expect((await rw.inspect()).state).toBe('free')
  })
})

describe('tokens', () => {
  it("a writer's token is above every earlier token; a reader's is the last write's before it", async () => {
    const name = unique('rw-tokens')
    const rw = a.readWrite(name)
    const first = await rw.usingRead((r) => r.token)
    const w1 = await rw.usingWrite((w) => w.token)
    expect(w1).toBeGreaterThan(first)
    const after1 = await rw.usingRead((r) => r.token)
    expect(after1).toBe(w1)
    const w2 = await rw.usingWrite((w) => w.token)
    expect(w2).toBeGreaterThan(w1)
    expect(await b.readWrite(name).usingRead((r) => r.token)).toBe(w2)
    expect((await rw.inspect()).lastToken).toBe(w2)
  })

  it("fences a reader's derived write: a reader that stalled past its lease is refused after a later write; unfenced, it overwrites", async () => {
    const name = unique('rw-fence')
    const store = fencedStore(client)
    const summary = `${name}:summary`
    const rw = a.readWrite(name)
    await rw.usingWrite(async (w) => expect(await store.write(summary, w.token)).toBe(true))
    // The reader reads after that write, then stalls: its lease (300 ms) runs out.
    const stale: ReadWriteHold = await b.readWrite(name).read({ ttlMs: 300 })
    const newer = await rw.write({ waitMs: 20_000 })
    expect(newer.token).toBeGreaterThan(stale.token)
    expect(await store.write(summary, newer.token)).toBe(true)
    await newer.release()
    // The stale reader wakes and writes what it derived from the old version: refused.
    expect(await store.write(summary, stale.token)).toBe(false)
    // A reader after the newer write carries its token: accepted.
    expect(await rw.usingRead((r) => store.write(summary, r.token))).toBe(true)
    // Control: the same stale write without the fence lands over the newer one.
    await client.set(`plain:{${summary}}`, `v${newer.token}`)
    await client.set(`plain:{${summary}}`, `v${stale.token}`)
    expect(await client.get(`plain:{${summary}}`)).toBe(`v${stale.token}`)
  })
})

describe('bad input, before any I/O', () => {
  it('names the field; unknown option names too; etcd is refused (quorum mode is not)', async () => {
    // A client that never connects: any I/O would hang or fail as unavailable, not as bad input.
    const dead = makeLocker(connect({ port: 1 }, { lazyConnect: true, enableOfflineQueue: false }))
    const field = (fn: () => unknown): string | undefined => {
      try {
        fn()
      } catch (error) {
        if (error instanceof InvalidLockOptionError) return error.field
        throw error
      }
      return undefined
    }
    const afield = async (fn: () => Promise<unknown>): Promise<string | undefined> => {
      const { error } = await settle(fn)
      return error instanceof InvalidLockOptionError ? error.field : String(error)
    }
    expect(field(() => dead.readWrite(''))).toBe('name')
    expect(field(() => dead.readWrite(42 as unknown as string))).toBe('name')
    expect(field(() => dead.readWrite('x', { mode: 'fair' } as never))).toBe('options.mode')
    expect(field(() => dead.readWrite('x', [] as never))).toBe('options')
    const rw = dead.readWrite('x')
    expect(await afield(() => rw.read({ ttlMs: 0 }))).toBe('ttlMs')
    expect(await afield(() => rw.write({ waitMs: -1 }))).toBe('waitMs')
    expect(await afield(() => rw.write({ waitMS: 1 } as never))).toBe('options.waitMS')
    expect(await afield(() => rw.read({ signal: 'no' } as never))).toBe('signal')
    expect(await afield(() => rw.usingRead(42 as never))).toBe('fn')
    expect(await afield(() => rw.usingWrite(() => 1, { autoExtend: true } as never))).toBe('options.autoExtend')
    // Quorum mode has read-write locks (test/family/read-write-quorum.test.ts); etcd has none yet.
    const quorum = makeLocker([1, 2, 3].map(() => connect({ port: 1 }, { lazyConnect: true })))
    expect(field(() => quorum.readWrite('x'))).toBeUndefined()
    const etcdClient = new Etcd3({ hosts: '127.0.0.1:1' })
    const etcd = new Locker(etcdClient)
    expect(field(() => etcd.readWrite('x'))).toBe('redis')
    await etcd.close()
    etcdClient.close()
  })
})
