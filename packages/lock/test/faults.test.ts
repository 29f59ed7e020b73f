/**
 * Faults injected for real on spawned redis-servers: SIGKILL, SIGSTOP/SIGCONT, restart without
 * persistence, FLUSHALL, SCRIPT FLUSH. Nothing is mocked.
 */
import { once } from 'node:events'
import type { Redis } from 'ioredis'
import { describe, expect, it } from 'vitest'
import { acquireOnce } from './support/scripts.js'
import {
  LockAbortedError,
  LockLostError,
  LockTimeoutError,
  LockUnavailableError,
  resourceKeys,
  type Lock,
} from '../src/index.js'
import { newOwnerId } from '../src/owner-id.js'
import { commandCalls, connect, makeLocker, ready, stallServer, unique } from './support/connections.js'
import { eventLog } from './support/events.js'
import { startLatencyProxy } from './support/latency-proxy.js'
import { startRedisServer, type RedisServer } from './support/redis-server.js'
import { settle, sleep, waitUntil } from './support/timing.js'

// How late past its deadline a failing call may settle. The lock settles from a timer at the
// deadline and sends nothing it waits for afterwards, so the slack is only timer granularity
// (1 ms) plus event-loop delay while other test files load this 2-core machine (tens of ms).
const SLACK_MS = 150
const keyOf = (resource: string) => resourceKeys('fencelock:', resource).lock

/** A spawned server, a client on it that queues commands forever while it is down (the worst
 * case for a late acquire), and an admin client for checks. */
async function setUp(): Promise<{ server: RedisServer; client: Redis; admin: Redis }> {
  const server = await startRedisServer()
  const client = connect({ port: server.port }, { maxRetriesPerRequest: null })
  const admin = connect({ port: server.port }, { maxRetriesPerRequest: null })
  await ready(client, server.url)
  await ready(admin, server.url)
  return { server, client, admin }
}

async function expectUnavailableWithin(promise: Promise<unknown>, startedAt: number, budgetMs: number): Promise<void> {
  const { error } = await settle(promise)
  const ms = performance.now() - startedAt
  expect(error).toBeInstanceOf(LockUnavailableError)
  expect(error).toMatchObject({ operation: 'acquire' })
  expect(ms).toBeLessThan(budgetMs + SLACK_MS)
}

