/**
 * The hidden failures of faults.test.ts and redis-down.test.ts, on each client library the Locker
 * takes: ioredis, iovalkey and node-redis. Each reconnects and resends in its own way — node-redis
 * fails a command in flight when the socket drops and does not send it again; ioredis and its
 * fork iovalkey send it again after the reconnection — and that is where round 3 found an
 * orphaned grant, so each case runs on each library, from one suite. Real spawned servers,
 * killed, stopped (SIGSTOP), paused (CLIENT PAUSE) and cut (CLIENT KILL); nothing mocked.
 * (GLIDE, whose failures differ again — no connection events — has glide-faults.test.ts.)
 */
import { once } from 'node:events'
import { setTimeout as sleep } from 'node:timers/promises'
import { freePort } from '@fencelock/devkit/net'
import { describe, expect, it } from 'vitest'
import { LockUnavailableError, resourceKeys, type SupportedRedisClient } from '../../src/index.js'
import { adaptClient } from '../../src/client/choose-client.js'
import { newOwnerId } from '../../src/owner-id.js'
import { nodeRedisClient, valkeyClient } from '../support/clients.js'
import { connect, makeLocker, ready, stallServer, unique } from '../support/connections.js'
import { startRedisServer } from '../support/redis-server.js'
import { acquireOnce } from '../support/scripts.js'
import { settle, waitUntil } from '../support/timing.js'

/** A wait long enough that "at once" and "after waitMs" cannot be confused on a loaded machine. */
const WAIT_MS = 10_000
const AT_ONCE_MS = 3_000
const keysOf = (resource: string) => resourceKeys('fencelock:', resource)

/** What differs between the libraries, for the assertions that depend on it. */
interface Library {
  readonly name: 'ioredis' | 'node-redis' | 'iovalkey'
  /** A client to 127.0.0.1:`port`, connecting (its commands wait in its offline queue until it is ready). */
  client(port: number): SupportedRedisClient
  isReady(client: SupportedRedisClient): boolean
  /** A command in flight when the connection drops is sent again after the reconnection. */
  readonly resends: boolean
}

const LIBRARIES: readonly Library[] = [
  {
    name: 'ioredis',
    client: (port) => connect({ port }),
    isReady: (client) => (client as { status: string }).status === 'ready',
    resends: true,
  },
  {
    name: 'node-redis',
    client: (port) => nodeRedisClient(port),
    isReady: (client) => (client as { isReady: boolean }).isReady,
    resends: false,
  },
  {
    name: 'iovalkey',
    client: (port) => valkeyClient(port),
    isReady: (client) => (client as { status: string }).status === 'ready',
    resends: true,
  },
]

/** The client's events (each of these libraries is an EventEmitter). */
const events = (client: SupportedRedisClient) => client as unknown as NodeJS.EventEmitter

const refusedError = (e: unknown) => (e as { code?: string } | undefined)?.code === 'ECONNREFUSED'

