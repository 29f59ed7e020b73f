/**
 * Quorum tokens when one node's wall clock runs ahead (the devkit's clock shim: 3 s fast) and the
 * counters age out. A counter that a grant or the second phase touches must live `fenceTtlMs`
 * from that touch: otherwise the knowledge a majority shares is lost on a schedule, and a later
 * majority that reseeds from the real clock mints below a token the fast node handed out.
 */
import type { Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { resourceKeys } from '../src/index.js'
import { connect, makeLocker, ready, unique } from './support/connections.js'
import { startRedisServer, type RedisServer } from './support/redis-server.js'
import { sleep, waitUntil } from './support/timing.js'

const FENCE_TTL_MS = 2_000
const AHEAD_MS = 3_000
const keysOf = (resource: string) => resourceKeys('fencelock:', resource)

let servers: RedisServer[] = []
let admins: Redis[] = []

beforeAll(async () => {
  // A runs 3 s fast; B and C on the real clock.
  servers = [await startRedisServer({ clockOffsetMs: AHEAD_MS }), await startRedisServer(), await startRedisServer()]
  admins = servers.map((s) => connect({ port: s.port }))
  for (const [i, a] of admins.entries()) await ready(a, servers[i]!.url)
})

afterAll(async () => {
  await Promise.all(servers.map((s) => s.dispose()))
})

/**
 * Three grants, one node out for each (its client disconnected: nothing is sent to it): {B, C},
 * then {A, B} just before B's and C's counters would expire from their seed, then {B, C} just
 * after C's expired. `keepOldExpiry` is the unprotected twin: after the second grant, B's counter
 * is given back the expiry it had before (what a raise that keeps the counter's TTL did).
 */
async function threeGrants(keepOldExpiry: boolean): Promise<[bigint, bigint, bigint]> {
  const clients = servers.map((s) => connect({ port: s.port }))
  for (const c of clients) await ready(c, 'a node')
  // About tokens: no delayed restart (a node reconnected here kept its data anyway).
  const locker = makeLocker(clients, { fenceTtlMs: FENCE_TTL_MS, commandTimeoutMs: 2_000, nodeRestartDelayMs: 0 })
  const r = unique('q-clock')
  const fence = keysOf(r).fence
  // A node out: its client disconnected (nothing is sent to it), and back: connected again.
  const out = async (i: number) => {
    clients[i]!.disconnect()
    await waitUntil(() => clients[i]!.status === 'end', { what: 'the client to close' })
  }
  const back = async (i: number) => {
    if (clients[i]!.status === 'end') await clients[i]!.connect()
    await ready(clients[i]!, 'a node back')
  }
  const grant = async () => {
    const lock = await locker.acquire(r, { waitMs: 2_000 })
    await lock.release()
    return lock.token
  }

  await out(0)
  const first = await grant() // B and C seed from the real clock
  await back(0)
  await sleep(FENCE_TTL_MS * 0.75) // the counters are about to expire, counted from their seed
  await out(2)
  const second = await grant() // A seeds from its clock, 3 s ahead; B is raised to it
  const cLeft = await admins[2]!.pttl(fence)
  if (keepOldExpiry) await admins[1]!.pexpire(fence, Math.max(1, cLeft))
  await back(2)
  // C's counter, untouched since the first grant, ages out; B's lives on unless it kept its old expiry.
  await waitUntil(async () => (await admins[2]!.exists(fence)) === 0, {
    timeoutMs: FENCE_TTL_MS * 2,
    what: "C's counter expired",
  })
  if (keepOldExpiry)
    await waitUntil(async () => (await admins[1]!.exists(fence)) === 0, {
      timeoutMs: FENCE_TTL_MS,
      what: "B's counter expired with C's",
    })
  await out(0)
  const third = await grant()
  await back(0)
  return [first, second, third]
}

describe('quorum tokens with a node whose clock runs 3 s ahead', () => {
  it('every counter a grant or the second phase touches lives fenceTtlMs from that touch: the third token is above the second', async () => {
    const [first, second, third] = await threeGrants(false)
    expect(second).toBeGreaterThan(first)
    // The second token came from A's clock, about 3 s (3e6 µs) above the real one.
    expect(second - first).toBeGreaterThan(2_000_000n)
    expect(third).toBeGreaterThan(second)
  })

  it('control: a raised counter that keeps its old expiry ages out with C, and the next majority reseeds below the second token', async () => {
    const [, second, third] = await threeGrants(true)
    expect(third).toBeLessThan(second)
  })
})
