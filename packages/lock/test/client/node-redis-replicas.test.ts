/**
 * The `replicas` option through node-redis (`WAIT` on the connection that ran the script, through
 * the client seam's `connectionFor`): a node-redis client connected to the primary of a spawned
 * set (node-redis's Sentinel client, `createSentinel`, runs the Sentinel tests in replicas.test.ts).
 */
import { startSentinelSet, type SentinelSet } from '@fencelock/devkit/redis-topology'
import { afterAll, describe, expect, it } from 'vitest'
import { LockReplicationError, resourceKeys } from '../../src/index.js'
import { nodeRedisClient } from '../support/clients.js'
import { connect, makeLocker, unique } from '../support/connections.js'
import { settle, waitUntil } from '../support/timing.js'

const keysOf = (resource: string) => resourceKeys('fencelock:', resource)
let set: SentinelSet | undefined
afterAll(async () => {
  await set?.dispose()
})

describe('replicas through node-redis', () => {
  it('replicas: 1 — a grant returned is on a replica (lock and token counter); with the replicas frozen: LockReplicationError, nothing held; control: replicas 0 grants', async () => {
    set = await startSentinelSet()
    const primary = await set.primary()
    const client = nodeRedisClient(primary.port)
    await waitUntil(async () => client.isReady, { what: 'the node-redis client to be ready' })
    // Acknowledged within 2 s: far above a loaded machine's replication delay (WAIT's timeout).
    const safe = makeLocker(client, { replicas: 1, replicasTimeoutMs: 2_000, ttlMs: 5_000 })
    const r = unique('nr-repl')
    const lock = await safe.acquire(r)
    const replicas = set.servers.slice(1).map((s) => connect({ port: s.port }))
    const copies = await Promise.all(
      replicas.map(async (c) => ({ lock: await c.get(keysOf(r).lock), fence: await c.get(keysOf(r).fence) })),
    )
    expect(copies.some((copy) => copy.lock !== null && copy.fence === lock.token.toString())).toBe(true)
    await lock.extend(8_000)
    expect(await lock.release()).toBe(true)

    const admin = connect({ port: primary.port })
    const plain = makeLocker(nodeRedisClient(primary.port))
    // Frozen replicas never acknowledge: a short WAIT keeps the test short, whatever the load.
    const frozenSafe = makeLocker(client, { replicas: 1, replicasTimeoutMs: 200 })
    for (const replica of set.servers.slice(1)) replica.pause()
    try {
      const frozen = unique('nr-repl-frozen')
      const { error, ms } = await settle(frozenSafe.acquire(frozen, { waitMs: 1_000 }))
      expect(error).toBeInstanceOf(LockReplicationError)
      expect(error).toMatchObject({ replicas: 1, acknowledged: 0, operation: 'acquire' })
      expect(ms).toBeLessThan(1_000 + 2_000) // its wait, and a loaded machine's delays
      // The grant the replicas never acknowledged is given back (a compare-and-delete sent behind
      // the refusal, not awaited by it).
      await waitUntil(async () => (await admin.exists(keysOf(frozen).lock)) === 0, {
        timeoutMs: 3_000,
        what: 'the unreplicated grant to be given back',
      })
      const control = await plain.acquire(unique('nr-repl-control'), { waitMs: 2_000 })
      expect(await control.release()).toBe(true)
    } finally {
      for (const replica of set.servers.slice(1)) replica.resume()
    }
  })
})
