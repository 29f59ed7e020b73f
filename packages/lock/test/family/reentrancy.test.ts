/** Reentrancy on one Redis, beyond the contract (test/contract/family-contract.ts): its cost and its edges. */
import type { Redis } from 'ioredis'
import { beforeAll, expect, it } from 'vitest'
import { LockTimeoutError, resourceKeys } from '../../src/index.js'
import { commandCalls, connect, makeLocker, ready, unique } from '../support/connections.js'
import { eventLog } from '../support/events.js'
import { startRedisServer, type RedisServer } from '../support/redis-server.js'
import { settle } from '../support/timing.js'

let server: RedisServer
let admin: Redis
beforeAll(async () => {
  server = await startRedisServer()
  admin = connect({ port: server.port })
  await ready(admin, server.url)
})

/** Every command the server ran, in all (INFO commandstats), less the INFO calls themselves. */
async function commandsRun(): Promise<number> {
  const calls = await commandCalls(admin)
  return Object.entries(calls).reduce((sum, [name, n]) => (name === 'info' ? sum : sum + n), 0)
}

it('a re-entry makes no Redis round trip: 1 000 nested acquires and releases, 0 commands', async () => {
  const r = unique('reenter-free')
  const locker = makeLocker(connect({ port: server.port }))
  await locker.using(r, async (outer) => {
    const before = await commandsRun()
    for (let i = 0; i < 1_000; i++) {
      const inner = await locker.acquire(r)
      if (inner.token !== outer.token) throw new Error('a new token')
      await inner.release()
    }
    expect((await commandsRun()) - before).toBe(0)
  })
})

it('a grant that was lost is not re-entered: the nested acquire asks Redis like anyone, and gets a new token', async () => {
  const r = unique('reenter-lost')
  const log = eventLog()
  const locker = makeLocker(connect({ port: server.port }), { onEvent: log.onEvent })
  await locker.using(r, async (outer) => {
    const lost = log.next('lost', { resource: r })
    await admin.del(resourceKeys('fencelock:', r).lock)
    await outer.extend().catch(() => {})
    await lost
    const again = await locker.acquire(r)
    expect(again.token).toBeGreaterThan(outer.token)
    expect(log.of('reentered')).toHaveLength(0)
    await again.release()
  })
})

it('the inner handle released first does not free the grant; a lock taken by hand outside run() waits for itself', async () => {
  const r = unique('reenter-hand')
  const locker = makeLocker(connect({ port: server.port }))
  const lock = await locker.acquire(r)
  const { error } = await settle(locker.acquire(r, { waitMs: 200 }))
  expect(error).toBeInstanceOf(LockTimeoutError)
  await lock.run(async () => {
    const inner = await locker.acquire(r)
    // Released in the wrong order: the outer handle first. The grant stays until the inner goes.
    expect(await lock.release()).toBe(true)
    expect(await admin.exists(resourceKeys('fencelock:', r).lock)).toBe(1)
    expect(inner.isHeld()).toBe(true)
    expect(await inner.release()).toBe(true)
  })
  expect(await admin.exists(resourceKeys('fencelock:', r).lock)).toBe(0)
})
