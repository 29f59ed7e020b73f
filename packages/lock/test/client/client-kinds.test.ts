/**
 * Which clients the Locker takes (client/choose-client.ts), and the bad input around them: each
 * refused with InvalidLockOptionError naming the field and what it got, before any I/O (no
 * client here is ever connected).
 */
import { GlideClient, GlideClusterClient } from '@valkey/valkey-glide'
import { Cluster, Redis } from 'ioredis'
import { Redis as Valkey } from 'iovalkey'
import { createClient, createCluster, createSentinel } from 'redis'
import { afterAll, describe, expect, it } from 'vitest'
import { InvalidLockOptionError, Locker, type SupportedRedisClient } from '../../src/index.js'

function refused(make: () => unknown): InvalidLockOptionError {
  let error: unknown
  try {
    make()
  } catch (e) {
    error = e
  }
  expect(error).toBeInstanceOf(InvalidLockOptionError)
  return error as InvalidLockOptionError
}

const lazyIoredis = () => new Redis({ lazyConnect: true, port: 1 })
const lazyValkey = () => new Valkey({ lazyConnect: true, port: 1 })
const glides: { close(): void }[] = []
/** GLIDE clients that connect on their first command (none is sent here): no server needed. */
async function lazyGlide(): Promise<GlideClient> {
  const client = await GlideClient.createClient({ addresses: [{ host: '127.0.0.1', port: 1 }], lazyConnect: true })
  glides.push(client)
  return client
}
async function lazyGlideCluster(): Promise<GlideClusterClient> {
  const client = await GlideClusterClient.createClient({
    addresses: [{ host: '127.0.0.1', port: 1 }],
    lazyConnect: true,
  })
  glides.push(client)
  return client
}
afterAll(() => {
  for (const client of glides) client.close()
})

describe('the clients a Locker takes', () => {
  it('ioredis and iovalkey (lazy, not connected: a call makes them connect), one or a quorum of 3', () => {
    expect(new Locker(lazyIoredis()).nodes).toBe(1)
    expect(new Locker(lazyValkey()).nodes).toBe(1)
    expect(new Locker([lazyValkey(), lazyValkey(), lazyValkey()]).nodes).toBe(3)
    // ioredis and iovalkey share one API: one kind, they may be mixed.
    expect(new Locker([lazyIoredis(), lazyValkey(), lazyIoredis()]).nodes).toBe(3)
  })

  it('a Valkey GLIDE GlideClient, one or a quorum of 3 (typed: no cast)', async () => {
    const locker: Locker = new Locker(await lazyGlide())
    expect(locker.nodes).toBe(1)
    expect(new Locker([await lazyGlide(), await lazyGlide(), await lazyGlide()]).nodes).toBe(3)
  })

  it('a node-redis client once connect() was called (typed: no cast)', () => {
    const client = createClient({ socket: { port: 1, reconnectStrategy: false } })
    client.on('error', () => {})
    const connecting = client.connect().catch(() => {})
    const locker: Locker = new Locker(client)
    expect(locker.nodes).toBe(1)
    void connecting
    client.destroy()
  })
})

