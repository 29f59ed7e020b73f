/**
 * What the GLIDE cluster adapter (src/client/glide-cluster-client.ts) adds to the Cluster contract
 * (test/contract/cluster.test.ts runs it on GLIDE too): release messages on sharded and classic
 * pub/sub, `WAIT` on the primary of the key's slot, `NOSCRIPT` on a shard, a shard primary's
 * failover with an acquire in flight and with none, and every node down. Real spawned clusters (3 primaries, a replica
 * each), nodes frozen (SIGSTOP) and killed (SIGKILL); nothing mocked.
 */
import type { RedisServer } from '@fencelock/devkit/redis-server'
import { startCluster, type ClusterSet } from '@fencelock/devkit/redis-topology'
import type { GlideClusterClient } from '@valkey/valkey-glide'
import { Cluster } from 'ioredis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { LOCK_DEFAULTS, LockError, LockUnavailableError, resourceKeys, type LockEvent } from '../../src/index.js'
import type { AcquireRequest, BackendListener } from '../../src/backend/backend.js'
import { RedisBackend, type RedisBackendOptions } from '../../src/backend/redis-backend.js'
import { glideConfigurationOf } from '../../src/client/glide-client.js'
import { GlideClusterConnection } from '../../src/client/glide-cluster-client.js'
import type { ClientEvents } from '../../src/client/redis-client.js'
import { Deadlines } from '../../src/deadline.js'
import { glideClusterClient } from '../support/clients.js'
import { commandCalls, connect, makeLocker, unique } from '../support/connections.js'
import { settle, waitUntil } from '../support/timing.js'

/** The safety poll of the pub/sub cases: a wake well under it came by message. */
const POLL_MS = 20_000
const keysOf = (resource: string) => resourceKeys('fencelock:', resource)

const sets: ClusterSet[] = []
const admins: Cluster[] = []
afterAll(async () => {
  for (const a of admins) a.disconnect()
  await Promise.all(sets.map((s) => s.dispose()))
})

async function newCluster(): Promise<{ set: ClusterSet; admin: Cluster; glide: GlideClusterClient }> {
  const set = await startCluster()
  sets.push(set)
  const admin = new Cluster([...set.nodes])
  admin.on('error', () => {})
  admins.push(admin)
  return { set, admin, glide: await glideClusterClient(set.nodes) }
}

/** The replica of `primary` (ROLE on every other running node). */
async function replicaOf(set: ClusterSet, primary: RedisServer): Promise<RedisServer> {
  for (const s of set.servers) {
    if (s === primary || !s.running) continue
    const role = (await connect({ port: s.port }).call('ROLE')) as unknown[]
    if (role[0] === 'slave' && Number(role[2]) === primary.port) return s
  }
  throw new Error(`no replica of ${primary.port}`)
}

/** Subscribers of shard channel `channel` on `server` (PUBSUB SHARDNUMSUB). */
async function shardSubscribers(server: RedisServer, channel: string): Promise<number> {
  const reply = (await connect({ port: server.port }).call('PUBSUB', 'SHARDNUMSUB', channel)) as unknown[]
  return Number(reply[1])
}

/** Subscribers of classic channel `channel` over every running node (each counts its own). */
async function classicSubscribers(set: ClusterSet, channel: string): Promise<number> {
  let n = 0
  for (const s of set.servers) {
    if (!s.running) continue
    n += Number(((await connect({ port: s.port }).call('PUBSUB', 'NUMSUB', channel)) as unknown[])[1])
  }
  return n
}

