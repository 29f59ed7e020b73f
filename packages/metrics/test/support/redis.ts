/**
 * Redis connections, Lockers and proxies for the tests, closed in `afterAll` of the test file that
 * made them. The shared Redis (REDIS_URL, default 127.0.0.1:6379) must answer: the tests fail
 * loudly when it is down, they never skip.
 */
import { randomUUID } from 'node:crypto'
import { closeAllProxies, startTcpProxy, type TcpProxy } from '@fencelock/devkit/tcp-proxy'
import { sharedRedisUrl, waitForRedis } from '@fencelock/devkit/redis-url'
import { Locker, type LockerOptions } from '@fencelock/lock'
import { Redis, type RedisOptions } from 'ioredis'
import { afterAll } from 'vitest'

export const REDIS_URL = sharedRedisUrl()

const clients = new Set<Redis>()
const lockers = new Set<Locker>()

afterAll(async () => {
  await Promise.allSettled([...lockers].map((l) => l.close()))
  lockers.clear()
  for (const c of clients) c.disconnect()
  clients.clear()
  await closeAllProxies()
})

/** A client on `target` (default: the shared Redis); its 'error' events are swallowed. */
export function connect(target: string | { host: string; port: number } = REDIS_URL, options: RedisOptions = {}): Redis {
  const merged: RedisOptions = { retryStrategy: (times) => Math.min(times * 20, 200), ...options }
  const client = typeof target === 'string' ? new Redis(target, merged) : new Redis({ ...target, ...merged })
  client.on('error', () => {})
  clients.add(client)
  return client
}

/** A client on the shared Redis, after a PING proved it answers. */
export async function connectShared(): Promise<Redis> {
  const client = connect()
  await waitForRedis(client, REDIS_URL)
  return client
}

/**
 * A client on the shared Redis through the devkit's TCP proxy, which the test can `blackhole()`:
 * commands then get no answer, as with a stalled server or a dead link (how the tests make Redis
 * calls time out for real). The client keeps REDIS_URL's credentials and database.
 */
export async function connectThroughProxy(options: RedisOptions = {}): Promise<{ proxy: TcpProxy; client: Redis }> {
  const url = new URL(REDIS_URL)
  const proxy = await startTcpProxy({ host: url.hostname.replace(/^\[(.*)\]$/, '$1'), port: url.port === '' ? 6379 : Number(url.port) })
  url.hostname = proxy.host
  url.port = String(proxy.port)
  return { proxy, client: connect(url.toString(), options) }
}

/** A Locker closed in afterAll. */
export function makeLocker(client: Redis, options: LockerOptions = {}): Locker {
  const locker = new Locker(client, options)
  lockers.add(locker)
  return locker
}

/** A resource name no other test uses: `<group>:<uuid>`, so its default group is `group`. */
export function resourceIn(group: string): string {
  return `${group}:${randomUUID()}`
}

/** A group name no other test uses (the metrics label, before the `:`). */
export function uniqueGroup(label: string): string {
  return `${label}-${randomUUID().slice(0, 8)}`
}

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))
