/**
 * The single-node backend on its own, through the LockBackend interface, against a redis-server
 * of this file's own: what each round trip comes to, what it leaves in Redis, what it tells its
 * listener, and how late replies are cleaned up. No Locker, no wait queue.
 */
import type { Redis } from 'ioredis'
import { describe, expect, it } from 'vitest'
import type { AcquireOutcome, AcquireRequest, BackendListener } from '../src/backend/backend.js'
import { Deadlines } from '../src/deadline.js'
import { releaseMessage } from '../src/fair-queue/formats.js'
import { InvalidLockOptionError, LOCK_DEFAULTS } from '../src/index.js'
import { RedisBackend, type RedisBackendOptions } from '../src/backend/redis-backend.js'
import { IoredisConnection } from '../src/client/ioredis-client.js'
import { commandCalls, connect, ready, stallServer, unique } from './support/connections.js'
import { startLatencyProxy } from './support/latency-proxy.js'
import { useScriptedServer } from './support/scripted-server.js'
import { settle, sleep, waitUntil } from './support/timing.js'

const OPTIONS: RedisBackendOptions = {
  prefix: 'fencelock:',
  commandTimeoutMs: 1_000,
  fenceTtlMs: LOCK_DEFAULTS.fenceTtlMs,
  handoffMs: 500,
  queueLeaseMs: 5_000,
}

const env = useScriptedServer()

interface Heard {
  released: { resource: string; handedTo: string | undefined; handoffMs: number }[]
  reconnects: number
}

/** A backend on a new connection to this file's server, and what its listener heard. */
function backendOn(options: Partial<RedisBackendOptions> = {}, client: Redis = connect({ port: env.server.port })) {
  const heard: Heard = { released: [], reconnects: 0 }
  const listener: BackendListener = {
    released: (resource, handedTo, handoffMs) => heard.released.push({ resource, handedTo, handoffMs }),
    reconnected: () => heard.reconnects++,
  }
  return {
    backend: new RedisBackend(new IoredisConnection(client), { ...OPTIONS, ...options }, new Deadlines(), listener),
    heard,
    client,
  }
}

const request = (o: Partial<AcquireRequest> = {}): AcquireRequest => ({
  ttlMs: 5_000,
  sentAt: performance.now(),
  waitUntil: undefined,
  first: true,
  queue: 'none',
  ...o,
})

function granted(outcome: AcquireOutcome): Extract<AcquireOutcome, { granted: true }> {
  if (!outcome.granted) throw new Error(`expected a grant, got ${JSON.stringify(outcome)}`)
  return outcome
}

async function serverMs(): Promise<number> {
  const [s, us] = (await env.admin.time()) as unknown as [string, string]
  return Number(s) * 1000 + Math.floor(Number(us) / 1000)
}