describe('GLIDE cluster: pub/sub, WAIT and scripts by SHA', () => {
  let set: ClusterSet
  let admin: Cluster
  let glide: GlideClusterClient
  beforeAll(async () => {
    ;({ set, admin, glide } = await newCluster())
  }, 60_000)

  it.each(['sharded', 'classic'] as const)(
    'pubsub %s: a waiter on each shard is woken by the release message (pollMs 20 s); sharded: subscribed on the owner',
    async (pubsub) => {
      const byShard = new Map<number, string>()
      while (byShard.size < 3) {
        const r = unique(`glide-c-${pubsub}`)
        byShard.set((await set.primaryOf(await set.keySlot(keysOf(r).lock))).port, r)
      }
      const holder = makeLocker(glide, { pubsub })
      const waiter = makeLocker(glide, { pubsub, pollMs: POLL_MS })
      for (const [port, r] of byShard) {
        const lock = await holder.acquire(r, { ttlMs: 30_000 })
        const waiting = settle(() => waiter.acquire(r, { waitMs: 15_000 }))
        const owner = set.servers.find((s) => s.port === port)!
        await waitUntil(
          async () =>
            (pubsub === 'sharded'
              ? await shardSubscribers(owner, keysOf(r).channel)
              : await classicSubscribers(set, keysOf(r).channel)) === 1 && (await admin.zcard(keysOf(r).queue)) === 1,
          { timeoutMs: 10_000, what: 'the waiter to subscribe and queue' },
        )
        const t = performance.now()
        await lock.release()
        const { value, error } = await waiting
        expect(error).toBeUndefined()
        expect(performance.now() - t).toBeLessThan(POLL_MS / 4)
        expect(value!.token).toBeGreaterThan(lock.token)
        await value!.release()
      }
    },
    60_000,
  )

  it("replicas: 1 — WAIT goes to the primary of the key's slot, and the grant is returned once its replica has it", async () => {
    const r = unique('glide-c-wait')
    const locker = makeLocker(glide, { replicas: 1 })
    const lock = await locker.acquire(r)
    const primary = await set.primaryOf(await set.keySlot(keysOf(r).lock))
    const replica = await replicaOf(set, primary)
    const onReplica = connect({ port: replica.port })
    await onReplica.call('READONLY')
    expect(await onReplica.get(keysOf(r).fence)).toBe(String(lock.token))
    await lock.release()
  })

  it('after SCRIPT FLUSH on every node the next acquire is one EVALSHA then one EVAL on the shard', async () => {
    const locker = makeLocker(glide)
    const r = unique('glide-c-sha')
    await (await locker.acquire(r)).release()
    const primary = await set.primaryOf(await set.keySlot(keysOf(r).lock))
    const node = connect({ port: primary.port })
    for (const s of set.servers) await connect({ port: s.port }).script('FLUSH')
    const before = await commandCalls(node)
    const lock = await locker.acquire(r)
    const after = await commandCalls(node)
    expect((after.evalsha ?? 0) - (before.evalsha ?? 0)).toBe(1)
    expect((after.eval ?? 0) - (before.eval ?? 0)).toBe(1)
    await lock.release()
  })
})

/** The GLIDE cluster adapter without its clock minting, and deaf to CLUSTER SLOTS (the control). */
class NaiveClusterConnection extends GlideClusterConnection {
  override readonly reroutesSilently = false
  override listen(events: ClientEvents): () => void {
    return super.listen({ ...events, topology: undefined })
  }
}

const request = (ttlMs: number): AcquireRequest => ({
  ttlMs,
  sentAt: performance.now(),
  waitUntil: undefined,
  first: true,
  queue: 'none',
})

/** A backend over `connection`, outside any Locker. */
function backendOver(connection: GlideClusterConnection): RedisBackend {
  const listener: BackendListener = { released: () => {}, reconnected: () => {} }
  const options: RedisBackendOptions = {
    prefix: 'fencelock:',
    commandTimeoutMs: 5_000,
    fenceTtlMs: LOCK_DEFAULTS.fenceTtlMs,
    handoffMs: 500,
    queueLeaseMs: 5_000,
  }
  return new RedisBackend(connection, options, new Deadlines(), listener)
}

/**
 * The resource's counter on the replica left at the 3rd grant while the primary made 3 more, the
 * replica promoted: INCR there alone returns a token already handed out.
 */
