/** inspect() on one Redis beyond the contract: its cost, the hand-on state; and the quorum's view, as arithmetic. */
import type { Redis } from 'ioredis'
import { beforeAll, describe, expect, it } from 'vitest'
import { InvalidLockOptionError, LOCK_SCRIPTS, LockUnavailableError, resourceKeys } from '../../src/index.js'
import { majorityView, type NodeInspection } from '../../src/family/inspect.js'
import { commandCalls, connect, makeLocker, ready, unique } from '../support/connections.js'
import { startRedisServer, type RedisServer } from '../support/redis-server.js'

let server: RedisServer
let admin: Redis
beforeAll(async () => {
  server = await startRedisServer()
  admin = connect({ port: server.port })
  await ready(admin, server.url)
})

describe('inspect() on one Redis', () => {
  it('is one EVALSHA of a script that writes nothing, and reads a lock handed on as handing-on', async () => {
    const r = unique('inspect-cost')
    const keys = resourceKeys('fencelock:', r)
    const locker = makeLocker(connect({ port: server.port }))
    await locker.inspect(r) // loads the script
    await admin.set(keys.lock, '~0123456789abcdef', 'PX', 5_000)
    const before = await commandCalls(admin)
    const seen = await locker.inspect(r)
    const after = await commandCalls(admin)
    expect(seen).toMatchObject({ state: 'handing-on', waiting: 0 })
    expect(seen.holderTtlMs).toBeGreaterThan(0)
    expect((after['evalsha'] ?? 0) - (before['evalsha'] ?? 0)).toBe(1)
    // Read-only: no write command in its source.
    expect(LOCK_SCRIPTS.inspect.lua).not.toMatch(/'(SET|DEL|INCR|ZADD|HSET|HDEL|PEXPIRE|ZREM|PUBLISH)'/)
  })

  it('bad names are refused before any I/O; a closed Locker or a dead Redis is LockUnavailableError', async () => {
    const locker = makeLocker(connect({ port: 1 }, { lazyConnect: true, retryStrategy: () => null }), {
      commandTimeoutMs: 200,
    })
    await expect(locker.inspect('')).rejects.toBeInstanceOf(InvalidLockOptionError)
    await expect(locker.inspect(42 as unknown as string)).rejects.toMatchObject({ field: 'resource' })
    await expect(locker.inspect('x')).rejects.toBeInstanceOf(LockUnavailableError)
    await locker.close()
    await expect(locker.inspect('x')).rejects.toMatchObject({ name: 'LockUnavailableError', operation: 'inspect' })
  })
})

describe("the quorum's view (majorityView)", () => {
  const view = (
    state: NodeInspection['state'],
    holderTtlMs: number,
    lastToken: bigint,
    waiting = 0,
  ): NodeInspection => ({
    state,
    holderTtlMs,
    lastToken,
    waiting,
  })

  it('held when a majority holds it, with the lease a majority still has; the token a majority reached', () => {
    const v = majorityView('r', [view('held', 900, 10n), view('held', 700, 10n), view('free', 0, 50n, 2)], 2)
    expect(v).toMatchObject({ state: 'held', holderTtlMs: 700, lastToken: 10n, waiting: 2 })
  })

  it('free when no state has a majority; a node that did not answer counts as ahead', () => {
    expect(majorityView('r', [view('held', 900, 10n), view('free', 0, 9n), view('handing-on', 50, 9n)], 2).state).toBe(
      'free',
    )
    expect(majorityView('r', [view('held', 900, 10n), undefined, view('held', 800, 7n)], 2).lastToken).toBe(10n)
  })
})
