/**
 * The hidden failures of faults.test.ts and redis-down.test.ts, on Valkey GLIDE: it reconnects
 * and resends differently again (a command in flight when the socket drops fails at once with
 * `ConnectionError` and is not sent again; a Redis that is down is seen by GLIDE only as calls that
 * time out, since GLIDE has no connection events: the adapter probes the address with a TCP
 * connect, client/glide-reachability.ts), and it gives up a call at its own `requestTimeout`
 * while the command may still run on the server. Real spawned servers, killed, paused (CLIENT
 * PAUSE) and cut (CLIENT KILL); nothing mocked.
 */
import { ConnectionError } from '@valkey/valkey-glide'
import { describe, expect, it } from 'vitest'
import { LOCK_DEFAULTS, LockUnavailableError, resourceKeys } from '../../src/index.js'
import type { AcquireOutcome, AcquireRequest, BackendListener } from '../../src/backend/backend.js'
import { RedisBackend, type RedisBackendOptions } from '../../src/backend/redis-backend.js'
import { GlideConnection, glideConfigurationOf } from '../../src/client/glide-client.js'
import { Deadlines, DeadlineExceededError } from '../../src/deadline.js'
import { newOwnerId } from '../../src/owner-id.js'
import { glideClient } from '../support/clients.js'
import {
  commandCalls,
  connect,
  connectionCount,
  makeLocker,
  ready,
  stallServer,
  unique,
} from '../support/connections.js'
import { startRedisServer } from '../support/redis-server.js'
import { acquireOnce } from '../support/scripts.js'
import { settle, waitUntil } from '../support/timing.js'

/** A wait long enough that "within it" and "after it" cannot be confused on a loaded machine. */
const WAIT_MS = 10_000
const keysOf = (resource: string) => resourceKeys('fencelock:', resource)

async function setUp(options: { requestTimeoutMs?: number } = {}) {
  const server = await startRedisServer()
  const admin = connect({ port: server.port }, { maxRetriesPerRequest: null })
  await ready(admin, server.url)
  const client = await glideClient(server.port, options)
  return { server, admin, client }
}

const request = (): AcquireRequest => ({
  ttlMs: 5_000,
  sentAt: performance.now(),
  waitUntil: undefined,
  first: true,
  queue: 'none',
})

/** The adapter the Locker makes of `client` (for the bare-script controls). */
function adapted(client: Awaited<ReturnType<typeof glideClient>>): GlideConnection {
  return new GlideConnection(client, glideConfigurationOf(client)!)
}

/** A backend over `connection`, outside any Locker (the probe's control). */
function backendOver(connection: GlideConnection, commandTimeoutMs: number): RedisBackend {
  const listener: BackendListener = { released: () => {}, reconnected: () => {} }
  const options: RedisBackendOptions = {
    prefix: 'fencelock:',
    commandTimeoutMs,
    fenceTtlMs: LOCK_DEFAULTS.fenceTtlMs,
    handoffMs: 500,
    queueLeaseMs: 5_000,
  }
  return new RedisBackend(connection, options, new Deadlines(), listener)
}

/** The ECONNREFUSED error at the end of `error`'s causes, if any. */
function refusal(error: unknown): NodeJS.ErrnoException | undefined {
  for (let e = error as { cause?: unknown } | undefined; e != null; e = e.cause as { cause?: unknown } | undefined)
    if ((e as NodeJS.ErrnoException).code === 'ECONNREFUSED') return e as NodeJS.ErrnoException
  return undefined
}