describe('a killed Redis', () => {
  it('fails acquire (whatever its waitMs), tryAcquire and waitMs 0 with LockUnavailableError at once, with the connection error as the cause; nothing is sent while the connection is down, and after a restart no lock is left', async () => {
    const { server, client, admin } = await setUp()
    const l = eventLog()
    const locker = makeLocker(client, { commandTimeoutMs: 250, onEvent: l.onEvent })
    await (await locker.acquire(unique('warm'))).release()
    // The client tried to reconnect and was refused: it knows the connection is down, and why.
    const refused = once(client, 'error')
    await server.stop()
    await refused

    const names = [unique('killed-a'), unique('killed-b'), unique('killed-c'), unique('killed-d')]
    let t = performance.now()
    await expectUnavailableWithin(locker.acquire(names[0]!, { waitMs: 200 }), t, 200)
    t = performance.now()
    // waitMs longer than commandTimeoutMs: still at once (redis-down.test.ts has the 10 s waits).
    const { error } = await settle(locker.acquire(names[1]!, { waitMs: 700 }))
    expect(performance.now() - t).toBeLessThan(SLACK_MS)
    // It says why, with the client's own connection error as the cause.
    expect(error).toBeInstanceOf(LockUnavailableError)
    expect((error as Error).message).toMatch(/the connection to Redis is down \(connect ECONNREFUSED/)
    expect((error as Error).cause).toMatchObject({ code: 'ECONNREFUSED' })
    // Nothing was tried (so no `error` event); the call's outcome is one `unavailable`.
    expect(l.of('unavailable', names[1])).toHaveLength(1)
    // With the connection known to be down, a try without a wait fails at once.
    t = performance.now()
    await expectUnavailableWithin(locker.tryAcquire(names[2]!), t, 20)
    t = performance.now()
    await expectUnavailableWithin(locker.acquire(names[3]!, { waitMs: 0 }), t, 20)
    expect(l.of('timeout')).toEqual([])

    // Control: a bare SET NX PX sent while Redis is down is queued by ioredis and lands later.
    const control = unique('killed-control')
    client.set(keyOf(control), 'late', 'PX', 60_000, 'NX').catch(() => {})

    await server.restart()
    await waitUntil(async () => (await admin.exists(keyOf(control))) === 1, {
      timeoutMs: 3_000,
      what: 'the queued SET to land',
    })
    await sleep(100)
    // No acquire was queued behind it: not one of them reached the server (no token counter, no lock).
    expect(await admin.exists(...names.map((n) => resourceKeys('fencelock:', n).fence))).toBe(0)
    expect(await admin.exists(...names.map(keyOf))).toBe(0)
    const lock = await locker.acquire(names[0]!, { waitMs: 1_000 })
    expect(await lock.release()).toBe(true)
  })

  it('a try in flight when the connection closes fails at once (not at commandTimeoutMs), and what ioredis sends again later is cleaned up', async () => {
    const { server, client, admin } = await setUp()
    const locker = makeLocker(client, { commandTimeoutMs: 5_000 })
    await (await locker.acquire(unique('warm'))).release()
    const r = unique('in-flight-close')
    // Writes held for 600 ms: the try is sent and waits on the server.
    await admin.client('PAUSE', 600, 'WRITE')
    const pending = settle(locker.tryAcquire(r))
    await sleep(50)
    const t = performance.now()
    await admin.call('CLIENT', 'KILL', 'TYPE', 'normal', 'SKIPME', 'yes')
    const { error } = await pending
    expect(error).toBeInstanceOf(LockUnavailableError)
    expect(performance.now() - t).toBeLessThan(SLACK_MS)
    // ioredis sent it again on the new connection; it ran when the pause ended and was given back.
    await waitUntil(async () => (await admin.exists(resourceKeys('fencelock:', r).fence)) === 1, {
      timeoutMs: 3_000,
      what: 'the resent try to run',
    })
    await waitUntil(async () => (await admin.exists(keyOf(r))) === 0, {
      timeoutMs: 3_000,
      what: 'its grant to be given back',
    })
    void server
  })
})

describe('a healthy Redis that is 20 ms away (latency proxy)', () => {
  // Found by this suite (see the report): each attempt's deadline is cut to the caller's
  // remaining wait, max(1 ms, deadline - now). When that is shorter than the round trip, a Redis
  // that answers every call is reported as "did not answer" (LockUnavailableError), and the
  // clean-up deletes the lock the attempt may just have been granted.
  const ONE_WAY_MS = 20

  async function farAway() {
    const { server, admin } = await setUp()
    const proxy = await startLatencyProxy({ port: server.port }, ONE_WAY_MS)
    const far = connect({ port: proxy.port })
    await ready(far, `proxy ${proxy.port} -> ${server.url}`)
    return { server, admin, far }
  }

  it('acquire of a free lock with a wait shorter than the round trip grants it (as waitMs 0 does), never LockUnavailableError', async () => {
    const { far } = await farAway()
    const locker = makeLocker(far) // commandTimeoutMs 2 000: Redis answers well within it
    const control = await locker.acquire(unique('far-0'), { waitMs: 0 })
    expect(control.isHeld()).toBe(true)
    await control.release()
    const { value, error } = await settle(locker.acquire(unique('far-5'), { waitMs: 5 }))
    expect(error).toBeUndefined()
    await value?.release()
  })

  it('on a fresh Locker too: its first acquire with waitMs 5 is granted (the round trip is not cut by the wait)', async () => {
    // Issue 13, defect 3: a Locker that has not yet measured its Redis cut the first attempt to
    // the caller's 5 ms and reported the 40 ms round trip as "did not answer within 5 ms".
    const { far } = await farAway()
    const { value, error } = await settle(makeLocker(far).acquire(unique('far-fresh'), { waitMs: 5 }))
    expect(error).toBeUndefined()
    expect(value?.isHeld()).toBe(true)
    await value?.release()
    // Control: waitMs 0 on another fresh Locker, the case that always worked.
    const control = await makeLocker(far).acquire(unique('far-fresh-0'), { waitMs: 0 })
    await control.release()
  })

  it('a grant whose lease ran out on the way back (30 ms lease, 40 ms round trip) is given back, never returned as held; the bare script hands one out', async () => {
    const { admin, far } = await farAway()
    const locker = makeLocker(far)
    await (await locker.acquire(unique('far-warm'))).release()
    const r = unique('far-expired')
    const { error } = await settle(locker.tryAcquire(r, { ttlMs: 30 }))
    expect(error).toBeInstanceOf(LockUnavailableError)
    expect((error as Error).message).toContain('lease of 30 ms had run out')
    // Control: the bare script reports a grant of a lease that, counted from the send as a holder
    // must count it, had run out when the reply came; the key is gone moments later.
    const keys = resourceKeys('fencelock:', unique('far-expired-bare'))
    const sent = performance.now()
    const reply = await acquireOnce(far, keys, {
      ownerId: newOwnerId(),
      ttlMs: 30,
      fenceTtlMs: 60_000,
      lockerId: 'bare',
    })
    expect(reply.granted).toBe(true)
    expect(performance.now() - sent).toBeGreaterThanOrEqual(30)
    await waitUntil(async () => (await admin.exists(keys.lock)) === 0, {
      timeoutMs: 1_000,
      what: 'the bare grant to expire',
    })
  })

  it('a waiter woken by a release just before its deadline gets the lock or LockTimeoutError, never LockUnavailableError', async () => {
    const { server, far } = await farAway()
    const holderLocker = makeLocker(connect({ port: server.port })) // next to Redis
    const l = eventLog()
    const waiters = makeLocker(far, { pollMs: 5_000, onEvent: l.onEvent })
    const resource = unique('far-edge')
    const holder = await holderLocker.acquire(resource, { ttlMs: 10_000 })
    const waitMs = 400
    const start = performance.now()
    const waiting = settle(waiters.acquire(resource, { waitMs }))
    // The release message reaches the waiter ONE_WAY_MS later, inside its last round trip.
    await sleep(waitMs - 2 * ONE_WAY_MS - (performance.now() - start))
    await holder.release()
    const { value, error } = await waiting
    await value?.release()
    expect(error === undefined || error instanceof LockTimeoutError ? 'lock or timeout' : error).toBe('lock or timeout')
    expect(l.of('error')).toEqual([])
  })
})

describe('a restart while a waiter is blocked', () => {
  it('the waiter gets the lock (its holder lost with the data) soon after Redis is back, not at the next safety poll', async () => {
    const { server, client } = await setUp()
    const holderLocker = makeLocker(connect({ port: server.port }, { maxRetriesPerRequest: null }))
    const waiters = makeLocker(client, { pollMs: 5_000, commandTimeoutMs: 200 })
    const resource = unique('restart-wait')
    await holderLocker.acquire(resource, { ttlMs: 10_000 })
    const waiting = waiters.acquire(resource, { waitMs: 4_000 })
    await sleep(100)
    await server.restart()
    const backAt = performance.now()
    const lock = await waiting
    // The reconnect (or the error back-off) makes it try again; the poll alone would take >= 4 s.
    expect(performance.now() - backAt).toBeLessThan(1_500)
    expect(await lock.release()).toBe(true)
  })
})

describe('a restart under a held lock', () => {
  it('the watchdog finds the key gone and fires lost (signal aborted) within about one TTL', async () => {
    const { server, client } = await setUp()
    const l = eventLog()
    const locker = makeLocker(client, { commandTimeoutMs: 100, onEvent: l.onEvent })
    const ttlMs = 300
    const lock = await locker.acquire(unique('restart-held'), { ttlMs, autoExtend: true })
    const lost = l.next('lost', { resource: lock.resource, timeoutMs: 3_000 })
    await server.restart()
    const backAt = performance.now()
    const event = await lost
    // Either a renewal reaches the empty server ("not-owner") or the validity runs out first.
    expect(['not-owner', 'expired']).toContain(event.reason)
    expect(event.at - backAt).toBeLessThan(ttlMs + SLACK_MS)
    expect(lock.signal.reason).toBeInstanceOf(LockLostError)
    expect(await lock.release()).toBe(false)
  })
})

describe('a stopped (SIGSTOP) Redis', () => {
  it('fails acquire with LockUnavailableError within waitMs, and after SIGCONT no lock is left in our name', async () => {
    const { server, client, admin } = await setUp()
    const locker = makeLocker(client, { commandTimeoutMs: 120 })
    await (await locker.acquire(unique('warm'))).release()
    const [a, b, control] = [unique('stopped-a'), unique('stopped-b'), unique('stopped-control')]

    server.pause()
    try {
      let t = performance.now()
      await expectUnavailableWithin(locker.acquire(a, { waitMs: 250 }), t, 250)
      t = performance.now()
      await expectUnavailableWithin(locker.acquire(b, { waitMs: 500 }), t, 500) // several attempts
      // Control: the same acquire without its clean-up, given up on locally after 100 ms.
      const bare = acquireOnce(client, resourceKeys('fencelock:', control), {
        ownerId: newOwnerId(),
        ttlMs: 60_000,
        fenceTtlMs: 86_400_000,
        lockerId: 'bare',
      })
      expect(await Promise.race([bare.then(() => 'answered'), sleep(100).then(() => 'gave up')])).toBe('gave up')
    } finally {
      server.resume()
    }
    await waitUntil(async () => (await admin.exists(keyOf(control))) === 1, {
      timeoutMs: 2_000,
      what: 'the bare acquire to land',
    })
    // Our late acquires did land (their token counters exist), and the compare-and-delete behind
    // each attempt removed the lock it set: within seconds, where the control's lease is a minute.
    // (A delete need not go out before the control did: a clean-clone CI run at load ~20 found a
    // key of ours 50 ms after the control landed, where a fixed pause was all the test waited.)
    expect(await admin.exists(resourceKeys('fencelock:', a).fence, resourceKeys('fencelock:', b).fence)).toBe(2)
    await waitUntil(async () => (await admin.exists(keyOf(a), keyOf(b))) === 0, {
      timeoutMs: 5_000,
      what: 'our late grants to be deleted',
    })
    expect(await admin.pttl(keyOf(control))).toBeGreaterThan(50_000) // without it: held ~60 s by nobody
  })

  it('a held lock whose renewals stall is lost ("expired") within its TTL, with the signal aborted, and nothing thrown', async () => {
    const { server, client } = await setUp()
    const l = eventLog()
    const locker = makeLocker(client, { commandTimeoutMs: 100, onEvent: l.onEvent })
    const ttlMs = 300
    const lock: Lock = await locker.acquire(unique('stall'), { ttlMs, autoExtend: true })
    await sleep(50)
    const unhandled: unknown[] = []
    const onUnhandled = (reason: unknown) => unhandled.push(reason)
    process.on('unhandledRejection', onUnhandled)
    const lost = l.next('lost', { resource: lock.resource, timeoutMs: 3_000 })
    server.pause()
    const pausedAt = performance.now()
    try {
      const event = await lost
      // Local validity runs from the last renewal's send time, which is before the pause.
      expect(event.at - pausedAt).toBeLessThanOrEqual(ttlMs + SLACK_MS)
      expect(event).toMatchObject({ reason: 'expired', token: lock.token })
      expect(lock.signal.aborted).toBe(true)
      expect(lock.signal.reason).toBeInstanceOf(LockLostError)
      expect(lock.signal.reason).toMatchObject({ reason: 'expired' })
      expect(lock.isHeld()).toBe(false)
      expect(l.of('error', lock.resource).some((e) => e.operation === 'renew')).toBe(true)
    } finally {
      server.resume()
      process.off('unhandledRejection', onUnhandled)
    }
    // Depending on timing Redis expired the key, or a renewal queued before the pause landed
    // after SIGCONT and stretched it once more: either way release() cleans up what is ours.
    await expect(lock.release()).resolves.toBeTypeOf('boolean')
    expect(await client.exists(keyOf(lock.resource))).toBe(0)
    expect(unhandled).toEqual([])
  })
})

describe('a Redis that stalls (CLIENT PAUSE ALL) while lockers wait', () => {
  it('a release that times out while others are queued still hands the lock on once Redis answers (not after the whole TTL)', async () => {
    // Issue 13, defect 2: the hand-off step was chained only on a reply that came in time, so a
    // marked key ('<owner>+') stayed until its TTL ran out (11.7 s of a 12 s TTL in the report).
    const { server, admin } = await setUp()
    const holderLocker = makeLocker(connect({ port: server.port }), { commandTimeoutMs: 500 })
    const waiterLocker = makeLocker(connect({ port: server.port }), { pollMs: 5_000 })
    const resource = unique('late-release')
    const keys = resourceKeys('fencelock:', resource)
    const holder = await holderLocker.acquire(resource, { ttlMs: 12_000 })
    const waiting = settle(waiterLocker.acquire(resource, { waitMs: 6_000 }))
    await waitUntil(async () => (await admin.zcard(keys.queue)) === 1, { what: 'the waiter to queue' })
    await stallServer(admin, 1_500)
    const releasedAt = performance.now()
    const release = await settle(holder.release())
    expect(release.error).toBeInstanceOf(LockUnavailableError) // 500 ms into the 1.5 s stall
    const { value, error } = await waiting
    expect(error).toBeUndefined()
    // The stall ends 1.5 s after it began; the hand-off follows the late reply.
    expect(performance.now() - releasedAt).toBeLessThan(3_000)
    expect(value!.token).toBeGreaterThan(holder.token)
    expect(await value!.release()).toBe(true)
  })

  it('an abort while an attempt is in flight rejects at once, not when Redis answers; the late grant is given back', async () => {
    // Issue 13, defect 5: with a 1.5 s stall, LockAbortedError came 1.46 s after abort().
    const { server, admin } = await setUp()
    const holderLocker = makeLocker(connect({ port: server.port }))
    const waiters = makeLocker(connect({ port: server.port }), { pollMs: 10 })
    const resource = unique('abort-stalled')
    const holder = await holderLocker.acquire(resource, { ttlMs: 10_000 })
    const queued = new AbortController()
    const waiting = settle(waiters.acquire(resource, { waitMs: 5_000, signal: queued.signal }))
    await sleep(100) // queued, and trying every ~10 ms
    await stallServer(admin, 1_500)
    await sleep(200) // a try is in flight, blocked
    const abortedAt = performance.now()
    queued.abort()
    expect((await waiting).error).toBeInstanceOf(LockAbortedError)
    expect(performance.now() - abortedAt).toBeLessThan(200)

    // The first attempt of an acquire, in flight when its signal aborts.
    await sleep(1_500)
    await holder.release()
    await stallServer(admin, 1_000)
    const first = new AbortController()
    const firstWaiting = settle(waiters.acquire(resource, { waitMs: 5_000, signal: first.signal }))
    await sleep(200)
    const firstAbortedAt = performance.now()
    first.abort()
    expect((await firstWaiting).error).toBeInstanceOf(LockAbortedError)
    expect(performance.now() - firstAbortedAt).toBeLessThan(200)
    // Once Redis answers, the grant nobody wants any more is released, not left for its TTL.
    await waitUntil(
      async () =>
        (await admin.exists(keyOf(resource))) === 0 &&
        (await admin.exists(resourceKeys('fencelock:', resource).fence)) === 1,
      {
        timeoutMs: 3_000,
        what: 'the abandoned grant to be given back',
      },
    )
  })
})

describe('SCRIPT FLUSH', () => {
  it('after SCRIPT FLUSH, the next acquire, extend and release each work (NOSCRIPT handled)', async () => {
    const { client, admin } = await setUp()
    const locker = makeLocker(client)
    const evals = async () => (await commandCalls(admin)).eval ?? 0

    await admin.script('FLUSH')
    let before = await evals()
    const lock = await locker.acquire(unique('noscript'), { ttlMs: 1_000 })
    expect(await evals()).toBe(before + 1)

    await admin.script('FLUSH')
    before = await evals()
    await lock.extend(5_000)
    expect(await evals()).toBe(before + 1)
    expect(await admin.pttl(keyOf(lock.resource))).toBeGreaterThan(4_000)

    await admin.script('FLUSH')
    before = await evals()
    expect(await lock.release()).toBe(true)
    expect(await evals()).toBe(before + 1)
    expect(await admin.exists(keyOf(lock.resource))).toBe(0)
  })

  it('SCRIPT FLUSH in a loop while contenders run changes nothing: all acquires succeed, no overlap, no error events', async () => {
    const { server, admin } = await setUp()
    const l = eventLog()
    const lockers = Array.from({ length: 3 }, () => makeLocker(connect({ port: server.port }), { onEvent: l.onEvent }))
    const resource = unique('flush-loop')
    let flushing = true
    let flushes = 0
    const flusher = (async () => {
      while (flushing) {
        await admin.script('FLUSH')
        flushes++
        await sleep(3)
      }
    })()
    const evalsBefore = (await commandCalls(admin)).eval ?? 0
    let inside = 0
    let overlaps = 0
    let grants = 0
    await Promise.all(
      Array.from({ length: 30 }, async (_, i) => {
        for (let round = 0; round < 3; round++) {
          const lock = await lockers[i % 3]!.acquire(resource, { ttlMs: 5_000, waitMs: 15_000 })
          grants++
          if (++inside > 1) overlaps++
          await lock.extend()
          await sleep(1)
          inside--
          expect(await lock.release()).toBe(true)
        }
      }),
    )
    flushing = false
    await flusher
    expect(grants).toBe(90)
    expect(overlaps).toBe(0)
    expect(l.of('error')).toEqual([])
    expect(l.of('lost')).toEqual([])
    // The flushes did hit: scripts had to be reloaded by EVAL many times.
    expect(flushes).toBeGreaterThan(10)
    expect(((await commandCalls(admin)).eval ?? 0) - evalsBefore).toBeGreaterThan(5)
  })
})

describe('tokens survive data loss', () => {
  it('after FLUSHALL the next token is above every earlier one (a stale holder would be fenced off)', async () => {
    const { client, admin } = await setUp()
    const locker = makeLocker(client)
    const other = makeLocker(connect({ port: admin.options.port! }))
    const resource = unique('flushall')
    let max = 0n
    for (let i = 0; i < 50; i++) {
      const lock = await locker.acquire(resource, { waitMs: 0 })
      if (lock.token > max) max = lock.token
      await lock.release()
    }
    const stale = await locker.acquire(resource, { ttlMs: 10_000 })
    await admin.flushall()
    expect(await admin.get(resourceKeys('fencelock:', resource).fence)).toBeNull() // the counter is gone
    // The lock is gone too, so a second holder gets in while the first still believes it holds:
    // only the token order protects the data now.
    expect(stale.isHeld()).toBe(true)
    const next = await other.acquire(resource, { waitMs: 0 })
    expect(next.token).toBeGreaterThan(stale.token)
    expect(next.token).toBeGreaterThan(max)
    await next.release()
    await stale.release()
  })

  it('after a restart of redis-server without persistence the next token is above every earlier one', async () => {
    const { server, client, admin } = await setUp()
    const locker = makeLocker(client)
    const resource = unique('restart')
    const tokens: bigint[] = []
    for (let i = 0; i < 50; i++) {
      const lock = await locker.acquire(resource, { waitMs: 0 })
      tokens.push(lock.token)
      await lock.release()
    }
    await server.restart()
    await ready(admin, server.url)
    expect(await admin.dbsize()).toBe(0) // control: nothing survived, the counter included
    await ready(client, server.url)
    const after = await locker.acquire(resource, { waitMs: 2_000 })
    for (const token of tokens) expect(after.token).toBeGreaterThan(token)
    await after.release()
  })
})
