/**
 * A failover to a replica that had not yet seen the latest grants hands the new primary an older
 * token counter. INCR alone would then mint a token already handed out — equal tokens are the
 * same holder to the fence, so two holders would both write. The first grant of each resource
 * after the client (re)connects mints from the server clock too, which lies far above a counter
 * that grows by one per grant. Shown on a real redis-server: the counter is set back to what the
 * lagging replica had, and the client really reconnects (CLIENT KILL).
 */
import { describe, expect, it } from 'vitest'
import { resourceKeys } from '../src/index.js'
import { connect, makeLocker, ready, unique } from './support/connections.js'
import { waitUntil } from './support/timing.js'
import { startLatencyProxy } from './support/latency-proxy.js'
import { useScriptedServer } from './support/scripted-server.js'

const env = useScriptedServer()
const prefix = 'fencelock:'

/** Grants and releases `resource` `n` times; the tokens, in order. */
async function grants(locker: ReturnType<typeof env.lockerOn>, resource: string, n: number): Promise<bigint[]> {
  const tokens: bigint[] = []
  for (let i = 0; i < n; i++) {
    const lock = await locker.acquire(resource)
    tokens.push(lock.token)
    await lock.release()
  }
  return tokens
}

/** The counter as a replica that saw only the first `seen` grants holds it. */
async function setCounterBack(resource: string, tokens: bigint[], seen: number): Promise<void> {
  await env.admin.set(resourceKeys(prefix, resource).fence, String(tokens[seen - 1]), 'KEEPTTL')
}

describe('a token counter that went back (a failover to a lagging replica)', () => {
  it('after the client reconnects, the next grant mints above every token handed out before', async () => {
    const locker = env.lockerOn()
    const resource = unique('failover')
    const before = await grants(locker, resource, 5)
    await setCounterBack(resource, before, 2)
    // Every other connection is killed, as a failover does; ioredis reconnects.
    await env.admin.call('CLIENT', 'KILL', 'TYPE', 'normal', 'SKIPME', 'yes')
    const after = await grants(locker, resource, 4)
    expect(after[0]).toBeGreaterThan(before[4]!)
    // Strictly increasing; and once the connection has settled, plain INCR again (the closing and
    // the reconnection are two generations, so up to two grants mint from the clock).
    for (let i = 1; i < after.length; i++) expect(after[i]).toBeGreaterThan(after[i - 1]!)
    expect(after[3]).toBe(after[2]! + 1n)
  })

  it('control: without a reconnection the counter goes on from where it was set back — a token already handed out', async () => {
    const locker = env.lockerOn()
    const resource = unique('failover')
    const before = await grants(locker, resource, 5)
    await setCounterBack(resource, before, 2)
    const [after] = await grants(locker, resource, 1)
    expect(after).toBe(before[2])
  })

  it('a cluster topology change (+node, -node) counts as a reconnection', async () => {
    const client = connect({ port: env.server.port })
    const locker = makeLocker(client)
    const resource = unique('failover')
    const before = await grants(locker, resource, 5)
    await setCounterBack(resource, before, 2)
    client.emit('-node')
    const [after] = await grants(locker, resource, 1)
    expect(after).toBeGreaterThan(before[4]!)
  })

  it('a try in flight when the connection drops, sent again by ioredis to the new primary, does not come back with a token already handed out', async () => {
    const resource = unique('failover')
    const direct = env.lockerOn()
    const before = await grants(direct, resource, 5)
    // 250 ms each way: the try is still in the proxy when the server drops the connection.
    const proxy = await startLatencyProxy({ port: env.server.port }, 250)
    try {
      const client = connect({ port: proxy.port })
      await ready(client, `proxy ${proxy.port}`)
      const far = makeLocker(client, { commandTimeoutMs: 5_000 })
      // One grant on this settled connection, so that the next try needs no reseed.
      const seeded = await grants(far, resource, 1)
      const inFlight = far.acquire(resource, { waitMs: 10_000 })
      await new Promise((resolve) => setTimeout(resolve, 100))
      // The failover: every connection dropped, and the new primary's counter is behind.
      await env.admin.call('CLIENT', 'KILL', 'TYPE', 'normal', 'SKIPME', 'yes')
      await setCounterBack(resource, before, 2)
      const lock = await inFlight
      expect(lock.token).toBeGreaterThan(seeded[0]!)
      expect(lock.token).toBeGreaterThan(before[4]!)
      await lock.release()
    } finally {
      await proxy.close()
    }
  })

  it('a reply lost to a reconnect: the resent acquire finds its own grant and it is not orphaned (the acquire succeeds, nothing is left held)', async () => {
    const resource = unique('lost-reply')
    const lockKey = resourceKeys(prefix, resource).lock
    const proxy = await startLatencyProxy({ port: env.server.port }, 0)
    try {
      const client = connect({ port: proxy.port })
      await ready(client, `proxy ${proxy.port}`)
      const far = makeLocker(client, { ttlMs: 30_000, commandTimeoutMs: 5_000 })
      await (await far.acquire(unique('warm'))).release() // scripts loaded
      const dropped = proxy.dropped
      proxy.blackhole('replies') // the acquire runs on the server; its reply is lost
      const pending = far.acquire(resource, { waitMs: 3_000 })
      await waitUntil(async () => (await env.admin.exists(lockKey)) === 1, { what: 'the acquire ran on the server' })
      // The reply reached the proxy and was dropped (one that came after the restore would be delivered).
      await waitUntil(() => proxy.dropped > dropped, { what: "the acquire's reply dropped" })
      proxy.restore()
      // The connection drops with the reply lost; ioredis resends the acquire on the new one.
      await env.admin.call('CLIENT', 'KILL', 'TYPE', 'normal', 'SKIPME', 'yes')
      const lock = await pending
      await lock.release()
      // Nothing is left in anyone's name: another locker takes it at once.
      const next = await env.lockerOn().tryAcquire(resource)
      expect(next).not.toBeNull()
      await next!.release()
    } finally {
      await proxy.close()
    }
  })
})