describe('RedisBackend: the round trips', () => {
  it('resource(): checks the name before any I/O and caches it', () => {
    const { backend } = backendOn()
    expect(() => backend.resource('')).toThrow(InvalidLockOptionError)
    const r = backend.resource('order:1')
    expect(r).toEqual({ name: 'order:1', keys: expect.objectContaining({ lock: 'fencelock:{order:1}:lock' }) })
    expect(backend.resource('order:1')).toBe(r)
  })

  it('acquire: a grant carries its owner id, a bigint token and its validity from the send time; a miss the holder’s TTL', async () => {
    const { backend } = backendOn()
    const r = backend.resource(unique('grant'))
    const sentAt = performance.now()
    const g = granted(await backend.acquire(r, request({ sentAt })))
    expect(g).toMatchObject({ granted: true, token: expect.any(BigInt), validUntil: sentAt + 5_000, handedOver: false })
    expect(await env.admin.get(r.keys.lock)).toBe(g.ownerId)
    expect(await backend.acquire(r, request())).toEqual({ granted: false, holderTtlMs: expect.any(Number) })
    expect(await backend.extend(r, g.ownerId, 20_000, 1_000)).toBeGreaterThan(performance.now() + 19_000)
    expect(await env.admin.pttl(r.keys.lock)).toBeGreaterThan(19_000)
    expect(await backend.extend(r, 'not-the-owner', 20_000, 1_000)).toBeUndefined()
    expect(await backend.release(r, g.ownerId)).toEqual({ freed: true, handedTo: undefined })
    expect(await backend.release(r, g.ownerId)).toEqual({ freed: false })
  })

  it('a joining miss queues the locker and marks the holder; leave() takes it out once (a second leave sends nothing)', async () => {
    const holder = backendOn().backend
    const { backend } = backendOn()
    const r = backend.resource(unique('join'))
    const h = granted(await holder.acquire(r, request()))
    expect(await backend.acquire(r, request({ queue: 'join' }))).toMatchObject({ granted: false })
    expect(await env.admin.zrange(r.keys.queue, '0', '-1')).toEqual([backend.lockerId])
    expect(Number(await env.admin.hget(r.keys.leases, backend.lockerId))).toBeGreaterThan(await serverMs())
    expect(await env.admin.get(r.keys.lock)).toBe(`${h.ownerId}+`)
    backend.leave(r)
    await waitUntil(async () => (await env.admin.zcard(r.keys.queue)) === 0, { what: 'the leave' })
    const before = (await commandCalls(env.admin)).evalsha ?? 0
    backend.leave(r)
    await sleep(20)
    expect((await commandCalls(env.admin)).evalsha ?? 0).toBe(before)
  })

  it('release of a marked key hands the lock to the queued locker and tells other listeners, not itself', async () => {
    const h = backendOn()
    const w = backendOn()
    const r = h.backend.resource(unique('handoff'))
    await h.backend.subscribe(r)
    await w.backend.subscribe(r)
    const held = granted(await h.backend.acquire(r, request()))
    await w.backend.acquire(r, request({ queue: 'join' }))
    expect(await h.backend.release(r, held.ownerId)).toEqual({ freed: true, handedTo: w.backend.lockerId })
    expect(await env.admin.get(r.keys.lock)).toBe(`~${w.backend.lockerId}`)
    await waitUntil(() => w.heard.released.length === 1, { what: 'the message' })
    expect(w.heard.released).toEqual([{ resource: r.name, handedTo: w.backend.lockerId, handoffMs: 500 }])
    expect(h.heard.released).toEqual([]) // its own message
    // The handed lock is the queued locker's, even to a single try; it is out of the queue then.
    const taken = granted(await w.backend.acquire(r, request({ queue: 'none' })))
    expect(taken.handedOver).toBe(true)
    expect(await env.admin.exists(r.keys.queue)).toBe(0)
    expect(await w.backend.release(r, taken.ownerId)).toEqual({ freed: true, handedTo: undefined })
  })

  it('a release whose first step answers after its deadline still hands the lock on when it answers', async () => {
    const h = backendOn({ commandTimeoutMs: 200 })
    const w = backendOn()
    const r = h.backend.resource(unique('late-release'))
    const held = granted(await h.backend.acquire(r, request()))
    await w.backend.acquire(r, request({ queue: 'join' }))
    // A stall well past the 200 ms deadline, so the release lands in it on a loaded machine too (a
    // clean-clone run sent it after a 500 ms stall had ended, and it answered in time).
    await stallServer(env.admin, 2_000)
    expect((await settle(h.backend.release(r, held.ownerId))).error).toBeDefined()
    await waitUntil(async () => (await env.admin.get(r.keys.lock)) === `~${w.backend.lockerId}`, {
      timeoutMs: 6_000,
      what: 'the late hand-off',
    })
  })

  it('a grant that answers after its deadline is released again, and reported as a failure cut by the wait', async () => {
    const { backend } = backendOn()
    const r = backend.resource(unique('late-grant'))
    await backend.acquire(backend.resource(unique('warm')), request()) // measured: later tries are not "first"
    await stallServer(env.admin, 300)
    const sentAt = performance.now()
    const outcome = await backend.acquire(r, request({ sentAt, waitUntil: sentAt + 50, first: false }))
    expect(outcome).toMatchObject({ granted: false, cut: true })
    await sleep(400)
    expect(await env.admin.exists(r.keys.lock)).toBe(0)
    expect(await env.admin.exists(r.keys.fence)).toBe(1) // it did land, and was deleted behind it
  })

  it('the first try of an acquire gets its round trip, however short the wait; later tries end with the wait', async () => {
    const proxy = await startLatencyProxy({ port: env.server.port }, 20)
    const far = connect({ port: proxy.port })
    await ready(far, 'proxy')
    const { backend } = backendOn({}, far)
    const sentAt = performance.now()
    const first = await backend.acquire(backend.resource(unique('far')), request({ sentAt, waitUntil: sentAt + 5 }))
    expect(first.granted).toBe(true)
    const again = performance.now()
    expect(
      await backend.acquire(
        backend.resource(unique('far')),
        request({ sentAt: again, waitUntil: again + 5, first: false }),
      ),
    ).toMatchObject({ granted: false, cut: true })
  })

  it('close() leaves every queue the locker may be in, and closes the subscriber it opened', async () => {
    const holder = backendOn().backend
    const { backend } = backendOn()
    const [a, b] = [backend.resource(unique('close-a')), backend.resource(unique('close-b'))]
    for (const r of [a, b]) {
      granted(await holder.acquire(r, request()))
      await backend.subscribe(r)
      await backend.acquire(r, request({ queue: 'join' }))
    }
    expect(await env.admin.zcard(a.keys.queue)).toBe(1)
    await backend.close()
    expect([await env.admin.zcard(a.keys.queue), await env.admin.zcard(b.keys.queue)]).toEqual([0, 0])
    expect(((await env.admin.pubsub('NUMSUB', a.keys.channel)) as [string, number])[1]).toBe(0)
  })

  it('a subscriber follows its client out: when the client ends, the subscriber connection closes', async () => {
    const name = unique('follow').replace(':', '-')
    const client = connect({ port: env.server.port }, { connectionName: name })
    const { backend } = backendOn({}, client)
    await backend.subscribe(backend.resource(unique('follow')))
    const connections = async () =>
      ((await env.admin.client('LIST')) as string).split('\n').filter((l) => l.includes(` name=${name} `)).length
    expect(await connections()).toBe(2)
    await client.quit()
    await waitUntil(async () => (await connections()) === 0, { what: 'both connections to close' })
  })

  it('parses release messages of other lockers and ignores foreign ones on the channel', async () => {
    const { backend, heard } = backendOn()
    const r = backend.resource(unique('messages'))
    await backend.subscribe(r)
    await env.admin.publish(r.keys.channel, releaseMessage('someone'))
    await env.admin.publish(r.keys.channel, releaseMessage('someone', { lockerId: 'x', handoffMs: 700 }))
    await env.admin.publish(r.keys.channel, 'not a release message at all')
    await env.admin.publish(r.keys.channel, releaseMessage(backend.lockerId))
    await waitUntil(() => heard.released.length >= 2, { what: 'the messages' })
    await sleep(20)
    expect(heard.released).toEqual([
      { resource: r.name, handedTo: undefined, handoffMs: Number.NaN },
      { resource: r.name, handedTo: 'x', handoffMs: 700 },
    ])
    expect(heard.reconnects).toBe(1) // the subscriber's first 'ready'
    backend.unsubscribe(r)
    await waitUntil(async () => ((await env.admin.pubsub('NUMSUB', r.keys.channel)) as [string, number])[1] === 0, {
      what: 'the unsubscribe',
    })
  })
})
