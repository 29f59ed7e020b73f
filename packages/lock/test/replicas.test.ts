/**
 * One Redis with replicas (Sentinel; a Cluster shard): replication is asynchronous, so a failover
 * can lose a grant and its token counter. The `replicas` option makes a grant (and a renewal)
 * count only once that many replicas acknowledged it (`WAIT`). Shown on spawned Sentinel sets and
 * a Cluster, with the replicas frozen (SIGSTOP) and the primary killed.
 */
import { startCluster, startSentinelSet, type SentinelSet } from '@fencelock/devkit/redis-topology'
import { Cluster } from 'ioredis'
import { afterAll, describe, expect, it } from 'vitest'
import { InvalidLockOptionError, LockReplicationError, resourceKeys, type LockEvent } from '../src/index.js'
import { SENTINEL_CLIENT_LIBRARIES, sentinelClientOf, sentinelClientReady } from './support/clients.js'
import { connect, makeLocker, unique } from './support/connections.js'
import { settle, waitUntil } from './support/timing.js'

const keysOf = (resource: string) => resourceKeys('fencelock:', resource)
const sets: { dispose(): Promise<void> }[] = []
afterAll(async () => {
  await Promise.all(sets.map((s) => s.dispose()))
})

async function sentinelSet(): Promise<SentinelSet> {
  const set = await startSentinelSet()
  sets.push(set)
  return set
}

describe('the replicas option', () => {
  it('is refused before any I/O where it means nothing (quorum mode) or is out of range', () => {
    const a = connect({ port: 1 }, { lazyConnect: true })
    const b = connect({ port: 2 }, { lazyConnect: true })
    const c = connect({ port: 3 }, { lazyConnect: true })
    expect(() => makeLocker([a, b, c], { replicas: 1 })).toThrow(InvalidLockOptionError)
    for (const replicas of [-1, 17, 1.5, '1'])
      expect(() => makeLocker(a, { replicas: replicas as number })).toThrow(InvalidLockOptionError)
    expect(() => makeLocker(a, { replicasTimeoutMs: 0 })).toThrow(InvalidLockOptionError)
  })

  it('on a Cluster: replicas 1 waits on the shard that owns the resource, for resources on every shard', async () => {
    const set = await startCluster()
    sets.push(set)
    const client = new Cluster([...set.nodes])
    client.on('error', () => {})
    const locker = makeLocker(client, { replicas: 1 })
    const shards = new Set<number>()
    for (let i = 0; i < 20; i++) {
      const r = unique('repl-cluster')
      const lock = await locker.acquire(r)
      shards.add((await set.primaryOf(await set.keySlot(keysOf(r).lock))).port)
      await lock.release()
    }
    expect(shards.size).toBe(3)
    client.disconnect()
  })
})

describe.each(SENTINEL_CLIENT_LIBRARIES)('the replicas option on Sentinel, through %s', (library) => {
  const sentinelClient = (set: SentinelSet) => sentinelClientOf(library, set)

  it('replicas: 1 on Sentinel: when acquire returns, a replica holds the lock and its token counter; a renewal is acknowledged too', async () => {
    const set = await sentinelSet()
    const locker = makeLocker(sentinelClient(set), { replicas: 1, ttlMs: 5_000 })
    const r = unique('repl-ok')
    const lock = await locker.acquire(r)
    const replicas = set.servers.slice(1).map((s) => connect({ port: s.port }))
    const copies = await Promise.all(
      replicas.map(async (c) => ({ lock: await c.get(keysOf(r).lock), fence: await c.get(keysOf(r).fence) })),
    )
    expect(copies.some((copy) => copy.lock !== null && copy.fence === lock.token.toString())).toBe(true)
    await lock.extend(8_000)
    expect(await lock.release()).toBe(true)
  })

  it('with both replicas frozen (SIGSTOP): no grant is returned — LockReplicationError within waitMs, nothing left held; control: replicas 0 grants at once', async () => {
    const set = await sentinelSet()
    const primary = await set.primary()
    const admin = connect({ port: primary.port })
    const safe = makeLocker(sentinelClient(set), { replicas: 1, replicasTimeoutMs: 200 })
    const plain = makeLocker(sentinelClient(set))
    await (await safe.acquire(unique('repl-warm'))).release()
    for (const replica of set.servers.slice(1)) replica.pause()
    try {
      const r = unique('repl-frozen')
      const { error, ms } = await settle(safe.acquire(r, { waitMs: 1_000 }))
      expect(error).toBeInstanceOf(LockReplicationError)
      expect(error).toMatchObject({ replicas: 1, acknowledged: 0, operation: 'acquire' })
      expect(ms).toBeLessThan(1_000 + 500)
      // The grant the replicas never acknowledged is given back: a compare-and-delete sent behind
      // the refusal, not awaited by it (node-redis's Sentinel client sends it a few turns later).
      await waitUntil(async () => (await admin.exists(keysOf(r).lock)) === 0, {
        timeoutMs: 3_000,
        what: 'the unreplicated grant to be given back',
      })
      const control = await plain.acquire(unique('repl-frozen-control'), { waitMs: 0 })
      expect(await control.release()).toBe(true)
    } finally {
      for (const replica of set.servers.slice(1)) replica.resume()
    }
  })

  it.each([0, 1])(
    'a failover after a grant the replicas never saw (counter set ahead, replicas frozen, primary killed) — replicas %i',
    async (replicas) => {
      const set = await sentinelSet()
      const events: LockEvent[] = []
      const client = sentinelClient(set)
      const locker = makeLocker(client, {
        replicas,
        replicasTimeoutMs: 200,
        onEvent: (e) => events.push(e),
      })
      const r = unique('repl-failover')
      const first = await locker.acquire(r)
      await first.release()
      const old = await set.primary()
      const admin = connect({ port: old.port })
      for (const replica of set.servers.slice(1)) replica.pause()
      // Frozen replicas still take in what reaches their sockets: cut the links too, so nothing
      // written from now on is replicated.
      await admin.call('CLIENT', 'KILL', 'TYPE', 'replica')
      // The old primary's counter far ahead of any clock (as after grants the replicas never saw).
      await admin.set(keysOf(r).fence, (10n ** 17n).toString())
      const { value: ahead, error } = await settle(locker.acquire(r, { waitMs: 600 }))
      await ahead?.release().catch(() => {})
      await old.stop()
      for (const replica of set.servers.slice(1)) replica.resume()
      await set.failedOver(old)
      // Until the client has reconnected (to the new primary), an acquire fails at once with the
      // connection down, as it does with Redis down; then it is granted.
      await waitUntil(() => sentinelClientReady(client), { timeoutMs: 15_000, what: 'the client to reconnect' })
      const after = await locker.acquire(r, { waitMs: 15_000 })
      await after.release()
      if (replicas === 0) {
        // The hole: a token was handed out that the new primary never knew; the next goes back.
        expect(ahead!.token).toBeGreaterThan(10n ** 17n)
        expect(after.token).toBeLessThan(ahead!.token)
        expect(events).toContainEqual(
          expect.objectContaining({ type: 'token-regressed', resource: r, token: after.token, previous: ahead!.token }),
        )
      } else {
        // No grant was returned while the replicas were frozen; every token returned increases.
        expect(error).toBeInstanceOf(LockReplicationError)
        expect(after.token).toBeGreaterThan(first.token)
        expect(events.filter((e) => e.type === 'token-regressed')).toEqual([])
      }
    },
    60_000,
  )
})
