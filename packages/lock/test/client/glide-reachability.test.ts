/**
 * The GLIDE adapter's probes (src/client/glide-reachability.ts) on their own: bounded (not one
 * probe per call), shared while one is in flight, "down" only on a refusal of every address, and
 * never on an address that accepts. The addresses are real TCP listeners of this file (counting
 * the connections they accept) and a port nothing listens on; the calls are GLIDE's own error
 * classes or promises that never settle, as a Redis that answers nothing leaves them.
 */
import { createServer, type Server } from 'node:net'
import { ConnectionError, RequestError, TimeoutError } from '@valkey/valkey-glide'
import { freePort } from '@fencelock/devkit/net'
import { afterAll, describe, expect, it } from 'vitest'
import { Reachability, SILENCE_PROBE_MS, type ProbeAddress } from '../../src/client/glide-reachability.js'
import { sleep, waitUntil } from '../support/timing.js'

const servers: Server[] = []
afterAll(async () => {
  await Promise.all(servers.map((s) => new Promise((resolve) => s.close(resolve))))
})

/** A TCP listener that counts the connections it accepts (and closes each). */
async function countingListener(): Promise<{ address: ProbeAddress; accepted: () => number }> {
  let accepted = 0
  const server = createServer((socket) => {
    accepted++
    socket.destroy()
  })
  servers.push(server)
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as { port: number }
  return { address: { host: '127.0.0.1', port }, accepted: () => accepted }
}

function watch(addresses: readonly ProbeAddress[]) {
  const heard = { down: [] as Error[], up: 0 }
  const reachability = new Reachability(() => addresses, {
    down: (error) => heard.down.push(error),
    up: () => heard.up++,
  })
  return { reachability, heard }
}

const never = () => new Promise<never>(() => {})

describe('GLIDE probes', () => {
  it('500 calls unanswered for 1 s: a handful of probes (one per silence period), not one per call; an accepting address is never down', async () => {
    const listener = await countingListener()
    const { reachability, heard } = watch([listener.address])
    for (let i = 0; i < 500; i++) void reachability.track(never())
    await sleep(1_000) // the period under test, not a synchronisation
    const probes = listener.accepted()
    expect(probes).toBeGreaterThanOrEqual(1)
    expect(probes).toBeLessThanOrEqual(1_000 / SILENCE_PROBE_MS + 1)
    expect(reachability.down).toBeUndefined()
    expect(heard.down).toEqual([])
    reachability.stop()
  })

  it('control: calls answered meanwhile — no probe at all', async () => {
    const listener = await countingListener()
    const { reachability } = watch([listener.address])
    const until = performance.now() + 1_000
    while (performance.now() < until) {
      void reachability.track(never())
      await reachability.track(sleep(20))
    }
    expect(listener.accepted()).toBe(0)
  })

  it("100 calls failing at once with GLIDE's TimeoutError share one probe; a server's error reply starts none", async () => {
    const listener = await countingListener()
    const { reachability } = watch([listener.address])
    await Promise.all(
      Array.from({ length: 100 }, () =>
        reachability.track(Promise.reject(new TimeoutError('timed out'))).catch(() => {}),
      ),
    )
    await waitUntil(() => listener.accepted() === 1, { what: 'the one probe' })
    await reachability.probe()
    const before = listener.accepted()
    const reply = "An error was signalled by the server: - ResponseError: wrong number of arguments for 'get' command"
    await reachability.track(Promise.reject(new RequestError(reply))).catch(() => {})
    await sleep(50)
    expect(listener.accepted()).toBe(before)
  })

  it("an error GLIDE's core raised itself (a cluster client with every node gone: `Connection in recovery`) starts a probe; none sooner than 200 ms after the last", async () => {
    const listener = await countingListener()
    const { reachability } = watch([listener.address])
    await reachability.track(Promise.reject(new RequestError('Connection in recovery- ClientError'))).catch(() => {})
    await waitUntil(() => listener.accepted() === 1, { what: 'the probe' })
    await reachability.probe()
    const t = performance.now()
    await reachability.track(Promise.reject(new RequestError('Connection in recovery- ClientError'))).catch(() => {})
    if (performance.now() - t < SILENCE_PROBE_MS - 50) expect(listener.accepted()).toBe(1)
    await waitUntil(
      async () => {
        await reachability.track(Promise.reject(new ConnectionError('lost'))).catch(() => {})
        return listener.accepted() === 2
      },
      { what: 'a probe once the spacing has passed' },
    )
  })

  it('a ConnectionError with every address refusing: down, the ECONNREFUSED error reported; up again once an address accepts', async () => {
    const port = await freePort()
    const { reachability, heard } = watch([{ host: '127.0.0.1', port }])
    await reachability.track(Promise.reject(new ConnectionError('lost'))).catch(() => {})
    await waitUntil(() => reachability.down !== undefined, { what: 'down' })
    expect((reachability.down as NodeJS.ErrnoException).code).toBe('ECONNREFUSED')
    expect(heard.down).toHaveLength(1)
    const server = createServer((socket) => socket.destroy())
    servers.push(server)
    await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve))
    await waitUntil(() => heard.up === 1, { what: 'up again (rechecked every 250 ms)' })
    expect(reachability.down).toBeUndefined()
    reachability.stop()
  })

  it('one address refusing and one accepting: not down (a cluster with a node gone)', async () => {
    const listener = await countingListener()
    const { reachability, heard } = watch([{ host: '127.0.0.1', port: await freePort() }, listener.address])
    await reachability.track(Promise.reject(new ConnectionError('lost'))).catch(() => {})
    await reachability.probe()
    await waitUntil(() => listener.accepted() >= 1, { what: 'the probe' })
    expect(reachability.down).toBeUndefined()
    expect(heard.down).toEqual([])
  })
})