describe('coalesceWrites: for ioredis and iovalkey Redis clients and GLIDE standalone clients (client/write-coalescing.ts, client/glide-batching.ts)', () => {
  it('accepted on an ioredis or iovalkey Redis and a GLIDE GlideClient, alone or in quorum mode; refused, naming the client, on an ioredis Cluster, a GLIDE cluster client and node-redis', async () => {
    const glide = await lazyGlide()
    const glides = [await lazyGlide(), await lazyGlide(), await lazyGlide()]
    for (const coalesceWrites of [true, false]) {
      expect(new Locker(lazyIoredis(), { coalesceWrites }).nodes).toBe(1)
      expect(new Locker([lazyValkey(), lazyIoredis(), lazyValkey()], { coalesceWrites }).nodes).toBe(3)
      expect(new Locker(glide, { coalesceWrites }).nodes).toBe(1)
      expect(new Locker(glides, { coalesceWrites }).nodes).toBe(3)
    }
    const cluster = new Cluster([{ host: '127.0.0.1', port: 1 }], { lazyConnect: true })
    cluster.on('error', () => {})
    const glideCluster = await lazyGlideCluster()
    // connect() called and nothing awaited since: open (its connection fails later, here).
    const nodeRedis = createClient({ socket: { port: 1, reconnectStrategy: false } })
    nodeRedis.on('error', () => {})
    const connecting = nodeRedis.connect().catch(() => {})
    const cases: [SupportedRedisClient | SupportedRedisClient[], RegExp][] = [
      [cluster, /an ioredis Cluster client is left as it is/],
      [glideCluster, /a GLIDE cluster client is left as it is/],
      [nodeRedis, /node-redis already writes the commands of a tick together/],
    ]
    for (const [client, why] of cases)
      for (const coalesceWrites of [true, false]) {
        const error = refused(() => new Locker(client, { coalesceWrites }))
        expect(error.field).toBe('coalesceWrites')
        expect(error.rule).toMatch(/^is for ioredis and iovalkey Redis clients and GLIDE standalone clients: /)
        expect(error.rule).toMatch(why)
      }
    // Not given: each client as it is, no error.
    expect(new Locker(cluster).nodes).toBe(1)
    expect(new Locker(glideCluster).nodes).toBe(1)
    expect(new Locker(nodeRedis).nodes).toBe(1)
    nodeRedis.destroy()
    await connecting
  })

  it('a value that is not a boolean is refused, naming the field', () => {
    for (const value of ['yes', 1, null, {}]) {
      const error = refused(() => new Locker(lazyIoredis(), { coalesceWrites: value as never }))
      expect(error.field).toBe('coalesceWrites')
      expect(error.rule).toBe('must be a boolean')
    }
  })
})

