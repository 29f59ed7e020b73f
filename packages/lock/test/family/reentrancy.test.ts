/** Reentrancy on one Redis, beyond the contract (test/contract/family-contract.ts): its cost and its edges. */
import type { Redis } from 'ioredis'
import { beforeAll, expect, it } from 'vitest'
import { LockAbortedError, LockTimeoutError, resourceKeys, type Locker } from '../../src/index.js'
import { commandCalls, connect, makeLocker, ready, unique } from '../support/connections.js'
import { eventLog } from '../support/events.js'
import { startRedisServer, type RedisServer } from '../support/redis-server.js'
import { settle, sleep } from '../support/timing.js'

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

/**
 * The README's restock() → reserve() (issue 33 item 1): each reserve reads the stock from Redis,
 * yields, and writes it back less one, under the lock. The stock is counted in Redis, where the
 * effect lands.
 */
function shop(locker: Locker, stockKey: string) {
  const decrement = async (): Promise<void> => {
    const stock = Number(await admin.get(stockKey))
    await sleep(2) // the work between the read and the write (another round trip, say)
    await admin.set(stockKey, stock - 1)
  }
  const reserve = (sku: string): Promise<bigint> =>
    locker.using(`product:${sku}`, async (lock) => {
      await decrement()
      return lock.token
    })
  return { decrement, reserve }
}

it('concurrent re-entries (Promise.all of five reserves inside restock) take turns with the same token: 100 → 95 in Redis', async () => {
  const sku = unique('sku')
  const stockKey = unique('stock')
  await admin.set(stockKey, 100)
  const log = eventLog()
  const locker = makeLocker(connect({ port: server.port }), { onEvent: log.onEvent })
  const { reserve } = shop(locker, stockKey)
  let inside = 0
  let most = 0
  await locker.using(`product:${sku}`, async (outer) => {
    const tokens = await Promise.all(
      Array.from({ length: 5 }, () =>
        locker.using(`product:${sku}`, async (lock) => {
          most = Math.max(most, ++inside)
          try {
            // A re-entry inside a turn re-enters at once (nested), it does not wait for itself.
            return await reserve(sku)
          } finally {
            inside--
            expect(lock.token).toBe(outer.token)
          }
        }),
      ),
    )
    expect(tokens).toEqual(Array(5).fill(outer.token))
  })
  expect(most).toBe(1)
  expect(Number(await admin.get(stockKey))).toBe(95)
  expect(log.of('reentered').length).toBe(10)
})

it('control: the same five reserves with nothing in the way lose updates (the harness sees them)', async () => {
  const stockKey = unique('stock')
  await admin.set(stockKey, 100)
  const { decrement } = shop(makeLocker(connect({ port: server.port })), stockKey)
  await Promise.all(Array.from({ length: 5 }, () => decrement()))
  expect(Number(await admin.get(stockKey))).toBeGreaterThan(95)
})

it('two Lockers, each restocking with five concurrent reserves: 100 → 90, one token per restock', async () => {
  const sku = unique('sku')
  const stockKey = unique('stock')
  await admin.set(stockKey, 100)
  const restock = async (locker: Locker): Promise<void> => {
    const { reserve } = shop(locker, stockKey)
    await locker.using(`product:${sku}`, async (outer) => {
      const tokens = await Promise.all(Array.from({ length: 5 }, () => reserve(sku)))
      expect(new Set(tokens)).toEqual(new Set([outer.token]))
    })
  }
  await Promise.all([
    restock(makeLocker(connect({ port: server.port }))),
    restock(makeLocker(connect({ port: server.port }))),
  ])
  expect(Number(await admin.get(stockKey))).toBe(90)
})

it('while a routine is inside, a re-entry from another branch waits (bounded by waitMs and its signal; tryAcquire says null), then goes in; nested code inside the routine never waits', async () => {
  const r = unique('reenter-turn')
  const locker = makeLocker(connect({ port: server.port }))
  await locker.using(r, async (outer) => {
    let finish!: () => void
    const finished = new Promise<void>((resolve) => (finish = resolve))
    let entered!: () => void
    const inside = new Promise<void>((resolve) => (entered = resolve))
    const routine = locker.using(r, async (turn) => {
      // Nested, by hand and as a routine: at once, on the routine's own handle.
      const byHand = await locker.acquire(r, { waitMs: 0 })
      await locker.using(r, async (nested) => expect(nested.token).toBe(outer.token), { waitMs: 0 })
      await byHand.release()
      entered()
      await finished
      return turn.token
    })
    await inside
    const [timedOut, aborted, tried] = await Promise.all([
      settle(locker.acquire(r, { waitMs: 100 })),
      settle(locker.using(r, () => 'ran', { waitMs: 10_000, signal: AbortSignal.timeout(100) })),
      settle(locker.tryAcquire(r)),
    ])
    expect(timedOut.error).toBeInstanceOf(LockTimeoutError)
    expect(aborted.error).toBeInstanceOf(LockAbortedError)
    expect(tried.value).toBeNull()
    const order: string[] = []
    const next = locker.using(r, (lock) => order.push(`next ${lock.token === outer.token}`), { waitMs: 10_000 })
    order.push('routine ends')
    finish()
    expect(await routine).toBe(outer.token)
    await next
    expect(order).toEqual(['routine ends', 'next true'])
  })
})
