/**
 * Which clients the Locker takes (client/choose-client.ts), and the bad input around them: each
 * refused with InvalidLockOptionError naming the field and what it got, before any I/O (no
 * client here is ever connected).
 */
import { Redis } from 'ioredis'
import { Redis as Valkey } from 'iovalkey'
import { createClient, createCluster, createSentinel } from 'redis'
import { describe, expect, it } from 'vitest'
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

describe('the clients a Locker takes', () => {
  it('ioredis and iovalkey (lazy, not connected: a call makes them connect), one or a quorum of 3', () => {
    expect(new Locker(lazyIoredis()).nodes).toBe(1)
    expect(new Locker(lazyValkey()).nodes).toBe(1)
    expect(new Locker([lazyValkey(), lazyValkey(), lazyValkey()]).nodes).toBe(3)
    // ioredis and iovalkey share one API: one kind, they may be mixed.
    expect(new Locker([lazyIoredis(), lazyValkey(), lazyIoredis()]).nodes).toBe(3)
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

  it('node-redis cluster and sentinel clients: not supported yet, said so', () => {
    const cluster = createCluster({ rootNodes: [{ url: 'redis://127.0.0.1:1' }] })
    expect(refused(() => new Locker(cluster as unknown as SupportedRedisClient)).rule).toMatch(/node-redis cluster/)
    const sentinel = createSentinel({ name: 'm', sentinelRootNodes: [{ host: '127.0.0.1', port: 1 }] })
    expect(refused(() => new Locker(sentinel as unknown as SupportedRedisClient)).rule).toMatch(/node-redis sentinel/)
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

  it('a client of a kind the Locker does not know: names its class (a GLIDE client, say), or what it is', () => {
    class GlideClient {
      customCommand(): Promise<unknown> {
        return Promise.resolve(null)
      }
    }
    const glide = refused(() => new Locker(new GlideClient() as unknown as SupportedRedisClient))
    expect(glide.field).toBe('redis')
    expect(glide.message).toContain('an object of class GlideClient')
    expect(glide.rule).toMatch(/node-redis client/)
    expect(refused(() => new Locker({} as SupportedRedisClient)).message).toContain('a plain object')
    expect(refused(() => new Locker('redis://x' as unknown as SupportedRedisClient)).message).toContain('"redis://x"')
    const inQuorum = refused(
      () => new Locker([lazyIoredis(), new GlideClient(), lazyIoredis()] as unknown as SupportedRedisClient[]),
    )
    expect(inQuorum.field).toBe('redis[1]')
    expect(inQuorum.message).toContain('an object of class GlideClient')
  })
})
