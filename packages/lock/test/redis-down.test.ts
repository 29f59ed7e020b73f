/**
 * Redis down (issue 33 item 7): an acquire whose client knows its connection is down fails at
 * once with `LockUnavailableError`, not after its `waitMs`; and `close()` while Redis is stalled
 * is bounded by `commandTimeoutMs`, not twice that. Real servers, killed and stopped; a port
 * nothing listens on; a host name that does not resolve. Every client here keeps the offline
 * queue on with unlimited retries (`maxRetriesPerRequest: null`), the worst case: ioredis would
 * hold a command sent while down until the connection comes back.
 */
import { once } from 'node:events'
import { freePort } from '@fencelock/devkit/net'
import { describe, expect, it } from 'vitest'
import { LockUnavailableError } from '../src/index.js'
import { connect, makeLocker, ready, unique } from './support/connections.js'
import { startRedisServer } from './support/redis-server.js'
import { settle, waitUntil } from './support/timing.js'

/** A wait long enough that "at once" and "after waitMs" cannot be confused on a loaded machine. */
const WAIT_MS = 10_000
/** "At once": the connection's own failure plus a loaded machine's delays, far below WAIT_MS. */
const AT_ONCE_MS = 3_000

function expectDown(error: unknown, code: string): void {
  expect(error).toBeInstanceOf(LockUnavailableError)
  expect(error).toMatchObject({ operation: 'acquire' })
  expect((error as Error).message).toMatch(/the connection to Redis is down/)
  expect((error as Error).cause).toMatchObject({ code })
}

describe('Redis down: acquire() fails at once, not after waitMs', () => {
  it('a killed server: an acquire with a 10 s wait fails at once, and so does one queued here behind a waiter; the waiter that reached Redis keeps its place and gets the lock once Redis is back', async () => {
    const server = await startRedisServer()
    const client = connect({ port: server.port }, { maxRetriesPerRequest: null })
    const holderClient = connect({ port: server.port }, { maxRetriesPerRequest: null })
    await ready(client, server.url)
    await ready(holderClient, server.url)
    const locker = makeLocker(client, { commandTimeoutMs: 1_000, pollMs: 5_000 })
    const holder = makeLocker(holderClient)
    const busy = unique('down-busy')
    await holder.acquire(busy, { ttlMs: 60_000 })
    // A waiter that reached Redis (it saw the lock held) and waits its turn.
    const waiting = settle(locker.acquire(busy, { waitMs: 20_000 }))
    await waitUntil(async () => (await locker.inspect(busy)).waiting === 1, { what: 'the waiter to queue' })

    // The client tried to reconnect and was refused: it knows Redis is down, and why.
    const refused = once(client, 'error')
    await server.stop()
    await refused

    const fresh = await settle(() => locker.acquire(unique('down-free'), { waitMs: WAIT_MS }))
    expectDown(fresh.error, 'ECONNREFUSED')
    expect(fresh.ms).toBeLessThan(AT_ONCE_MS)
    // Behind the local waiter: it would not even try, and waited its whole waitMs.
    const queued = await settle(() => locker.acquire(busy, { waitMs: WAIT_MS }))
    expectDown(queued.error, 'ECONNREFUSED')
    expect(queued.ms).toBeLessThan(AT_ONCE_MS)

    // Redis back without its data: the holder's lock is gone, the waiter is served.
    await server.restart()
    const { value: lock, error } = await waiting
    expect(error).toBeUndefined()
    expect(await lock!.release()).toBe(true)
  })

  it('a port nothing listens on (a fresh client that never connected, its commands queued offline): fails at once, ECONNREFUSED as the cause', async () => {
    const port = await freePort()
    const client = connect({ port }, { maxRetriesPerRequest: null })
    const commandTimeoutMs = 2_000
    const locker = makeLocker(client, { commandTimeoutMs })
    const first = await settle(() => locker.acquire(unique('down-never'), { waitMs: WAIT_MS }))
    expectDown(first.error, 'ECONNREFUSED')
    expect(first.ms).toBeLessThan(AT_ONCE_MS)
    // And again, now that the client is reconnecting: nothing is sent, nothing waits.
    const second = await settle(() => locker.acquire(unique('down-never'), { waitMs: WAIT_MS }))
    expectDown(second.error, 'ECONNREFUSED')
    expect(second.ms).toBeLessThan(AT_ONCE_MS)
    // close() waits for the try it sent (ioredis would send it when Redis is back, and a grant it
    // brings must be given back before the client is quit), within commandTimeoutMs.
    const closing = await settle(() => locker.close())
    expect(closing.ms).toBeLessThan(commandTimeoutMs + 1_000)
  })

  it('an unresolvable host: fails at once, ENOTFOUND as the cause', async () => {
    const client = connect({ host: 'fencelock-no-such-host.invalid', port: 6379 }, { maxRetriesPerRequest: null })
    const locker = makeLocker(client, { commandTimeoutMs: 2_000 })
    const { error, ms } = await settle(() => locker.acquire(unique('down-dns'), { waitMs: WAIT_MS }))
    expectDown(error, 'ENOTFOUND')
    expect(ms).toBeLessThan(AT_ONCE_MS + 2_000) // a DNS lookup on a loaded machine
  })
})

