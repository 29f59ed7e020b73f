/**
 * The hidden failures of faults.test.ts and redis-down.test.ts, on node-redis: it reconnects and
 * resends differently from ioredis (a command in flight when the socket drops fails, and is not
 * sent again; commands not yet written wait for the reconnection), so each is run again through
 * it. Real spawned servers, killed, paused (CLIENT PAUSE) and cut (CLIENT KILL); nothing mocked.
 */
import { once } from 'node:events'
import { freePort } from '@fencelock/devkit/net'
import { describe, expect, it } from 'vitest'
import { LockUnavailableError, resourceKeys } from '../../src/index.js'
import { NodeRedisConnection } from '../../src/client/node-redis-client.js'
import { newOwnerId } from '../../src/owner-id.js'
import { nodeRedisClient } from '../support/clients.js'
import { connect, makeLocker, ready, stallServer, unique } from '../support/connections.js'
import { startRedisServer } from '../support/redis-server.js'
import { acquireOnce } from '../support/scripts.js'
import { settle, waitUntil } from '../support/timing.js'

/** A wait long enough that "at once" and "after waitMs" cannot be confused on a loaded machine. */
const WAIT_MS = 10_000
const AT_ONCE_MS = 3_000
const keysOf = (resource: string) => resourceKeys('fencelock:', resource)

async function setUp() {
  const server = await startRedisServer()
  const admin = connect({ port: server.port }, { maxRetriesPerRequest: null })
  await ready(admin, server.url)
  const client = nodeRedisClient(server.port)
  await waitUntil(async () => client.isReady, { what: 'the node-redis client to be ready' })
  return { server, admin, client }
}

describe('node-redis: Redis down', () => {
  it('a killed server: an acquire with a 10 s wait fails at once with LockUnavailableError, ECONNREFUSED as the cause; after a restart it is granted', async () => {
    const { server, client } = await setUp()
    const locker = makeLocker(client, { commandTimeoutMs: 1_000 })
    await (await locker.acquire(unique('nr-warm'))).release()
    // The first error is the lost socket; then come the refused reconnections.
    const refused = new Promise<void>((resolve) =>
      client.on('error', (e: unknown) => (e as { code?: string }).code === 'ECONNREFUSED' && resolve()),
    )
    await server.stop()
    await refused
    const r = unique('nr-down')
    const { error, ms } = await settle(() => locker.acquire(r, { waitMs: WAIT_MS }))
    expect(error).toBeInstanceOf(LockUnavailableError)
    expect((error as Error).message).toMatch(/the connection to Redis is down/)
    expect((error as Error).cause).toMatchObject({ code: 'ECONNREFUSED' })
    expect(ms).toBeLessThan(AT_ONCE_MS)
    await server.restart()
    await waitUntil(async () => client.isReady, { what: 'the client to reconnect' })
    const lock = await locker.acquire(r, { waitMs: 2_000 })
    expect(await lock.release()).toBe(true)
  })

  it('a port nothing listens on (connect() called, never ready): fails at once with ECONNREFUSED as the cause', async () => {
    const port = await freePort()
    const client = nodeRedisClient(port)
    // A try that waited in the offline queue would fail at commandTimeoutMs: far above AT_ONCE_MS.
    const locker = makeLocker(client, { commandTimeoutMs: 8_000 })
    await once(client, 'error')
    const { error, ms } = await settle(() => locker.acquire(unique('nr-never'), { waitMs: WAIT_MS }))
    expect(error).toBeInstanceOf(LockUnavailableError)
    expect((error as Error).cause).toMatchObject({ code: 'ECONNREFUSED' })
    expect(ms).toBeLessThan(AT_ONCE_MS)
    // A Locker made after the client's refusals began (nothing of ours heard them): its first try
    // waits in the offline queue only until the client's next refused retry, not commandTimeoutMs.
    const later = makeLocker(client, { commandTimeoutMs: 8_000 })
    const second = await settle(() => later.acquire(unique('nr-never-later'), { waitMs: WAIT_MS }))
    expect(second.error).toBeInstanceOf(LockUnavailableError)
    expect((second.error as Error).cause).toMatchObject({ code: 'ECONNREFUSED' })
    expect(second.ms).toBeLessThan(AT_ONCE_MS)
    const late = nodeRedisClient(port)
    await once(late, 'error')
    await once(late, 'error')
    const third = await settle(() =>
      makeLocker(late, { commandTimeoutMs: 8_000 }).acquire(unique('nr-never-3'), { waitMs: WAIT_MS }),
    )
    expect(third.error).toBeInstanceOf(LockUnavailableError)
    expect((third.error as Error).cause).toMatchObject({ code: 'ECONNREFUSED' })
    expect(third.ms).toBeLessThan(AT_ONCE_MS)
  })
})

