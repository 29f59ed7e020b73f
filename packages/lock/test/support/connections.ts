/**
 * Redis connections and Lockers for the tests. Every client and Locker made here is closed in
 * `afterAll` of the test file. The shared Redis (REDIS_URL, default 127.0.0.1:6379) must answer:
 * a test that needs it fails loudly when it is down, it never skips.
 */
import { randomBytes } from 'node:crypto'
import { sharedRedisUrl, waitForRedis } from '@fencelock/devkit/redis-url'
import { Redis, type RedisOptions } from 'ioredis'
import { afterAll, beforeEach } from 'vitest'
import { Locker, type LockerOptions, type SupportedRedisClient } from '../../src/index.js'

export const SHARED_REDIS_URL = sharedRedisUrl()

const clients = new Set<Redis>()
const lockers = new Set<Locker>()

/**
 * A new ioredis client. Reconnects fast (a restarted test server is back in ~20 ms), and its
 * 'error' events are swallowed: a killed server makes every client report them, and the tests
 * assert outcomes instead.
 */
export function connect(
  target: string | { port: number; host?: string } = SHARED_REDIS_URL,
  options: RedisOptions = {},
): Redis {
  const merged: RedisOptions = { retryStrategy: (times) => Math.min(times * 20, 200), ...options }
  const client =
    typeof target === 'string'
      ? new Redis(target, merged)
      : new Redis({ host: target.host ?? '127.0.0.1', port: target.port, ...merged })
  client.on('error', () => {})
  clients.add(client)
  return client
}

let sharedAnswers: Promise<void> | undefined

/**
 * A client on the shared Redis. Every test of a file that asked for one first awaits one PING
 * (see the beforeEach below): when the shared Redis is down, each test fails with a message that
 * says so, instead of hanging or being reported as skipped after a failed beforeAll.
 */
export async function connectShared(options: RedisOptions = {}): Promise<Redis> {
  const client = connect(SHARED_REDIS_URL, options)
  sharedAnswers ??= ready(client, SHARED_REDIS_URL)
  sharedAnswers.catch(() => {}) // reported by each test, not as an unhandled rejection
  return client
}

/** Resolves once `client` answers PING; rejects loudly after `ms`. */
export function ready(client: Redis, label: string, ms = 3_000): Promise<void> {
  return waitForRedis(client, label, ms)
}

/** A Locker closed in afterAll. */
export function makeLocker(
  client: SupportedRedisClient | readonly SupportedRedisClient[],
  options: LockerOptions = {},
): Locker {
  const locker = new Locker(client, options)
  lockers.add(locker)
  return locker
}

/** A resource (or prefix) name nobody else uses: `label` plus 40 random bits. */
export function unique(label: string): string {
  return `${label}:${randomBytes(5).toString('hex')}`
}

/** Calls per command from INFO commandstats, e.g. `{ evalsha: 12, eval: 1 }`. */
export async function commandCalls(client: Redis): Promise<Record<string, number>> {
  const info = await client.info('commandstats')
  const calls: Record<string, number> = {}
  for (const match of info.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) calls[match[1]!] = Number(match[2])
  return calls
}

/**
 * Stalls the server `client` is on for `ms`: every client's commands wait (CLIENT PAUSE ALL). In
 * force once this resolves — unlike a DEBUG SLEEP sent without waiting for its reply, which a
 * command sent next may overtake on a loaded machine.
 */
export async function stallServer(client: Redis, ms: number): Promise<void> {
  await client.client('PAUSE', ms, 'ALL')
}

/**
 * The number of client connections the server has now (CLIENT LIST), or only those named `name`
 * (ioredis `connectionName`; `duplicate()` copies it, so a Locker's subscriber carries it too).
 */
export async function connectionCount(client: Redis, name?: string): Promise<number> {
  const list = (await client.client('LIST')) as string
  return list
    .trim()
    .split('\n')
    .filter((line) => line && (name === undefined || line.includes(` name=${name} `))).length
}

beforeEach(async () => {
  if (sharedAnswers) await sharedAnswers
})

afterAll(async () => {
  await Promise.allSettled([...lockers].map((locker) => locker.close()))
  lockers.clear()
  for (const client of clients) client.disconnect()
  clients.clear()
})
