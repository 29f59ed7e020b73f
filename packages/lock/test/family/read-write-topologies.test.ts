/**
 * `locker.readWrite()` through Sentinel (a primary, 2 replicas, 3 Sentinels) and on a Redis
 * Cluster of 3 shards (ioredis `Cluster`): the same scripts over the same kind of client; on the
 * Cluster every key of a name shares its hash tag, so each script runs on the shard that owns it,
 * and names on every shard are used. The semantics are tested in depth on one Redis
 * (read-write.test.ts); here: readers share, a waiting writer stops new readers and then enters,
 * tokens as defined, a writer's lost key aborts its signal.
 */
import { startCluster, startSentinelSet, type ClusterSet, type SentinelSet } from '@fencelock/devkit/redis-topology'
import { Cluster, Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { LockLostError, LockTimeoutError, type Locker } from '../../src/index.js'
import { makeLocker, unique } from '../support/connections.js'
import { settle, waitUntil } from '../support/timing.js'

let sentinel: SentinelSet
let cluster: ClusterSet
const clients: (Redis | Cluster)[] = []

beforeAll(async () => {
  ;[sentinel, cluster] = await Promise.all([startSentinelSet(), startCluster()])
}, 90_000)
afterAll(async () => {
  for (const c of clients) c.disconnect()
  await Promise.all([sentinel?.dispose(), cluster?.dispose()])
})

function keep<T extends Redis | Cluster>(client: T): T {
  client.on('error', () => {})
  clients.push(client)
  return client
}

/** The scenario on one name, with two Lockers and a client that can delete a key. */
async function scenario(a: Locker, b: Locker, admin: Redis | Cluster, name: string): Promise<void> {
  const rw = a.readWrite(name)
  const w1 = await rw.usingWrite((w) => w.token)
  const r1 = await rw.read()
  const r2 = await b.readWrite(name).read({ waitMs: 0 })
  expect([r1.token, r2.token]).toEqual([w1, w1])
  const writing = b.readWrite(name).write({ waitMs: 20_000 })
  await waitUntil(async () => (await rw.inspect()).waitingWriters === 1, { what: 'the writer waits' })
  expect((await settle(rw.read({ waitMs: 150 }))).error).toBeInstanceOf(LockTimeoutError)
  await Promise.all([r1.release(), r2.release()])
  const w2 = await writing
  expect(w2.token).toBeGreaterThan(w1)
  await w2.release()
  const w3 = await rw.write({ ttlMs: 3_000, autoExtend: true })
  await admin.del(`fencelock:rw:{${name}}:writer`)
  await waitUntil(() => w3.signal.aborted, { what: 'the writer lost' })
  expect((w3.signal.reason as LockLostError).reason).toBe('not-owner')
}

describe('through Sentinel', () => {
  it('readers share, writer preference, tokens, a lost writer', async () => {
    const client = () => keep(new Redis({ sentinels: [...sentinel.sentinelAddresses], name: sentinel.name }))
    const admin = keep(new Redis({ port: (await sentinel.primary()).port }))
    await scenario(makeLocker(client()), makeLocker(client()), admin, unique('rw-sentinel'))
  })
})

describe('on a Cluster of 3 shards', () => {
  it('the same on a name of each shard, every key of a name in one slot', async () => {
    const client = () => keep(new Cluster([...cluster.nodes]))
    const admin = client()
    const a = makeLocker(client())
    const b = makeLocker(client())
    const byShard = new Map<number, string>()
    while (byShard.size < 3) {
      const name = unique('rw-cluster')
      byShard.set((await cluster.primaryOf(await cluster.keySlot(`fencelock:rw:{${name}}:writer`))).port, name)
    }
    for (const name of byShard.values()) {
      const slots = await Promise.all(
        ['writer', 'readers', 'writers', 'writer-leases', 'fence'].map((k) =>
          cluster.keySlot(`fencelock:rw:{${name}}:${k}`),
        ),
      )
      expect(new Set(slots).size).toBe(1)
      await scenario(a, b, admin, name)
    }
  })
})
