/**
 * A command in flight when the primary dies is sent again to the new primary: ioredis resends it
 * after its reconnection, node-redis's Sentinel client retries it on the master it finds. A
 * failover to a replica that missed the latest grants hands the new primary an older token
 * counter, so INCR alone would then mint a token already handed out (equal tokens are the same
 * holder to the fence: two holders would both write). The acquire in flight must not come back
 * with such a token. Real processes: a spawned Sentinel set, the replicas cut off and frozen, the
 * primary frozen (SIGSTOP) with the acquire on its socket, then killed (SIGKILL). And a connection
 * to the same primary that drops (no failover: node-redis's Sentinel client then reports only its
 * master client's error) counts as a reconnection too.
 */
import { startSentinelSet, type SentinelSet } from '@fencelock/devkit/redis-topology'
import { Redis } from 'ioredis'
import { afterAll, describe, expect, it } from 'vitest'
import {
  LockError,
  LockUnavailableError,
  resourceKeys,
  type LockEvent,
  type SupportedRedisClient,
} from '../../src/index.js'
import {
  nodeRedisSentinel,
  SENTINEL_CLIENT_LIBRARIES,
  sentinelClientOf,
  sentinelClientReady,
} from '../support/clients.js'
import { connect, makeLocker, unique } from '../support/connections.js'
import { settle, waitUntil } from '../support/timing.js'

const keysOf = (resource: string) => resourceKeys('fencelock:', resource)
const sets: SentinelSet[] = []
afterAll(async () => {
  await Promise.all(sets.map((s) => s.dispose()))
})

/** INCR of `key` through the Sentinel client itself, behind the Locker's back (the control). */
function incrThrough(client: SupportedRedisClient, key: string): Promise<unknown> {
  if (client instanceof Redis) return client.incr(key)
  return (client as { sendCommand(readonly: boolean, args: string[]): Promise<unknown> }).sendCommand(false, [
    'INCR',
    key,
  ])
}

describe.each(SENTINEL_CLIENT_LIBRARIES)('a failover with an acquire in flight, through %s', (library) => {
  it('the acquire sent again to the new primary (its counter behind) never returns a token already handed out; control: an INCR sent the same way returns one', async () => {
    const set = await startSentinelSet()
    sets.push(set)
    const client = sentinelClientOf(library, set)
    const events: LockEvent[] = []
    // Long deadlines: the acquire must outlive the failover (Sentinel's down-after is 1 s).
    const locker = makeLocker(client, { commandTimeoutMs: 20_000, onEvent: (e) => events.push(e) })
    const r = unique('sentinel-inflight')
    const old = await set.primary()
    const admin = connect({ port: old.port })
    const tokens: bigint[] = []
    const grant = async () => {
      const lock = await locker.acquire(r, { waitMs: 5_000 })
      tokens.push(lock.token)
      await lock.release()
    }
    for (let i = 0; i < 3; i++) await grant()
    // Both replicas have the counter as it stands (S + 2, S seeded from the clock).
    expect(await admin.call('WAIT', 2, 5_000)).toBe(2)
    for (const replica of set.servers.slice(1)) replica.pause()
    await admin.call('CLIENT', 'KILL', 'TYPE', 'replica')
    // Grants the replicas never see: S + 3 .. S + 5, minted by INCR on a settled connection.
    for (let i = 0; i < 3; i++) await grant()
    const seenByReplicas = tokens[2]!
    expect(tokens[3]).toBe(seenByReplicas + 1n)
    const highest = tokens[5]!

    old.pause()
    // Both go out to the frozen primary (or, written too late, straight to the new one: the
    // outcome is the same), and node-redis / ioredis send them again after the failover.
    const control = incrThrough(client, keysOf(r).fence)
    const inFlight = settle(locker.acquire(r, { waitMs: 30_000 }))
    await old.stop()
    for (const replica of set.servers.slice(1)) replica.resume()
    await set.failedOver(old)

    // Control: the INCR, sent again to the new primary, returns a token already handed out.
    expect(BigInt(String(await control))).toBe(seenByReplicas + 1n)
    expect(seenByReplicas + 1n).toBeLessThanOrEqual(highest)

    const { value: lock, error } = await inFlight
    if (lock !== undefined) {
      expect(lock.token).toBeGreaterThan(highest)
      await lock.release()
    } else expect(error).toBeInstanceOf(LockError)
    // Whatever the in-flight acquire did, the next grant is above every token handed out.
    await waitUntil(() => sentinelClientReady(client), { timeoutMs: 15_000, what: 'the client on the new primary' })
    const next = await locker.acquire(r, { waitMs: 15_000 })
    expect(next.token).toBeGreaterThan(highest)
    if (lock !== undefined) expect(next.token).toBeGreaterThan(lock.token)
    await next.release()
    expect(events.filter((e) => e.type === 'token-regressed')).toEqual([])
  }, 90_000)

  it('a connection to the same primary dropped (CLIENT KILL, no failover), the counter set back: the next grant mints above every token handed out before', async () => {
    const set = await startSentinelSet()
    sets.push(set)
    const client = sentinelClientOf(library, set)
    const locker = makeLocker(client)
    const r = unique('sentinel-kill')
    const admin = connect({ port: (await set.primary()).port })
    const tokens: bigint[] = []
    for (let i = 0; i < 5; i++) {
      const lock = await locker.acquire(r, { waitMs: 5_000 })
      tokens.push(lock.token)
      await lock.release()
    }
    // The counter as a replica that saw only the first 2 grants holds it.
    await admin.set(keysOf(r).fence, String(tokens[1]), 'KEEPTTL')
    await admin.call('CLIENT', 'KILL', 'TYPE', 'normal', 'SKIPME', 'yes')
    const after = await locker.acquire(r, { waitMs: 10_000 })
    expect(after.token).toBeGreaterThan(tokens[4]!)
    await after.release()
  })
})

describe('node-redis Sentinel: a master name the Sentinels do not know', () => {
  it('an acquire fails with LockUnavailableError at commandTimeoutMs (node-redis keeps rediscovering; ioredis fails within the wait: ha-bad-input.test.ts)', async () => {
    const set = await startSentinelSet()
    sets.push(set)
    const sentinel = nodeRedisSentinel({ name: 'no-such-master', sentinelAddresses: set.sentinelAddresses })
    const locker = makeLocker(sentinel, { commandTimeoutMs: 1_500 })
    const { error, ms } = await settle(locker.acquire(unique('no-master'), { waitMs: 500 }))
    expect(error).toBeInstanceOf(LockUnavailableError)
    expect(ms).toBeLessThan(1_500 + 5_000) // its deadline, and a loaded machine's delays
  })
})