describe('GLIDE: Redis down', () => {
  it('a killed server: an acquire with a 10 s wait fails within about commandTimeoutMs (not waitMs) with LockUnavailableError, ECONNREFUSED as the cause (the adapter probed the address); after a restart it is granted', async () => {
    const { server, client } = await setUp()
    const commandTimeoutMs = 1_000
    const locker = makeLocker(client, { commandTimeoutMs })
    await (await locker.acquire(unique('glide-warm'))).release()
    await server.stop()
    const r = unique('glide-down')
    const { error, ms } = await settle(() => locker.acquire(r, { waitMs: WAIT_MS }))
    expect(error).toBeInstanceOf(LockUnavailableError)
    // As on ioredis and node-redis: the refused connect itself is the cause.
    expect((error as Error).cause).toMatchObject({ code: 'ECONNREFUSED' })
    expect(ms).toBeLessThan(commandTimeoutMs + 1_000) // far below WAIT_MS
    // The next acquire is refused without a call: the adapter knows the connection is down.
    const again = await settle(() => locker.acquire(r, { waitMs: WAIT_MS }))
    expect(again.error).toBeInstanceOf(LockUnavailableError)
    expect(again.ms).toBeLessThan(500)
    await server.restart()
    // GLIDE reconnects on its own schedule (its backoff); tries fail until it has.
    let lock: Awaited<ReturnType<typeof locker.acquire>> | undefined
    await waitUntil(
      async () => {
        lock = await locker.acquire(r, { waitMs: 1_000 }).catch(() => undefined)
        return lock !== undefined
      },
      { timeoutMs: 20_000, what: 'a grant once the server is back' },
    )
    expect(await lock!.release()).toBe(true)
  })

  it('control, the probe off: the same killed server is seen only as calls that time out — the adapter stays ready, each try fails at its deadline, and an acquire would wait out its whole waitMs', async () => {
    const { server, client } = await setUp()
    const commandTimeoutMs = 1_000
    const probed = backendOver(new GlideConnection(client, glideConfigurationOf(client)!), commandTimeoutMs)
    const unprobed = backendOver(
      new GlideConnection(client, glideConfigurationOf(client)!, { probe: false }),
      commandTimeoutMs,
    )
    for (const b of [probed, unprobed])
      expect((await b.acquire(b.resource(unique('glide-warm')), request())).granted).toBe(true)
    await server.stop()
    const timedTry = async (b: RedisBackend) => {
      const t = performance.now()
      const outcome = await b.acquire(b.resource(unique('glide-ctl')), request())
      return { outcome, ms: performance.now() - t }
    }
    const withProbe = await timedTry(probed)
    expect(withProbe.outcome.granted).toBe(false)
    expect(withProbe.ms).toBeLessThan(commandTimeoutMs + 500)
    await waitUntil(() => refusal(probed.connectionDown())?.code === 'ECONNREFUSED', {
      timeoutMs: 3_000,
      what: 'the probed backend to know the connection is down',
    })
    // Without the probe: a try runs out its deadline, and nothing says Redis is down, so the wait
    // queue tries again and again until waitMs (the behaviour before the probe). A try GLIDE
    // wrote on the socket before it saw the close may instead fail at once with GLIDE's own
    // ConnectionError (a clean-clone CI run, loaded: "channel closed"); that says nothing of a
    // refusal either, and the next try is queued for GLIDE's reconnect and runs out its deadline.
    const early: unknown[] = []
    let withoutProbe = await timedTry(unprobed)
    const errorOf = (o: AcquireOutcome) => (o.granted ? undefined : o.error)
    while (!(errorOf(withoutProbe.outcome) instanceof DeadlineExceededError) && early.length < 3) {
      early.push(errorOf(withoutProbe.outcome))
      withoutProbe = await timedTry(unprobed)
    }
    for (const error of early) expect(error).toBeInstanceOf(ConnectionError)
    expect(withoutProbe.outcome).toMatchObject({ granted: false, error: expect.any(DeadlineExceededError) })
    expect(withoutProbe.ms).toBeGreaterThanOrEqual(commandTimeoutMs - 50)
    expect(unprobed.connectionDown()).toBeUndefined()
    await Promise.all([probed.close(), unprobed.close()])
  })

  it('a SIGSTOPped server (its kernel accepts TCP, Redis answers nothing): not reported down — the acquire fails at its wait as a stalled Redis does, the cause a deadline, not a refusal', async () => {
    const { server, client } = await setUp()
    const commandTimeoutMs = 500
    const locker = makeLocker(client, { commandTimeoutMs })
    await (await locker.acquire(unique('glide-warm'))).release()
    const waitMs = 2_000
    server.pause()
    try {
      const { error, ms } = await settle(() => locker.acquire(unique('glide-stopped'), { waitMs }))
      expect(error).toBeInstanceOf(LockUnavailableError)
      expect((error as Error).cause).toBeInstanceOf(DeadlineExceededError)
      expect(refusal(error)).toBeUndefined()
      expect(ms).toBeGreaterThan(waitMs - commandTimeoutMs - 100)
      const adapter = new GlideConnection(client, glideConfigurationOf(client)!)
      expect(adapter.state).toBe('ready')
    } finally {
      server.resume()
    }
    const lock = await locker.acquire(unique('glide-resumed'), { waitMs: 10_000 })
    expect(await lock.release()).toBe(true)
  })
})

