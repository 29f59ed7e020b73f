import { Redis } from 'ioredis'
import { afterAll, describe, expect, it } from 'vitest'
import { answersPing, freePort } from '../src/net.js'
import { startRedisServer, stopAllRedisServers } from '../src/redis-server.js'
import { sharedRedisUrl, waitForRedis } from '../src/redis-url.js'
import { closeAllProxies, startTcpProxy } from '../src/tcp-proxy.js'

const clients: Redis[] = []
afterAll(async () => {
  for (const client of clients) client.disconnect()
  await closeAllProxies()
  await stopAllRedisServers()
})

function connect(port: number): Redis {
  const client = new Redis({ port, maxRetriesPerRequest: null, retryStrategy: (times) => Math.min(times * 20, 200) })
  client.on('error', () => {})
  clients.push(client)
  return client
}

const alive = (pid: number) => {
  try {
    process.kill(pid, 0)
    return true
  } catch {
    return false
  }
}

const within = <T>(promise: Promise<T>, ms: number) =>
  Promise.race([promise.then(() => 'answered'), new Promise((resolve) => setTimeout(() => resolve('silent'), ms))])

describe('the spawned redis-server', () => {
  it('runs with its wall clock shifted by the clock shim: TIME is ahead, TTLs still run at the right rate', async () => {
    const ahead = await startRedisServer({ clockOffsetMs: 3_000 })
    const behind = await startRedisServer({ clockOffsetMs: -2_000 })
    const seconds = async (server: typeof ahead) => {
      const client = connect(server.port)
      await waitForRedis(client, server.url)
      const [s, us] = (await client.time()) as [string | number, string | number]
      return { client, offset: Number(s) * 1000 + Math.floor(Number(us) / 1000) - Date.now() }
    }
    const a = await seconds(ahead)
    const b = await seconds(behind)
    expect(a.offset).toBeGreaterThan(2_900)
    expect(a.offset).toBeLessThan(3_500)
    expect(b.offset).toBeLessThan(-1_900)
    expect(b.offset).toBeGreaterThan(-2_500)
    // Expiry is measured on the same shifted clock, so a TTL is a TTL.
    await a.client.set('k', 'v', 'PX', 1_000)
    const pttl = await a.client.pttl('k')
    expect(pttl).toBeGreaterThan(900)
    expect(pttl).toBeLessThanOrEqual(1_000)
    await ahead.dispose()
    await behind.dispose()
  })

  it('starts on a free port with debug allowed, pauses, resumes, restarts on the same port empty, and leaves no process', async () => {
    const server = await startRedisServer()
    const client = connect(server.port)
    await waitForRedis(client, server.url)
    expect(await client.debug('SLEEP', 0)).toBe('OK') // --enable-debug-command local
    expect(await client.config('GET', 'save')).toEqual(['save', ''])
    await client.set('k', 'v')

    server.pause()
    expect(await within(client.ping(), 150)).toBe('silent')
    server.resume()
    await waitForRedis(client, server.url)

    const { port, pid } = server
    await server.restart()
    expect(server.port).toBe(port)
    expect(server.pid).not.toBe(pid)
    expect(alive(pid)).toBe(false)
    await waitForRedis(client, server.url)
    expect(await client.get('k')).toBeNull() // nothing persisted

    const last = server.pid
    server.pause() // a stopped process must die too
    await server.dispose()
    expect(alive(last)).toBe(false)
    expect(await answersPing('127.0.0.1', port)).toBe(false)
  })

  it('fails loudly, never skips, when a Redis does not answer', async () => {
    const nobody = new Redis({ port: await freePort(), lazyConnect: true, maxRetriesPerRequest: null, retryStrategy: () => 50 })
    nobody.on('error', () => {})
    try {
      await expect(waitForRedis(nobody, 'redis://127.0.0.1:1', 300)).rejects.toThrow(/did not answer PING within 300 ms.*never skip/)
    } finally {
      nobody.disconnect()
    }
  })

  it('takes REDIS_URL as the shared Redis, else the machine one', () => {
    const saved = process.env.REDIS_URL
    try {
      delete process.env.REDIS_URL
      expect(sharedRedisUrl()).toBe('redis://127.0.0.1:6379')
      process.env.REDIS_URL = 'redis://example:7000'
      expect(sharedRedisUrl()).toBe('redis://example:7000')
    } finally {
      if (saved === undefined) delete process.env.REDIS_URL
      else process.env.REDIS_URL = saved
    }
  })
})

describe('the TCP proxy', () => {
  it('delays each way, blackholes calls without closing the connection, and forwards again on restore', async () => {
    const server = await startRedisServer()
    const proxy = await startTcpProxy({ port: server.port }, { delayMs: 40 })
    const client = connect(proxy.port)
    await waitForRedis(client, 'proxy')

    const started = performance.now()
    await client.ping()
    expect(performance.now() - started).toBeGreaterThanOrEqual(75) // 40 ms there, 40 ms back

    const before = proxy.dropped
    proxy.blackhole()
    expect(await within(client.ping(), 300)).toBe('silent') // dropped: it will never be answered
    expect(client.status).toBe('ready') // the connection stays open, as with a stalled server
    expect(proxy.dropped).toBeGreaterThan(before) // counted, so a test can wait for a reply to be lost
    proxy.restore()
    const fresh = connect(proxy.port)
    expect(await fresh.ping()).toBe('PONG')
    await proxy.close()
  })

  it('holds every byte during a partition and delivers them in order when it heals: the connection carries on', async () => {
    const server = await startRedisServer()
    const proxy = await startTcpProxy({ port: server.port })
    const client = connect(proxy.port)
    await waitForRedis(client, 'proxy')
    proxy.partition()
    const during = client.incr('partitioned')
    expect(await within(during, 300)).toBe('silent')
    expect(client.status).toBe('ready')
    proxy.heal()
    expect(await during).toBe(1)
    expect(await client.incr('partitioned')).toBe(2)
    await proxy.close()
  })
})
