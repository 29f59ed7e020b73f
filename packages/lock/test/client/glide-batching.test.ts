/**
 * Write coalescing on Valkey GLIDE (client/glide-batching.ts): the acquires and releases a
 * Locker sends on a GLIDE standalone client in one tick go to GLIDE as a few non-atomic batches
 * instead of one call each; every other call sends what is gathered first. Counted on the real
 * client (its `customCommand` and `exec` wrapped, each call passed through) against a real
 * redis-server; the control is `coalesceWrites: false`, one call per command.
 */
import type { GlideClient } from '@valkey/valkey-glide'
import { Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Locker, LockUnavailableError, resourceKeys, type Lock } from '../../src/index.js'
import { COALESCE_BATCH } from '../../src/client/write-coalescing.js'
import { GlideConnection, glideConfigurationOf } from '../../src/client/glide-client.js'
import { glideClient } from '../support/clients.js'
import { ready, unique } from '../support/connections.js'
import { startRedisServer, type RedisServer } from '../support/redis-server.js'
import { waitUntil } from '../support/timing.js'

const CONCURRENT = 48

let server: RedisServer
let admin: Redis
beforeAll(async () => {
  server = await startRedisServer()
  admin = new Redis({ host: '127.0.0.1', port: server.port })
  await ready(admin, 'admin')
})
afterAll(() => admin.disconnect())

/** Counts `client`'s calls into GLIDE (each passed through) until `stop()`: calls, batches, commands in all. */
function countCalls(client: GlideClient): {
  readonly calls: number
  readonly batches: number
  readonly commands: number
  stop(): void
} {
  const c = client as unknown as Record<'customCommand' | 'exec', (...args: unknown[]) => Promise<unknown>>
  const single = c.customCommand
  const exec = c.exec
  const counts = { calls: 0, batches: 0, commands: 0 }
  c.customCommand = function (this: unknown, ...args: unknown[]) {
    counts.calls++
    counts.commands++
    return single.apply(this, args)
  }
  c.exec = function (this: unknown, ...args: unknown[]) {
    counts.calls++
    counts.batches++
    counts.commands += (args[0] as { commands: unknown[] }).commands.length
    return exec.apply(this, args)
  }
  return {
    get calls() {
      return counts.calls
    },
    get batches() {
      return counts.batches
    },
    get commands() {
      return counts.commands
    },
    stop() {
      c.customCommand = single
      c.exec = exec
    },
  }
}

/** `CONCURRENT` acquires on resources of their own in one tick, then their releases: GLIDE's calls for each. */
async function cycle(
  client: GlideClient,
  locker: Locker,
): Promise<{ acquireCalls: number; releaseCalls: number; commands: number; batches: number }> {
  const resources = Array.from({ length: CONCURRENT }, (_, i) => unique(`gb-${i}`))
  const acquiring = countCalls(client)
  const locks = await Promise.all(resources.map((r) => locker.acquire(r)))
  acquiring.stop()
  for (const [i, lock] of locks.entries()) {
    expect(lock.isHeld()).toBe(true)
    expect(await admin.exists(resourceKeys('fencelock:', resources[i]!).lock)).toBe(1)
  }
  const tokens = new Set(locks.map((l) => l.token))
  expect(tokens.size).toBe(CONCURRENT)
  const releasing = countCalls(client)
  const released = await Promise.all(locks.map((lock) => lock.release()))
  releasing.stop()
  expect(released.every((r) => r)).toBe(true)
  for (const r of resources) expect(await admin.exists(resourceKeys('fencelock:', r).lock)).toBe(0)
  return {
    acquireCalls: acquiring.calls,
    releaseCalls: releasing.calls,
    commands: acquiring.commands + releasing.commands,
    batches: acquiring.batches + releasing.batches,
  }
}