describe('GLIDE: a Redis that stalls (CLIENT PAUSE ALL) mid-call', () => {
  it('a try sent into the stall fails at its deadline, and its late grant is given back; the bare script, given up on locally, leaves a lock held by nobody', async () => {
    const { admin, client } = await setUp()
    const commandTimeoutMs = 300
    const locker = makeLocker(client, { commandTimeoutMs })
    await (await locker.acquire(unique('glide-warm'))).release()
    const r = unique('glide-stalled')
    const control = unique('glide-stalled-control')
    await stallServer(admin, 1_500)
    const { error, ms } = await settle(() => locker.tryAcquire(r, { ttlMs: 60_000 }))
    expect(error).toBeInstanceOf(LockUnavailableError)
    expect(ms).toBeLessThan(commandTimeoutMs + 1_000) // far below the 1.5 s stall
    // Control: the same script through the adapter without the Locker's clean-up.
    const bare = acquireOnce(adapted(client), keysOf(control), {
      ownerId: newOwnerId(),
      ttlMs: 60_000,
      fenceTtlMs: 86_400_000,
      lockerId: 'bare',
    })
    expect((await bare).granted).toBe(true)
    await waitUntil(
      async () => (await admin.exists(keysOf(r).fence)) === 1 && (await admin.exists(keysOf(r).lock)) === 0,
      { timeoutMs: 3_000, what: 'the late grant to be given back' },
    )
    expect(await admin.pttl(keysOf(control).lock)).toBeGreaterThan(50_000) // without it: held ~60 s by nobody
  })

  it("GLIDE's own requestTimeout below commandTimeoutMs: the try fails at GLIDE's timeout while the script still runs on the server once it answers; the clean-up sent behind it gives the grant back, the bare script's grant stays held by nobody", async () => {
    const { admin, client } = await setUp({ requestTimeoutMs: 250 })
    const locker = makeLocker(client, { commandTimeoutMs: 5_000 })
    await (await locker.acquire(unique('glide-warm'))).release()
    const r = unique('glide-request-timeout')
    const control = unique('glide-request-timeout-control')
    await stallServer(admin, 1_500)
    const { error, ms } = await settle(() => locker.tryAcquire(r, { ttlMs: 60_000 }))
    expect(error).toBeInstanceOf(LockUnavailableError)
    expect(ms).toBeLessThan(1_500) // GLIDE's 250 ms, not the stall nor commandTimeoutMs
    const bare = await settle(() =>
      acquireOnce(adapted(client), keysOf(control), {
        ownerId: newOwnerId(),
        ttlMs: 60_000,
        fenceTtlMs: 86_400_000,
        lockerId: 'bare',
      }),
    )
    expect(bare.error?.constructor.name).toBe('TimeoutError') // GLIDE gave up; the server had it
    await waitUntil(async () => (await admin.exists(keysOf(control).lock)) === 1, {
      timeoutMs: 5_000,
      what: 'the bare script to run once the stall ends',
    })
    expect(await admin.exists(keysOf(r).fence)).toBe(1) // our try ran too…
    expect(await admin.exists(keysOf(r).lock)).toBe(0) // …and was given back
    expect(await admin.pttl(keysOf(control).lock)).toBeGreaterThan(50_000) // held ~60 s by nobody
  })
})