describe.each(LIBRARIES)('$name', (lib) => {
  async function setUp() {
    const server = await startRedisServer()
    const admin = connect({ port: server.port }, { maxRetriesPerRequest: null })
    await ready(admin, server.url)
    const client = lib.client(server.port)
    await waitUntil(async () => lib.isReady(client), { what: `the ${lib.name} client to be ready` })
    return { server, admin, client }
  }

  /** The bare acquire script through the same client, without the Locker's clean-up: the control. */
  const bareAcquire = (client: SupportedRedisClient, resource: string) =>
    acquireOnce(adaptClient(client, 'client'), keysOf(resource), {
      ownerId: newOwnerId(),
      ttlMs: 60_000,
      fenceTtlMs: 86_400_000,
      lockerId: 'bare',
    })

  describe('Redis down', () => {
    it('a killed server: an acquire with a 10 s wait fails at once with LockUnavailableError, ECONNREFUSED as the cause; after a restart it is granted', async () => {
      const { server, client } = await setUp()
      const locker = makeLocker(client, { commandTimeoutMs: 1_000 })
      await (await locker.acquire(unique('cf-warm'))).release()
      // The first error may be the lost socket; then come the refused reconnections.
      const refused = new Promise<void>((resolve) =>
        events(client).on('error', (e: unknown) => refusedError(e) && resolve()),
      )
      await server.stop()
      await refused
      const r = unique('cf-down')
      const { error, ms } = await settle(() => locker.acquire(r, { waitMs: WAIT_MS }))
      expect(error).toBeInstanceOf(LockUnavailableError)
      expect((error as Error).message).toMatch(/the connection to Redis is down/)
      expect((error as Error).cause).toMatchObject({ code: 'ECONNREFUSED' })
      expect(ms).toBeLessThan(AT_ONCE_MS)
      await server.restart()
      await waitUntil(async () => lib.isReady(client), { what: 'the client to reconnect' })
      const lock = await locker.acquire(r, { waitMs: 2_000 })
      expect(await lock.release()).toBe(true)
    })

    it('a port nothing listens on (a client that was never ready): fails at once with ECONNREFUSED as the cause, for a Locker made before or after the refusals began', async () => {
      const port = await freePort()
      const client = lib.client(port)
      // A try that waited in the offline queue would fail at commandTimeoutMs: far above AT_ONCE_MS.
      const locker = makeLocker(client, { commandTimeoutMs: 8_000 })
      await once(events(client), 'error')
      const { error, ms } = await settle(() => locker.acquire(unique('cf-never'), { waitMs: WAIT_MS }))
      expect(error).toBeInstanceOf(LockUnavailableError)
      expect((error as Error).cause).toMatchObject({ code: 'ECONNREFUSED' })
      expect(ms).toBeLessThan(AT_ONCE_MS)
      // A Locker made after the client's refusals began (nothing of ours heard them): its first try
      // waits in the offline queue only until the client's next refused retry, not commandTimeoutMs.
      const later = makeLocker(client, { commandTimeoutMs: 8_000 })
      const second = await settle(() => later.acquire(unique('cf-never-later'), { waitMs: WAIT_MS }))
      expect(second.error).toBeInstanceOf(LockUnavailableError)
      expect((second.error as Error).cause).toMatchObject({ code: 'ECONNREFUSED' })
      expect(second.ms).toBeLessThan(AT_ONCE_MS)
    })
  })

  describe('a stopped (SIGSTOP) Redis', () => {
    it('acquire fails with LockUnavailableError within its wait; after SIGCONT no lock is left in our name, where the bare script leaves one held by nobody', async () => {
      const { server, admin, client } = await setUp()
      const commandTimeoutMs = 300
      const locker = makeLocker(client, { commandTimeoutMs })
      await (await locker.acquire(unique('cf-warm'))).release()
      const [r, control] = [unique('cf-stopped'), unique('cf-stopped-control')]
      server.pause()
      try {
        const { error, ms } = await settle(() => locker.acquire(r, { waitMs: 1_000 }))
        expect(error).toBeInstanceOf(LockUnavailableError)
        expect(ms).toBeLessThan(1_000 + AT_ONCE_MS)
        // Control: the same script without the Locker's clean-up, given up on locally.
        const bare = bareAcquire(client, control)
        expect(await Promise.race([bare.then(() => 'answered'), sleep(200).then(() => 'gave up')])).toBe('gave up')
      } finally {
        server.resume()
      }
      await waitUntil(async () => (await admin.exists(keysOf(control).lock)) === 1, {
        timeoutMs: 5_000,
        what: 'the bare acquire to land',
      })
      // Ours landed late too (its token counter exists), and the compare-and-delete behind it
      // removed the lock it set (commands keep their order on the connection).
      await waitUntil(
        async () => (await admin.exists(keysOf(r).fence)) === 1 && (await admin.exists(keysOf(r).lock)) === 0,
        { timeoutMs: 5_000, what: 'our late grant to be given back' },
      )
      expect(await admin.pttl(keysOf(control).lock)).toBeGreaterThan(50_000) // without it: held ~60 s by nobody
    })
  })

  describe('a Redis that stalls (CLIENT PAUSE ALL) mid-call', () => {
    it('a try sent into the stall fails at its deadline (not when Redis answers), and its late grant is given back; the bare script, given up on locally, leaves a lock held by nobody', async () => {
      const { admin, client } = await setUp()
      const commandTimeoutMs = 300
      const locker = makeLocker(client, { commandTimeoutMs })
      await (await locker.acquire(unique('cf-warm'))).release()
      const r = unique('cf-stalled')
      const control = unique('cf-stalled-control')
      await stallServer(admin, 1_500)
      const { error, ms } = await settle(() => locker.tryAcquire(r, { ttlMs: 60_000 }))
      expect(error).toBeInstanceOf(LockUnavailableError)
      expect(ms).toBeLessThan(commandTimeoutMs + 1_000) // far below the 1.5 s stall
      expect((await bareAcquire(client, control)).granted).toBe(true)
      // Once Redis answers, our late grant ran (its counter exists) and was given back.
      await waitUntil(
        async () => (await admin.exists(keysOf(r).fence)) === 1 && (await admin.exists(keysOf(r).lock)) === 0,
        { timeoutMs: 3_000, what: 'the late grant to be given back' },
      )
      expect(await admin.pttl(keysOf(control).lock)).toBeGreaterThan(50_000) // without it: held ~60 s by nobody
    })
  })

  describe('a reply lost to a reconnect', () => {
    it(`a try in flight when the connection is killed fails at once (not at commandTimeoutMs); ${lib.resends ? 'the client sends it again after the reconnection, and that grant is given back' : 'the client does not send it again'}: no lock is left, and the next acquire is granted`, async () => {
      const { admin, client } = await setUp()
      const locker = makeLocker(client, { commandTimeoutMs: 5_000 })
      await (await locker.acquire(unique('cf-warm'))).release()
      const r = unique('cf-killed')
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
      // A write of the admin's waits for the pause to end: by then a try sent again has run or is queued.
      await admin.set(unique('cf-after-pause'), '1')
      await waitUntil(async () => lib.isReady(client), { what: 'the client to reconnect' })
      if (lib.resends) {
        // The resent try granted the lock (its counter exists); the clean-up behind it deleted it.
        await waitUntil(
          async () => (await admin.exists(keysOf(r).fence)) === 1 && (await admin.exists(keysOf(r).lock)) === 0,
          { timeoutMs: 3_000, what: 'the resent grant to be given back' },
        )
      } else {
        expect(await admin.exists(keysOf(r).fence, keysOf(r).lock)).toBe(0)
      }
      const lock = await locker.acquire(r, { waitMs: 2_000 })
      expect(await lock.release()).toBe(true)
    })
  })
})
