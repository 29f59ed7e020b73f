/**
 * acquireAll() / usingAll() when a member is lost while a later one is awaited (issue 33 item 2):
 * a set is returned only if every member is held at that moment; otherwise everything is released
 * and the member's LockLostError says which was lost. Faults for real: the member's key deleted,
 * the server stalled past a short lease.
 */
import type { Redis } from 'ioredis'
import { beforeAll, expect, it } from 'vitest'
import { LockLostError, resourceKeys, type Locker } from '../../src/index.js'
import { connect, makeLocker, ready, stallServer, unique } from '../support/connections.js'
import { eventLog } from '../support/events.js'
import { startRedisServer, type RedisServer } from '../support/redis-server.js'
import { settle, waitUntil } from '../support/timing.js'

let server: RedisServer
let admin: Redis
/** Looks at the queues with the default deadline: a loaded machine's delays are not the faults under test. */
let inspector: Locker
beforeAll(async () => {
  server = await startRedisServer()
  admin = connect({ port: server.port })
  await ready(admin, server.url)
  inspector = makeLocker(admin)
})

const keyOf = (resource: string) => resourceKeys('fencelock:', resource).lock

/**
 * `a` < `b` in canonical order: `a` is taken first, then `b` is waited for (another Locker holds
 * it). A deadline of 1 s: at 100 ms a loaded clean-clone CI run's queue inspection timed out.
 */
async function setUp(commandTimeoutMs = 1_000): Promise<{
  a: string
  b: string
  locker: Locker
  log: ReturnType<typeof eventLog>
  releaseB: () => Promise<boolean>
}> {
  const label = unique('set')
  const [a, b] = [`${label}:a`, `${label}:b`]
  const log = eventLog()
  const locker = makeLocker(connect({ port: server.port }), { onEvent: log.onEvent, commandTimeoutMs })
  const other = makeLocker(connect({ port: server.port }))
  const heldB = await other.acquire(b, { ttlMs: 30_000 })
  return { a, b, locker, log, releaseB: () => heldB.release() }
}

async function waitingForB(a: string, b: string): Promise<void> {
  await waitUntil(async () => (await admin.exists(keyOf(a))) === 1 && (await inspector.inspect(b)).waiting === 1, {
    what: 'a held and b awaited',
  })
}

it('acquireAll: the first member deleted while the second is awaited — the wait ends at once, no set is returned; LockLostError names the lost member, and nothing is left held', async () => {
  const { a, b, locker, log, releaseB } = await setUp()
  const pending = settle(locker.acquireAll([b, a], { ttlMs: 300, waitMs: 10_000 }))
  await waitingForB(a, b)
  const lost = log.next('lost', { resource: a })
  await admin.del(keyOf(a))
  await lost // the set's watchdog found a gone
  // The wait for b ends with the loss: b is still held by the other Locker.
  const { value, error } = await pending
  expect(await releaseB()).toBe(true)
  expect(value).toBeUndefined()
  expect(error).toBeInstanceOf(LockLostError)
  expect(error).toMatchObject({ resource: a })
  await waitUntil(async () => (await admin.exists(keyOf(a), keyOf(b))) === 0, { what: 'nothing left held' })
  expect(locker.heldCount).toBe(0)
})

it('usingAll: the first member lost to a stalled server (lease 150 ms) while the second is awaited — fn never runs', async () => {
  const { a, b, locker, log, releaseB } = await setUp()
  let ran = false
  const pending = settle(
    locker.usingAll(
      [a, b],
      () => {
        ran = true
      },
      { ttlMs: 150, waitMs: 10_000 },
    ),
  )
  await waitingForB(a, b)
  const lost = log.next('lost', { resource: a })
  await stallServer(admin, 600)
  await lost // a's renewals stalled past its lease
  await releaseB() // answered once the stall ends
  const { error } = await pending
  expect(ran).toBe(false)
  expect(error).toBeInstanceOf(LockLostError)
  expect(error).toMatchObject({ resource: a, reason: 'expired' })
  await waitUntil(async () => (await admin.exists(keyOf(b))) === 0, { what: 'b not left held' })
})

it('control: with every member held, the set is returned and held', async () => {
  // No stall here: a loaded machine's delays, not a 100 ms deadline (a clean-clone run's release
  // timed out at 100 ms), and a lease they cannot outlast.
  const { a, b, locker, releaseB } = await setUp(2_000)
  const pending = locker.acquireAll([a, b], { ttlMs: 10_000, waitMs: 10_000 })
  await waitingForB(a, b)
  await releaseB()
  const set = await pending
  expect(set.isHeld()).toBe(true)
  expect(await set.release()).toBe(true)
})
