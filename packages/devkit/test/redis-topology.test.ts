import { randomBytes } from 'node:crypto'
import { Cluster, Redis } from 'ioredis'
import { afterAll, describe, expect, it } from 'vitest'
import { stopAllRedisServers } from '../src/redis-server.js'
import { hashSlot, startCluster, startSentinelSet } from '../src/redis-topology.js'

const clients: (Redis | Cluster)[] = []
afterAll(async () => {
  for (const client of clients) client.disconnect()
  await stopAllRedisServers()
})

describe('the spawned topologies', () => {
  it('a Sentinel set: a primary, 2 replicas, 3 Sentinels; an ioredis Sentinel client writes to the primary; kill -9 of the primary promotes a replica', async () => {
    const set = await startSentinelSet({ downAfterMs: 1_000 })
    const client = new Redis({ sentinels: [...set.sentinelAddresses], name: set.name, maxRetriesPerRequest: null })
    client.on('error', () => {})
    clients.push(client)
    await client.set('k', 'v')
    const old = await set.primary()
    expect(old).toBe(set.servers[0])
    await old.stop()
    const promoted = await set.failedOver(old)
    expect(set.servers.slice(1)).toContain(promoted)
    // The client follows the Sentinels to the new primary; what was replicated is there.
    expect(await client.get('k')).toBe('v')
    await set.dispose()
  })

  it('a Cluster of 3 primaries with a replica each, every slot served, keys of one hash tag on one slot', async () => {
    const set = await startCluster()
    expect(set.servers).toHaveLength(6)
    const cluster = new Cluster([...set.nodes])
    cluster.on('error', () => {})
    clients.push(cluster)
    const slots = new Set<number>()
    for (const tag of ['a', 'b', 'c', 'd', 'e', 'f']) slots.add(await set.keySlot(`fencelock:{${tag}}:lock`))
    const owners = new Set(await Promise.all([...slots].map(async (slot) => (await set.primaryOf(slot)).port)))
    expect(owners.size).toBeGreaterThan(1)
    expect(await set.keySlot('fencelock:{x}:lock')).toBe(await set.keySlot('fencelock:{x}:fence'))
    // The slot computed here is the one every node computes: hash tags, an empty one, one never
    // closed, two of them, bytes beyond ASCII, the empty key, and random keys.
    const keys = [
      '',
      'a',
      '{}',
      '{}x',
      'x{}y',
      '{a',
      'a}',
      'a{b}c',
      '{a}{b}',
      '{{a}}',
      'é',
      'fencelock:{ключ}:lock',
      '😀',
    ]
    for (let i = 0; i < 200; i++) keys.push(randomBytes(1 + (i % 20)).toString('latin1'))
    const admin = new Redis({ host: '127.0.0.1', port: set.servers[0]!.port })
    clients.push(admin)
    for (const key of keys) expect(hashSlot(key), JSON.stringify(key)).toBe(await admin.cluster('KEYSLOT', key))
    await cluster.set('fencelock:{x}:lock', 'v')
    expect(await cluster.get('fencelock:{x}:lock')).toBe('v')
    await set.dispose()
  })
})
