/**
 * Bad input and faults of a highly available deployment (issue 21): on a Cluster, keys that could
 * span slots; through Sentinel, a master name the Sentinels do not know; `replicas` above the
 * replicas there are; no replica reachable. Each ends with a typed error that names the field or
 * the condition, within the caller's wait, and leaves nothing locked.
 */
import { startCluster, startSentinelSet, type ClusterSet, type SentinelSet } from '@fencelock/devkit/redis-topology'
import { Cluster, Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import {
  InvalidLockOptionError,
  LockReplicationError,
  LockUnavailableError,
  resourceKeys,
  type LockEvent,
} from '../src/index.js'
import { connect, makeLocker, unique } from './support/connections.js'
import { settle } from './support/timing.js'

const keysOf = (resource: string) => resourceKeys('fencelock:', resource)

describe('a Cluster client: every key of a resource in one slot', () => {
  let set: ClusterSet
  const clients: Cluster[] = []
  beforeAll(async () => {
    set = await startCluster()
  }, 60_000)
  afterAll(async () => {
    for (const c of clients) c.disconnect()
    await set?.dispose()
  })
  const cluster = (options: ConstructorParameters<typeof Cluster>[1] = {}) => {
    const c = new Cluster([...set.nodes], options)
    c.on('error', () => {})
    clients.push(c)
    return c
  }

  it("a prefix with '{' or '}' (it would move the hash tag off the resource) is refused before any I/O", () => {
    const lazy = cluster({ lazyConnect: true })
    for (const prefix of ['app{', 'app}:', '{tenant}:']) {
      let error: unknown
      try {
        makeLocker(lazy, { prefix })
      } catch (e) {
        error = e
      }
      expect(error).toBeInstanceOf(InvalidLockOptionError)
      expect(error).toMatchObject({ field: 'prefix' })
    }
    expect(lazy.status).toBe('wait') // nothing was sent
  })

  it("a resource starting with '}' (an empty hash tag: each key hashed whole, slots apart) is refused before any I/O", async () => {
    const lazy = cluster({ lazyConnect: true })
    const locker = makeLocker(lazy)
    const { error } = await settle(locker.acquire('}x'))
    expect(error).toBeInstanceOf(InvalidLockOptionError)
    expect(error).toMatchObject({ field: 'resource' })
    expect(lazy.status).toBe('wait')
    // Control: the keys such a name would make land in different slots.
    const slots = await Promise.all(Object.values(keysOf('}x')).map((k) => set.keySlot(k)))
    expect(new Set(slots).size).toBeGreaterThan(1)
  })

  it('resources with braces of their own keep all their keys in one slot (CLUSTER KEYSLOT) and lock on the Cluster', async () => {
    const locker = makeLocker(cluster())
    const admin = cluster()
    for (const name of ['a{b', 'a}b', '{a}', 'x{}y', '{{', 'a}{b}']) {
      const r = `${unique('brace')}${name}`
      const slots = new Set(await Promise.all(Object.values(keysOf(r)).map((k) => set.keySlot(k))))
      expect(slots.size).toBe(1)
      const lock = await locker.acquire(r, { waitMs: 2_000 })
      expect(await admin.exists(keysOf(r).lock)).toBe(1)
      expect(await lock.release()).toBe(true)
      expect(await admin.exists(keysOf(r).lock)).toBe(0)
    }
  })
})

describe('Sentinel: a master name that does not exist, replicas that are not there', () => {
  let set: SentinelSet
  beforeAll(async () => {
    set = await startSentinelSet()
  }, 60_000)
  afterAll(async () => {
    await set?.dispose()
  })
  const sentinelClient = (name: string) => {
    const client = new Redis({ sentinels: [...set.sentinelAddresses], name })
    client.on('error', () => {})
    return client
  }

  it("an unknown master name fails within the wait, not at commandTimeoutMs, with the Sentinels' answer as the cause", async () => {
    const client = sentinelClient('no-such-master')
    const events: LockEvent[] = []
    const locker = makeLocker(client, { commandTimeoutMs: 10_000, waitMs: 500, onEvent: (e) => events.push(e) })
    try {
      const { error, ms } = await settle(locker.acquire(unique('no-master')))
      expect(error).toBeInstanceOf(LockUnavailableError)
      expect(error).toMatchObject({ operation: 'acquire' })
      // The client's own error, which names the condition, is the cause (not a deadline).
      expect(String((error as Error).cause)).toMatch(/No such master with that name/)
      // Before: the first try sat in ioredis's offline queue for the whole commandTimeoutMs (10 s).
      expect(ms).toBeLessThan(5_000)
      const { error: tried } = await settle(locker.tryAcquire(unique('no-master')))
      expect(tried).toBeInstanceOf(LockUnavailableError)
      expect(events.filter((e) => e.type === 'acquired')).toEqual([])
    } finally {
      client.disconnect()
    }
  })

  it('replicas above the replicas there are: LockReplicationError naming how many are connected, nothing left locked', async () => {
    const client = sentinelClient(set.name)
    const admin = connect({ port: (await set.primary()).port })
    const locker = makeLocker(client, { replicas: 3, replicasTimeoutMs: 100 })
    try {
      const r = unique('too-many')
      const { error, ms } = await settle(locker.acquire(r, { waitMs: 400 }))
      expect(error).toBeInstanceOf(LockReplicationError)
      expect(error).toMatchObject({ replicas: 3, acknowledged: 2, connectedReplicas: 2, operation: 'acquire' })
      expect((error as Error).message).toMatch(/2 replicas connected, fewer than the option replicas \(3\)/)
      expect(ms).toBeLessThan(400 + 2_000)
      expect(await admin.exists(keysOf(r).lock)).toBe(0)
      // Control: as many as there are is met.
      const ok = makeLocker(client, { replicas: 2 })
      expect(await (await ok.acquire(unique('enough'))).release()).toBe(true)
    } finally {
      client.disconnect()
    }
  })

  it('no replica reachable (both stopped): LockReplicationError with connectedReplicas 0, nothing left locked; replicas 0 still grants', async () => {
    const client = sentinelClient(set.name)
    const admin = connect({ port: (await set.primary()).port })
    const locker = makeLocker(client, { replicas: 1, replicasTimeoutMs: 100 })
    const plain = makeLocker(client)
    try {
      await (await locker.acquire(unique('warm'))).release()
      for (const replica of set.servers.slice(1)) await replica.stop()
      const r = unique('no-replica')
      const { error } = await settle(locker.acquire(r, { waitMs: 300 }))
      expect(error).toBeInstanceOf(LockReplicationError)
      expect(error).toMatchObject({ replicas: 1, acknowledged: 0, connectedReplicas: 0 })
      expect((error as Error).message).toMatch(/no replica connected/)
      expect(await admin.exists(keysOf(r).lock)).toBe(0)
      expect(await (await plain.acquire(unique('plain'), { waitMs: 0 })).release()).toBe(true)
    } finally {
      client.disconnect()
    }
  })
})