describe('clients the Locker refuses, before any I/O', () => {
  it('a node-redis client whose connect() was never called: the Locker does not connect it', () => {
    const client = createClient({ socket: { port: 1 } })
    const error = refused(() => new Locker(client))
    expect(error.field).toBe('redis')
    expect(error.rule).toMatch(/not connected: call client.connect\(\) first/)
    expect(client.isOpen).toBe(false)
    // In quorum mode too, naming the element.
    const open = createClient({ socket: { port: 1, reconnectStrategy: false } })
    open.on('error', () => {})
    void open.connect().catch(() => {})
    const second = createClient({ socket: { port: 1 } })
    const inQuorum = refused(() => new Locker([open, second, createClient({ socket: { port: 1 } })]))
    expect(inQuorum.field).toBe('redis[1]')
    open.destroy()
  })

  it('a node-redis cluster client (createCluster): accepted once connect() was called (typed: no cast, sharded pub/sub allowed), refused before — alone or in quorum mode', async () => {
    const cluster = createCluster({
      rootNodes: [{ socket: { host: '127.0.0.1', port: 1 } }],
      defaults: { socket: { reconnectStrategy: false } },
    })
    cluster.on('error', () => {})
    const error = refused(() => new Locker(cluster))
    expect(error.field).toBe('redis')
    expect(error.rule).toMatch(/node-redis cluster client that is not connected: call cluster.connect\(\) first/)
    expect(cluster.isOpen).toBe(false)
    const inQuorum = refused(() => new Locker([lazyIoredis(), cluster, lazyIoredis()]))
    expect(inQuorum.field).toBe('redis[1]')
    expect(cluster.isOpen).toBe(false)

    // connect() called (its discovery fails here, later): taken as it is, a Cluster.
    const connecting = cluster.connect().catch(() => {})
    const locker: Locker = new Locker(cluster, { pubsub: 'sharded' })
    expect(locker.nodes).toBe(1)
    await connecting
  })

  it('a node-redis sentinel client whose connect() was never called: the Locker does not connect it (typed without a cast)', () => {
    const sentinel = createSentinel({ name: 'm', sentinelRootNodes: [{ host: '127.0.0.1', port: 1 }] })
    const error = refused(() => new Locker(sentinel))
    expect(error.field).toBe('redis')
    expect(error.rule).toMatch(/node-redis sentinel client that is not connected: call sentinel.connect\(\) first/)
    expect(sentinel.isOpen).toBe(false)
  })

  it('a GLIDE cluster client (GlideClusterClient) alone (typed: no cast); in quorum mode it is refused, naming the element', async () => {
    const cluster = await lazyGlideCluster()
    const locker: Locker = new Locker(cluster)
    expect(locker.nodes).toBe(1)
    const [a, b] = [await lazyGlide(), await lazyGlide()]
    const inQuorum = refused(() => new Locker([a, cluster, b]))
    expect(inQuorum.field).toBe('redis[1]')
    expect(inQuorum.rule).toMatch(/not a GLIDE cluster client \(GlideClusterClient\)/)
    expect(inQuorum.message).toContain('a GLIDE cluster client')
  })

  it('an ioredis Cluster or a connected node-redis cluster client in quorum mode is refused too, naming the element and the kind (a quorum node is one master)', async () => {
    const ioredisCluster = new Cluster([{ host: '127.0.0.1', port: 1 }], { lazyConnect: true })
    ioredisCluster.on('error', () => {})
    const one = refused(() => new Locker([lazyIoredis(), lazyIoredis(), ioredisCluster]))
    expect(one.field).toBe('redis[2]')
    expect(one.rule).toMatch(/one Redis master: quorum mode takes independent masters, not an ioredis Cluster client/)
    expect(ioredisCluster.status).toBe('wait')
    const nodeCluster = createCluster({
      rootNodes: [{ socket: { host: '127.0.0.1', port: 1 } }],
      defaults: { socket: { reconnectStrategy: false } },
    })
    nodeCluster.on('error', () => {})
    const connecting = nodeCluster.connect().catch(() => {})
    const plain = () => createClient({ socket: { port: 1, reconnectStrategy: false } })
    const [a, b] = [plain(), plain()]
    for (const c of [a, b]) c.on('error', () => {})
    const connectingPlain = [a.connect().catch(() => {}), b.connect().catch(() => {})]
    const two = refused(() => new Locker([a, nodeCluster, b]))
    expect(two.field).toBe('redis[1]')
    expect(two.rule).toMatch(/not a node-redis cluster client \(createCluster\)/)
    await Promise.all([connecting, ...connectingPlain])
  })

  it('a GLIDE client whose configuration cannot be read (the Locker makes its pub/sub client from it)', async () => {
    const client = await lazyGlide()
    Object.defineProperty(client, 'config', { value: undefined })
    const error = refused(() => new Locker(client))
    expect(error.field).toBe('redis')
    expect(error.rule).toMatch(/configuration the Locker cannot read/)
  })

  it('GLIDE and another kind in quorum mode: names the element and both kinds', async () => {
    const glide = await lazyGlide()
    const error = refused(() => new Locker([lazyIoredis(), lazyIoredis(), glide]))
    expect(error.field).toBe('redis[2]')
    expect(error.rule).toMatch(/same kind as redis\[0\] \(ioredis\)/)
    expect(error.message).toContain('a glide client')
    const other = await lazyGlide()
    const first = refused(() => new Locker([glide, lazyIoredis(), other]))
    expect(first.field).toBe('redis[1]')
    expect(first.rule).toMatch(/same kind as redis\[0\] \(glide\)/)
  })

  it('mixed client kinds in quorum mode: names the element and both kinds', () => {
    const nodeRedis = createClient({ socket: { port: 1, reconnectStrategy: false } })
    nodeRedis.on('error', () => {})
    void nodeRedis.connect().catch(() => {})
    const error = refused(() => new Locker([lazyIoredis(), nodeRedis, lazyIoredis()]))
    expect(error.field).toBe('redis[1]')
    expect(error.rule).toMatch(/same kind as redis\[0\] \(ioredis\)/)
    expect(error.message).toContain('a node-redis client')
    nodeRedis.destroy()
  })

  it('a client of a kind the Locker does not know: names its class, or what it is', () => {
    class MemcachedClient {
      customCommand(): Promise<unknown> {
        return Promise.resolve(null)
      }
    }
    const unknownKind = refused(() => new Locker(new MemcachedClient() as unknown as SupportedRedisClient))
    expect(unknownKind.field).toBe('redis')
    expect(unknownKind.message).toContain('an object of class MemcachedClient')
    expect(unknownKind.rule).toMatch(/node-redis client/)
    expect(refused(() => new Locker({} as SupportedRedisClient)).message).toContain('a plain object')
    expect(refused(() => new Locker('redis://x' as unknown as SupportedRedisClient)).message).toContain('"redis://x"')
    const inQuorum = refused(
      () => new Locker([lazyIoredis(), new MemcachedClient(), lazyIoredis()] as unknown as SupportedRedisClient[]),
    )
    expect(inQuorum.field).toBe('redis[1]')
    expect(inQuorum.message).toContain('an object of class MemcachedClient')
  })
})