describe('close() while Redis is stalled', () => {
  it('is bounded by commandTimeoutMs (a held lock, a waiter, a try in flight), not twice that', async () => {
    const server = await startRedisServer()
    const client = connect({ port: server.port }, { maxRetriesPerRequest: null })
    const other = connect({ port: server.port }, { maxRetriesPerRequest: null })
    await ready(client, server.url)
    await ready(other, server.url)
    const commandTimeoutMs = 1_500
    const locker = makeLocker(client, { commandTimeoutMs, pollMs: 10_000 })
    const held = await locker.acquire(unique('stall-held'), { ttlMs: 60_000 })
    const busy = unique('stall-busy')
    await makeLocker(other).acquire(busy, { ttlMs: 60_000 })
    const waiter = settle(locker.acquire(busy, { waitMs: 60_000 }))
    await waitUntil(async () => (await locker.inspect(busy)).waiting === 1, { what: 'the waiter to queue' })
    server.pause()
    try {
      // A try in flight on the stopped server (its wait is not cut: it gets commandTimeoutMs).
      const inFlight = settle(locker.tryAcquire(unique('stall-try')))
      const { ms } = await settle(() => locker.close())
      // Everything is given commandTimeoutMs from the call to close(); twice that was the defect.
      expect(ms).toBeLessThan(commandTimeoutMs + 600)
      expect((await waiter).error).toBeInstanceOf(LockUnavailableError)
      expect((await inFlight).error).toBeInstanceOf(LockUnavailableError)
      expect(held.isHeld()).toBe(false)
    } finally {
      server.resume()
    }
  })
})

describe("a semaphore's Redis failure", () => {
  it('names the semaphore (resource, message), not its internal queue resource, as its timeout does', async () => {
    const port = await freePort()
    const locker = makeLocker(connect({ port }, { maxRetriesPerRequest: null }), { commandTimeoutMs: 1_000 })
    const name = unique('down-sem')
    const semaphore = locker.semaphore(name, { permits: 2 })
    for (const call of [() => semaphore.acquire({ waitMs: WAIT_MS }), () => semaphore.tryAcquire()]) {
      const { error, ms } = await settle(call)
      expect(error).toBeInstanceOf(LockUnavailableError)
      expect(error).toMatchObject({ resource: name, operation: 'acquire' })
      expect((error as Error).message).toContain(`semaphore "${name}"`)
      expect((error as Error).message).not.toContain(':queue')
      expect((error as Error).message).toMatch(/the connection to Redis is down/)
      expect(ms).toBeLessThan(AT_ONCE_MS)
    }
  })
})
