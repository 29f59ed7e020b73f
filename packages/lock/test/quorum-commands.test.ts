/**
 * What an uncontended acquire + release costs each node in quorum mode (issue 33, "quorum mode at
 * the anchors' cost"), counted by the nodes themselves (INFO commandstats): with the restart guard
 * on, the lean grant is EVALSHA, SET and INCR (the marker is read only when a counter is missing,
 * the counter's expiry refreshed once per slack), the release EVALSHA, GET and DEL — 6 per node,
 * node-redlock's count. And what the refreshes skipped must not cost: the counter still lives at
 * least fenceTtlMs after the last grant. Control: with the guard off every grant refreshes it.
 */
import type { Redis } from 'ioredis'
import { describe, expect, it } from 'vitest'
import { resourceKeys } from '../src/index.js'
import { nodeRedisClient, type ClientLibrary } from './support/clients.js'
import { makeLocker, ready, unique } from './support/connections.js'
import { useQuorumNodes } from './support/quorum.js'
import { waitUntil } from './support/timing.js'

const nodes = useQuorumNodes(3)
const CYCLES = 40
/**
 * 40 cycles over 3 proxied nodes: counts, not times, are asserted, and a loaded machine gets its
 * time (a clean-clone run ran past 30 s).
 */
const TEST_MS = 120_000
const FENCE_TTL_MS = 400_000

/** Calls per command since the last CONFIG RESETSTAT. */
async function commandCalls(admin: Redis): Promise<Map<string, number>> {
  const calls = new Map<string, number>()
  for (const m of (await admin.info('commandstats')).matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm))
    calls.set(m[1]!, Number(m[2]))
  return calls
}

/** Cycles of acquire + release on one resource after a warm-up grant; each node's calls per command. */
async function countCycles(
  guard: boolean,
  library: ClientLibrary = 'ioredis',
): Promise<{ calls: Map<string, number>[]; resource: string }> {
  // Connected first: a connection that becomes ready later starts a new generation (the next grant
  // reseeds) and the restart guard's check of its node — calls that are not the cycles'.
  let clients
  if (library === 'node-redis') {
    const redises = nodes.proxies.map((proxy) => nodeRedisClient(proxy.port))
    await waitUntil(async () => redises.every((c) => c.isReady), { what: 'the node-redis clients to be ready' })
    clients = redises
  } else {
    const redises = nodes.clients()
    await Promise.all(redises.map((c) => ready(c, 'a node')))
    clients = redises
  }
  const locker = makeLocker(clients, { fenceTtlMs: FENCE_TTL_MS, ...(guard ? {} : { nodeRestartDelayMs: 0 }) })
  const resource = unique('q-cost')
  const lockKey = resourceKeys('fencelock:', resource).lock
  const fenceKey = resourceKeys('fencelock:', resource).fence
  // release() resolves once a majority freed the lock: wait until the last node has run it too.
  const freedEverywhere = () =>
    waitUntil(async () => (await Promise.all(nodes.admins.map((a) => a.exists(lockKey)))).every((n) => n === 0), {
      timeoutMs: 30_000,
      what: 'released on every node',
    })
  // The first grant seeds the counters and writes the lease records (again only after a lease, 60 s): not counted.
  await (await locker.acquire(resource, { ttlMs: 60_000 })).release()
  // The grant ran on every node (a majority suffices for acquire() to resolve: the last node's may
  // still be in its proxy, and would be counted), and its release, sent behind it, too.
  await waitUntil(async () => (await Promise.all(nodes.admins.map((a) => a.exists(fenceKey)))).every((n) => n === 1), {
    timeoutMs: 30_000,
    what: 'the warm-up grant to run on every node',
  })
  await freedEverywhere()
  // The nodes seeded their counters from their own clocks, and the warm-up's second phase raised
  // only the nodes below the token it chose: a node that minted more keeps its lead, and a later
  // cycle won without it raises it again (a PEXPIRE with no INCR: a clean-clone run counted 41).
  // Counters in step, as they are after any grant on every node, every cycle's majority minted
  // the same token and no cycle needs a second phase.
  const counters = await Promise.all(nodes.admins.map(async (a) => BigInt((await a.get(fenceKey)) ?? '0')))
  const top = counters.reduce((a, b) => (b > a ? b : a))
  await Promise.all(nodes.admins.map((a) => a.set(fenceKey, top.toString(), 'KEEPTTL')))
  await Promise.all(nodes.admins.map((a) => a.config('RESETSTAT')))
  for (let i = 0; i < CYCLES; i++) {
    const lock = await locker.acquire(resource, { ttlMs: 60_000 })
    // A majority granted when acquire() resolves; the release goes out behind each node's grant.
    expect(await lock.release()).toBe(true)
  }
  await freedEverywhere()
  const calls = await Promise.all(nodes.admins.map(commandCalls))
  return { calls, resource }
}

describe('quorum mode, uncontended, what each node executes per acquire + release', () => {
  // The same count through each client library: the adapters add no round trip.
  it.each(['ioredis', 'node-redis'] as const)(
    'with the restart guard on (%s): EVALSHA, SET, INCR and EVALSHA, GET, DEL — no marker GET, no PEXPIRE of the counter',
    async (library) => {
      const { calls, resource } = await countCycles(true, library)
      for (const c of calls) {
        expect(c.get('incr')).toBe(CYCLES)
        expect(c.get('del')).toBe(CYCLES)
        expect(c.get('pexpire') ?? 0).toBe(0)
        // Per cycle one each.
        expect(c.get('evalsha')).toBe(2 * CYCLES)
        expect(c.get('set')).toBe(CYCLES)
        // The release's GET; a marker read per grant would make it 2 × CYCLES.
        expect(c.get('get')).toBe(CYCLES)
      }
      // The refreshes skipped cost nothing: every counter lives at least fenceTtlMs after the last grant.
      const fence = resourceKeys('fencelock:', resource).fence
      for (const admin of nodes.admins) expect(await admin.pttl(fence)).toBeGreaterThanOrEqual(FENCE_TTL_MS)
    },
    TEST_MS,
  )

  it(
    'control: with the guard off every grant refreshes the counter (a PEXPIRE per grant and node)',
    async () => {
      const { calls } = await countCycles(false)
      for (const c of calls) {
        expect(c.get('incr')).toBe(CYCLES)
        expect(c.get('pexpire')).toBe(CYCLES)
      }
    },
    TEST_MS,
  )
})