describe('node-redis: a Redis that stalls (CLIENT PAUSE ALL) mid-call', () => {
  it('a try sent into the stall fails at its deadline (not when Redis answers), and its late grant is given back; the bare script, given up on locally, leaves a lock held by nobody', async () => {
    const { admin, client } = await setUp()
    const commandTimeoutMs = 300
    const locker = makeLocker(client, { commandTimeoutMs })
    await (await locker.acquire(unique('nr-warm'))).release()
    const r = unique('nr-stalled')
    const control = unique('nr-stalled-control')
    await stallServer(admin, 1_500)
    const { error, ms } = await settle(() => locker.tryAcquire(r, { ttlMs: 60_000 }))
    expect(error).toBeInstanceOf(LockUnavailableError)
    expect(ms).toBeLessThan(commandTimeoutMs + 1_000) // far below the 1.5 s stall
    // Control: the same script through node-redis without the Locker's clean-up.
    const bare = acquireOnce(new NodeRedisConnection(client), keysOf(control), {
      ownerId: newOwnerId(),
      ttlMs: 60_000,
      fenceTtlMs: 86_400_000,
      lockerId: 'bare',
    })
    expect((await bare).granted).toBe(true)
    // Once Redis answers, our late grant ran (its counter exists) and was given back.
    await waitUntil(
      async () => (await admin.exists(keysOf(r).fence)) === 1 && (await admin.exists(keysOf(r).lock)) === 0,
      { timeoutMs: 3_000, what: 'the late grant to be given back' },
    )
    expect(await admin.pttl(keysOf(control).lock)).toBeGreaterThan(50_000) // without it: held ~60 s by nobody
  })
})

describe('node-redis: a reply lost to a reconnect', () => {
  it('a try in flight when the connection is killed fails at once (not at commandTimeoutMs); node-redis does not send it again, no lock is left, and the next acquire is granted', async () => {
    const { admin, client } = await setUp()
    const locker = makeLocker(client, { commandTimeoutMs: 5_000 })
    await (await locker.acquire(unique('nr-warm'))).release()
    const r = unique('nr-killed')
    // Writes held for 600 ms: the try is sent and waits on the server.
    await admin.client('PAUSE', 600, 'WRITE')
    const pending = settle(locker.tryAcquire(r))
    await waitUntil(async () => /cmd=evalsha/.test(String(await admin.client('LIST'))), {
      what: 'the try to wait on the server',
    })
    const t = performance.now()
    await admin.call('CLIENT', 'KILL', 'TYPE', 'normal', 'SKIPME', 'yes')
    const { error } = await pending
    expect(error).toBeInstanceOf(LockUnavailableError)
    expect(performance.now() - t).toBeLessThan(1_000) // commandTimeoutMs is 5 s
    // A write of the admin's waits for the pause to end: by then a resent try would have run.
    await admin.set(unique('nr-after-pause'), '1')
    expect(await admin.exists(keysOf(r).lock)).toBe(0)
    await waitUntil(async () => client.isReady, { what: 'the client to reconnect' })
    const lock = await locker.acquire(r, { waitMs: 2_000 })
    expect(await lock.release()).toBe(true)
  })
})