describe('write coalescing on GLIDE (coalesceWrites, on by default on a GlideClient)', () => {
  it(`${CONCURRENT} acquires sent in one tick reach GLIDE in at most 1 + ceil(${CONCURRENT - 1} / ${COALESCE_BATCH}) calls, their releases too, every grant distinct and in Redis; coalesceWrites: false calls GLIDE once per command (control)`, async () => {
    const client = await glideClient(server.port)
    const locker = new Locker(client, { ttlMs: 10_000 })
    const plain = new Locker(client, { ttlMs: 10_000, coalesceWrites: false })
    try {
      // Scripts loaded: the counted cycles send only their own commands.
      await (await locker.acquire(unique('warm'))).release()
      await (await plain.acquire(unique('warm'))).release()
      const bound = 1 + Math.ceil((CONCURRENT - 1) / COALESCE_BATCH)
      const batched = await cycle(client, locker)
      expect(batched.acquireCalls).toBeLessThanOrEqual(bound)
      expect(batched.releaseCalls).toBeLessThanOrEqual(bound)
      expect(batched.batches).toBeGreaterThan(0)
      // Every command went out: an EVALSHA per acquire and per release.
      expect(batched.commands).toBe(2 * CONCURRENT)
      const control = await cycle(client, plain)
      expect(control).toEqual({
        acquireCalls: CONCURRENT,
        releaseCalls: CONCURRENT,
        commands: 2 * CONCURRENT,
        batches: 0,
      })
    } finally {
      await locker.close()
      await plain.close()
    }
  })

  it("batched calls after the tick's first are gathered; any other call sends them first, then itself, and Redis runs them in that order", async () => {
    const client = await glideClient(server.port)
    const connection = new GlideConnection(client, glideConfigurationOf(client)!, { probe: false })
    const sha = String(await admin.script('LOAD', "return redis.call('INCR', KEYS[1])"))
    const key = unique('gb-order')
    const calls = countCalls(client)
    const replies: Promise<unknown>[] = []
    for (let i = 0; i < 5; i++) replies.push(connection.evalshaBatched(sha, 1, key))
    // The first at once; 4 gathered.
    expect({ calls: calls.calls, batches: calls.batches }).toEqual({ calls: 1, batches: 0 })
    replies.push(connection.evalsha(sha, 1, key))
    // Before any other code runs: the 4 gathered in one batch, then this one.
    expect({ calls: calls.calls, batches: calls.batches, commands: calls.commands }).toEqual({
      calls: 3,
      batches: 1,
      commands: 6,
    })
    calls.stop()
    expect((await Promise.all(replies)).map(Number)).toEqual([1, 2, 3, 4, 5, 6])
  })

  it('a command of a batch that fails fails alone: the scripts flushed from Redis, every acquire of a batch meets NOSCRIPT and is granted through the fallback', async () => {
    const client = await glideClient(server.port)
    const locker = new Locker(client, { ttlMs: 10_000 })
    try {
      await (await locker.acquire(unique('warm'))).release()
      await admin.script('FLUSH')
      const calls = countCalls(client)
      const resources = Array.from({ length: CONCURRENT }, (_, i) => unique(`gb-noscript-${i}`))
      const locks = await Promise.all(resources.map((r) => locker.acquire(r)))
      calls.stop()
      expect(calls.batches).toBeGreaterThan(0)
      for (const lock of locks) expect(lock.isHeld()).toBe(true)
      await Promise.all(locks.map((lock) => lock.release()))
      for (const r of resources) expect(await admin.exists(resourceKeys('fencelock:', r).lock)).toBe(0)
    } finally {
      await locker.close()
    }
  })

  it("the connection killed with batches in flight: every try on it fails at once with LockUnavailableError (the cause GLIDE's ConnectionError), none is sent again, no lock is left but those granted to their callers; the next acquires are granted, batched", async () => {
    const client = await glideClient(server.port)
    const locker = new Locker(client, { ttlMs: 10_000, commandTimeoutMs: 5_000 })
    try {
      await (await locker.acquire(unique('warm'))).release()
      const resources = Array.from({ length: CONCURRENT }, (_, i) => unique(`gb-kill-${i}`))
      // Writes held for 600 ms: the tries are sent (the first alone, the rest in batches) and wait on the server.
      await admin.client('PAUSE', 600, 'WRITE')
      const calls = countCalls(client)
      const tries = Promise.allSettled(resources.map((r) => locker.tryAcquire(r)))
      await waitUntil(async () => /cmd=evalsha/.test(String(await admin.client('LIST'))), {
        what: 'the tries to wait on the server',
      })
      calls.stop()
      expect(calls.batches).toBeGreaterThan(0)
      const t = performance.now()
      await admin.call('CLIENT', 'KILL', 'TYPE', 'normal', 'SKIPME', 'yes')
      const outcomes = await tries
      expect(performance.now() - t).toBeLessThan(1_000) // commandTimeoutMs is 5 s
      // The tries on the killed connection fail at once. A batch GLIDE had not written yet when
      // the connection dropped goes out once, on the new connection (a loaded clean-clone CI run):
      // granted there after the pause, it is its caller's lock — sent once, not orphaned.
      const granted = new Map<string, Lock>()
      for (const [i, o] of outcomes.entries()) {
        if (o.status === 'fulfilled') {
          expect(o.value).not.toBeNull() // nobody else holds these
          granted.set(resources[i]!, o.value!)
          continue
        }
        const error = o.reason as Error
        expect(error).toBeInstanceOf(LockUnavailableError)
        expect(error.cause?.constructor.name).toBe('ConnectionError')
      }
      expect(granted.size).toBeLessThan(CONCURRENT) // the waiting one at least was cut
      // A write of the admin's waits for the pause to end: by then a resent try would have run.
      await admin.set(unique('gb-after-pause'), '1')
      for (const r of resources) {
        const lock = granted.get(r)
        expect(await admin.exists(resourceKeys('fencelock:', r).lock)).toBe(lock === undefined ? 0 : 1)
      }
      for (const lock of granted.values()) expect(await lock.release()).toBe(true)
      // GLIDE reconnected by itself: the Locker grants again, batched.
      const again = countCalls(client)
      const locks = await Promise.all(resources.map((r) => locker.acquire(r, { waitMs: 5_000 })))
      again.stop()
      expect(again.batches).toBeGreaterThan(0)
      expect((await Promise.all(locks.map((l) => l.release()))).every((r) => r)).toBe(true)
    } finally {
      await locker.close()
    }
  })
})