async function laggingFailover(inFlight: boolean) {
  const { set, admin, glide } = await newCluster()
  // The control of the quiet case: the adapter as it would be without minting from the clock on
  // every grant, hearing of topology only from its own calls' lost connections.
  const naive = new NaiveClusterConnection(glide as never, glideConfigurationOf(glide as never)!)
  const control = backendOver(naive)
  const events: LockEvent[] = []
  // Long deadlines: an acquire in flight must outlive the failover (cluster-node-timeout 1 s).
  const locker = makeLocker(glide, { commandTimeoutMs: 20_000, onEvent: (e) => events.push(e) })
  const r = unique(inFlight ? 'glide-c-inflight' : 'glide-c-quiet')
  const k = keysOf(r)
  const slot = await set.keySlot(k.lock)
  const old = await set.primaryOf(slot)
  const replica = await replicaOf(set, old)
  const tokens: bigint[] = []
  const grant = async () => {
    const lock = await locker.acquire(r, { waitMs: 5_000 })
    tokens.push(lock.token)
    await lock.release()
  }
  // The control's first grant mints from the clock (its first in this generation) and expires.
  const first = await control.acquire(control.resource(r), request(100))
  expect(first.granted).toBe(true)
  await waitUntil(async () => (await admin.exists(k.lock)) === 0, { what: "the control's grant to expire" })
  for (let i = 0; i < 3; i++) await grant()
  const onOld = connect({ port: old.port })
  expect(await onOld.call('WAIT', 1, 5_000)).toBe(1)
  replica.pause()
  await onOld.call('CLIENT', 'KILL', 'TYPE', 'replica')
  for (let i = 0; i < 3; i++) await grant()
  const seenByReplica = tokens[2]!
  // Every grant on a GLIDE cluster mints max(INCR, clock): above the counter, not counter + 1.
  expect(tokens[3]).toBeGreaterThan(seenByReplica)
  const highest = tokens[5]!

  let pending: Promise<{ value?: { token: bigint; release(): Promise<boolean> }; error?: unknown }> | undefined
  if (inFlight) {
    old.pause()
    // Sent to the frozen primary (or, written too late, straight to the new one: the outcome is the same).
    pending = settle(locker.acquire(r, { waitMs: 30_000 }))
  }
  await old.stop()
  replica.resume()
  // The counter the replica will be promoted with: behind every token since the 3rd.
  const onReplica = connect({ port: replica.port })
  await onReplica.call('READONLY')
  expect(BigInt((await onReplica.get(k.fence))!)).toBe(seenByReplica)
  await waitUntil(async () => (await set.primaryOf(slot)).port === replica.port, {
    timeoutMs: 30_000,
    what: 'the replica promoted',
  })
  await set.ready(30_000)
  const route = { route: { type: 'primarySlotKey', key: k.fence } } as const
  if (!inFlight) {
    // Control: INCR through the same client on the promoted replica returns a token already handed out.
    let incr: unknown
    await waitUntil(
      async () => {
        incr = await glide.customCommand(['INCR', k.fence], route).catch(() => undefined)
        return incr !== undefined
      },
      { timeoutMs: 30_000, what: 'GLIDE to reach the promoted replica' },
    )
    expect(BigInt(String(incr))).toBe(seenByReplica + 1n)
    expect(seenByReplica + 1n).toBeLessThanOrEqual(highest)
    // Control: the naive adapter's grant, its generation unchanged (none of its calls failed),
    // mints INCR alone on the promoted replica — a token already handed out.
    const unprotected = await control.acquire(control.resource(r), request(300))
    expect(unprotected.granted).toBe(true)
    if (unprotected.granted) expect(unprotected.token).toBeLessThanOrEqual(highest)
  }

  if (pending) {
    const { value: lock, error } = await pending
    if (lock !== undefined) {
      expect(lock.token).toBeGreaterThan(highest)
      await lock.release()
    } else {
      expect(error).toBeInstanceOf(LockError)
      // One shard's primary gone is not Redis down: the other nodes accept the probes.
      expect((error as Error).cause).not.toMatchObject({ code: 'ECONNREFUSED' })
    }
  }
  const next = await locker.acquire(r, { waitMs: 15_000 })
  expect(next.token).toBeGreaterThan(highest)
  await next.release()
  expect(await admin.get(k.fence)).toBe(String(next.token))
  expect(events.filter((e) => e.type === 'token-regressed')).toEqual([])
  await control.close()
}

describe('GLIDE cluster: a shard primary fails over to a replica that missed the latest grants', () => {
  it('with an acquire in flight (the primary frozen, then killed): neither it nor the next acquire returns a token already handed out; control: the replica is promoted with a counter behind them (INCR alone would mint one again)', async () => {
    await laggingFailover(true)
  }, 120_000)

  it("with no call in flight (GLIDE learns the new primary on its own, from the control INCR's errors): the next grant is above every token handed out; control as above", async () => {
    await laggingFailover(false)
  }, 120_000)
})

describe('GLIDE cluster: Redis down', () => {
  it('every node killed: an acquire with a 10 s wait fails within about commandTimeoutMs with LockUnavailableError, ECONNREFUSED as the cause (the probes found every node refusing)', async () => {
    const { set, glide } = await newCluster()
    const commandTimeoutMs = 1_000
    const locker = makeLocker(glide, { commandTimeoutMs })
    await (await locker.acquire(unique('glide-c-warm'))).release()
    await Promise.all(set.servers.map((s) => s.stop()))
    const { error, ms } = await settle(() => locker.acquire(unique('glide-c-down'), { waitMs: 10_000 }))
    expect(error).toBeInstanceOf(LockUnavailableError)
    expect((error as Error).cause).toMatchObject({ code: 'ECONNREFUSED' })
    expect(ms).toBeLessThan(commandTimeoutMs + 1_000) // far below the 10 s wait
  }, 60_000)
})