describe('GLIDE: a reply lost to a reconnect', () => {
  it('a try in flight when the connection is killed fails at once (not at commandTimeoutMs); GLIDE does not send it again, no lock is left, and the next acquire is granted', async () => {
    const { admin, client } = await setUp()
    const locker = makeLocker(client, { commandTimeoutMs: 5_000 })
    await (await locker.acquire(unique('glide-warm'))).release()
    const r = unique('glide-killed')
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
    expect((error as Error).cause?.constructor.name).toBe('ConnectionError')
    expect(performance.now() - t).toBeLessThan(1_000) // commandTimeoutMs is 5 s
    // A write of the admin's waits for the pause to end: by then a resent try would have run.
    await admin.set(unique('glide-after-pause'), '1')
    expect(await admin.exists(keysOf(r).lock)).toBe(0)
    const lock = await locker.acquire(r, { waitMs: 5_000 })
    expect(await lock.release()).toBe(true)
  })
})

describe('GLIDE: scripts by SHA, and pub/sub on a client of ours', () => {
  it("after SCRIPT FLUSH the next call is EVALSHA then one EVAL (GLIDE's NoScriptError read as NOSCRIPT); without that reading the call fails", async () => {
    const { admin, client } = await setUp()
    const locker = makeLocker(client)
    await (await locker.acquire(unique('glide-sha'))).release()
    await admin.script('FLUSH')
    const before = await commandCalls(admin)
    const lock = await locker.acquire(unique('glide-sha'))
    const after = await commandCalls(admin)
    expect((after.evalsha ?? 0) - (before.evalsha ?? 0)).toBe(1)
    expect((after.eval ?? 0) - (before.eval ?? 0)).toBe(1)
    await lock.release()
    // Control: GLIDE's own error, as a client that passes it on unread would.
    await admin.script('FLUSH')
    const raw = adapted(client)
    const unread = {
      evalsha: (...a: Parameters<typeof raw.call>) => client.customCommand(['EVALSHA', ...a.map(String)]),
      eval: raw.eval.bind(raw),
    }
    const { error } = await settle(() =>
      acquireOnce(unread, keysOf(unique('glide-sha-control')), {
        ownerId: newOwnerId(),
        ttlMs: 10_000,
        fenceTtlMs: 86_400_000,
        lockerId: 'bare',
      }),
    )
    expect((error as Error).message).toMatch(/NoScriptError/)
  })

  it('a pub/sub client that could not be created (Redis down) is created again by the next subscribe, and then gets messages', async () => {
    const { server, admin, client } = await setUp({ requestTimeoutMs: 1_000 })
    const got: string[] = []
    const sub = adapted(client).subscriber({ message: (_channel, text) => got.push(text), ready: () => {} })
    await server.stop()
    const first = await settle(() => sub.subscribe('glide-sub-retry'))
    expect(first.error).toBeInstanceOf(Error) // GLIDE's createClient does not wait for Redis to come back
    await server.restart()
    await ready(admin, server.url, 10_000)
    await waitUntil(async () => (await settle(() => sub.subscribe('glide-sub-retry'))).error === undefined, {
      timeoutMs: 10_000,
      what: 'a subscribe to succeed once the server is back',
    })
    await admin.publish('glide-sub-retry', 'hello')
    await waitUntil(() => got.includes('hello'), { what: 'the message' })
    sub.close()
  })

  it("a waiter is woken by the holder's release message (long before its safety poll); the Locker's close closes its pub/sub client", async () => {
    const { admin, client } = await setUp()
    const holder = makeLocker(client)
    const waiter = makeLocker(client, { pollMs: 20_000 })
    const r = unique('glide-wake')
    const lock = await holder.acquire(r, { ttlMs: 30_000 })
    const waiting = settle(() => waiter.acquire(r, { waitMs: WAIT_MS }))
    const subscribed = async () => ((await admin.call('PUBSUB', 'NUMSUB', keysOf(r).channel)) as unknown[])[1]
    await waitUntil(async () => (await subscribed()) === 1, { what: 'the waiter to subscribe' })
    const t = performance.now()
    await lock.release()
    const { value, error } = await waiting
    expect(error).toBeUndefined()
    expect(performance.now() - t).toBeLessThan(3_000) // the safety poll is 20 s, the TTL 30 s
    await value!.release()
    const open = await connectionCount(admin)
    await waiter.close()
    await waitUntil(async () => (await connectionCount(admin)) === open - 1, {
      what: "the waiter's pub/sub client to close",
    })
  })
})
