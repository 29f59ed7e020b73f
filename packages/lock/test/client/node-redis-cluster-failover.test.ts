/**
 * A shard's token counter that went back (its primary replaced by a replica that had not seen the
 * latest grants), on node-redis's Cluster client (client/node-redis-cluster.ts). INCR alone would
 * then mint a token already handed out — equal tokens are the same holder to the fence, so two
 * holders would both write. The adapter moves the connection's generation, so that the next grant
 * of each resource mints from the server clock too, on what node-redis shows of it: a node
 * client's lost connection (CLIENT KILL), a command sent again to the node a `MOVED` names (the
 * primary replaced without a dropped connection: `CLUSTER FAILOVER TAKEOVER`), the primary killed
 * with an acquire in flight. Each control runs the same steps with a Locker on the same kind of
 * client made blind to that mapping (a proxy that hides node-redis's node events, its
 * redirections and its new slot tables from the adapter): it hands out a token already handed out.
 * Real processes: a spawned Cluster of 3 primaries with a replica each, per test.
 */
import { freePort } from '@fencelock/devkit/net'
import { startCluster, type ClusterSet } from '@fencelock/devkit/redis-topology'
import type { RedisServer } from '@fencelock/devkit/redis-server'
import type { Redis } from 'ioredis'
import { afterAll, describe, expect, it } from 'vitest'
import {
  LockError,
  resourceKeys,
  type LockEvent,
  type NodeRedisCluster,
  type SupportedRedisClient,
} from '../../src/index.js'
import { createCluster } from 'redis'
import { clusterClientOf, nodeRedisCluster } from '../support/clients.js'
import { connect, makeLocker, unique } from '../support/connections.js'
import { startLatencyProxy } from '../support/latency-proxy.js'
import { settle, waitUntil } from '../support/timing.js'

const keysOf = (resource: string) => resourceKeys('fencelock:', resource)
const sets: ClusterSet[] = []
afterAll(async () => {
  await Promise.all(sets.map((s) => s.dispose()))
})

type Cluster = ReturnType<typeof nodeRedisCluster>

/** A Cluster client of `set`, once node-redis has found the cluster. */
async function readyCluster(set: ClusterSet): Promise<Cluster> {
  const cluster = nodeRedisCluster(set.nodes)
  await waitUntil(() => cluster.isReady, { timeoutMs: 15_000, what: 'the node-redis Cluster client' })
  return cluster
}

/**
 * `cluster` as the adapter would see it with the mapping removed: no node events, one attempt per
 * command whatever node-redis redirects (it routes and redirects inside), the slot table as it was.
 */
function blind(cluster: Cluster): NodeRedisCluster {
  const real = cluster as unknown as NodeRedisCluster
  const slots = real.slots
  const proxy: NodeRedisCluster = new Proxy(real, {
    get(target, property) {
      if (property === 'on' || property === 'off')
        return (event: string, listener: (...args: unknown[]) => void) => {
          if (!event.startsWith('node-')) target[property](event, listener)
          return proxy
        }
      if (property === 'slots') return slots
      if (property === '_execute')
        return (
          parser: { firstKey: string | undefined },
          _readonly: unknown,
          _options: unknown,
          fn: (node: { sendCommand(args: string[]): Promise<unknown> }) => Promise<unknown>,
        ) => fn({ sendCommand: (args) => target.sendCommand(parser.firstKey, false, args) })
      return Reflect.get(target, property, target) as unknown
    },
  })
  return proxy
}

/** Grants and releases `resource` `n` times on `locker`; the tokens, in order. */
async function grants(locker: ReturnType<typeof makeLocker>, resource: string, n: number): Promise<bigint[]> {
  const tokens: bigint[] = []
  for (let i = 0; i < n; i++) {
    const lock = await locker.acquire(resource, { waitMs: 10_000 })
    tokens.push(lock.token)
    await lock.release()
  }
  return tokens
}

/** A plain ioredis connection to one node. */
const admins = new Map<number, Redis>()
function node(server: { port: number }): Redis {
  let admin = admins.get(server.port)
  if (admin === undefined) {
    admin = connect({ port: server.port })
    admins.set(server.port, admin)
  }
  return admin
}

/** An ioredis Cluster client of `set` (another library: the Locker's own state plays no part). */
function clusterOf(set: ClusterSet): SupportedRedisClient {
  return clusterClientOf('ioredis', set.nodes)
}

/** Two resources whose slots the same primary owns, and that primary. */
async function twoOnOneShard(set: ClusterSet, label: string): Promise<[string, string, RedisServer]> {
  const first = unique(label)
  const primary = await set.primaryOf(await set.keySlot(keysOf(first).lock))
  for (;;) {
    const second = unique(label)
    if ((await set.primaryOf(await set.keySlot(keysOf(second).lock))).port === primary.port)
      return [first, second, primary]
  }
}

/** The replica of `primary` (CLUSTER REPLICAS). */
async function replicaOf(set: ClusterSet, primary: RedisServer): Promise<RedisServer> {
  const id = String(await node(primary).call('CLUSTER', 'MYID'))
  const lines = (await node(primary).call('CLUSTER', 'REPLICAS', id)) as string[]
  const port = Number(/:(\d+)@/.exec(lines[0] ?? '')?.[1])
  const replica = set.servers.find((s) => s.port === port)
  if (replica === undefined) throw new Error(`no replica of ${primary.port} in ${JSON.stringify(lines)}`)
  return replica
}

/** `cmdstat`-like counter of INFO errorstats, e.g. MOVED. */
async function errorCount(server: RedisServer, error: string): Promise<number> {
  const info = String(await node(server).call('INFO', 'errorstats'))
  return Number(new RegExp(`^errorstat_${error}:count=(\\d+)`, 'm').exec(info)?.[1] ?? 0)
}

describe('node-redis Cluster: a shard whose token counter went back', () => {
  it("node-redis connecting its pub/sub client (a first subscribe) while an acquire is in flight is no topology event: the grant is kept (a clean-clone CI run gave it back and a semaphore's tryAcquire failed)", async () => {
    const set = await startCluster()
    sets.push(set)
    const r = unique('nrc-pubsub')
    const primary = await set.primaryOf(await set.keySlot(keysOf(r).lock))
    const cluster = await readyCluster(set)
    const locker = makeLocker(cluster)
    await (await locker.acquire(r)).release()
    // Writes held on the slot's primary: the try waits there while node-redis opens its pub/sub
    // connection (its handshake is no write) and reports that node client ready.
    await node(primary).client('PAUSE', 500, 'WRITE')
    const tried = settle(locker.tryAcquire(r))
    let ready = 0
    const onReady = () => ready++
    cluster.on('node-ready', onReady)
    await cluster.subscribe(unique('nrc-pubsub-channel'), () => {})
    cluster.off('node-ready', onReady)
    expect(ready).toBeGreaterThan(0)
    const { value: lock, error } = await tried
    expect(error).toBeUndefined()
    expect(lock!.isHeld()).toBe(true)
    expect(await lock!.release()).toBe(true)
  }, 60_000)

  it("the shard primary's connections dropped (CLIENT KILL, no failover), the counter set back: the next grant mints above every token handed out before; control: blind to node events, it hands out one already handed out", async () => {
    const set = await startCluster()
    sets.push(set)
    const [r, rc, primary] = await twoOnOneShard(set, 'nrc-kill')
    const locker = makeLocker(await readyCluster(set))
    const control = makeLocker(blind(await readyCluster(set)))
    const before = await grants(locker, r, 5)
    const controlBefore = await grants(control, rc, 5)
    // The counters as a replica that saw only the first 2 grants holds them.
    await node(primary).set(keysOf(r).fence, String(before[1]), 'KEEPTTL')
    await node(primary).set(keysOf(rc).fence, String(controlBefore[1]), 'KEEPTTL')
    await node(primary).call('CLIENT', 'KILL', 'TYPE', 'normal', 'SKIPME', 'yes')

    const [after] = await grants(locker, r, 1)
    expect(after).toBeGreaterThan(before[4]!)
    // Control: the counter went on from where it was set back.
    const [controlAfter] = await grants(control, rc, 1)
    expect(controlAfter).toBe(controlBefore[2])
  }, 60_000)

  it('the slot moved to a replica without a dropped connection (CLUSTER FAILOVER TAKEOVER), its counter behind: the acquire node-redis redirects (MOVED) to it never returns a token already handed out; control: blind to the redirection, it does', async () => {
    const set = await startCluster()
    sets.push(set)
    const [r, rc, primary] = await twoOnOneShard(set, 'nrc-moved')
    const slot = await set.keySlot(keysOf(r).lock)
    const controlSlot = await set.keySlot(keysOf(rc).lock)
    const replica = await replicaOf(set, primary)
    const events: LockEvent[] = []
    const locker = makeLocker(await readyCluster(set), { onEvent: (e) => events.push(e) })
    const control = makeLocker(blind(await readyCluster(set)))
    const before = await grants(locker, r, 5)
    const controlBefore = await grants(control, rc, 5)
    expect(await node(primary).call('WAIT', 1, 5_000)).toBe(1)

    await node(replica).call('CLUSTER', 'FAILOVER', 'TAKEOVER')
    await waitUntil(
      async () =>
        (await set.primaryOf(slot)).port === replica.port &&
        (await set.primaryOf(controlSlot)).port === replica.port &&
        String(await node(primary).call('ROLE')).startsWith('slave'),
      { timeoutMs: 20_000, everyMs: 50, what: 'the replica took the slots over' },
    )
    // The new primary's counters as they stood after the first 2 grants.
    await node(replica).set(keysOf(r).fence, String(before[1]), 'KEEPTTL')
    await node(replica).set(keysOf(rc).fence, String(controlBefore[1]), 'KEEPTTL')
    const moved = await errorCount(primary, 'MOVED')

    const [after] = await grants(locker, r, 1)
    expect(after).toBeGreaterThan(before[4]!)
    const [controlAfter] = await grants(control, rc, 1)
    expect(controlAfter).toBe(controlBefore[2])
    // Both went to the old primary first (node-redis's table was stale) and were redirected.
    expect(await errorCount(primary, 'MOVED')).toBeGreaterThanOrEqual(moved + 2)
    expect(events.filter((e) => e.type === 'token-regressed')).toEqual([])
  }, 60_000)

  it("the slot's primary killed (SIGKILL) with an acquire in flight, its replica promoted with the counter behind: the acquire never returns a token already handed out, nor does the next grant; control: blind, the next grant is one already handed out", async () => {
    const set = await startCluster()
    sets.push(set)
    const [r, rc, primary] = await twoOnOneShard(set, 'nrc-inflight')
    const slot = await set.keySlot(keysOf(r).lock)
    const controlSlot = await set.keySlot(keysOf(rc).lock)
    const replica = await replicaOf(set, primary)
    const events: LockEvent[] = []
    // Long deadlines: the acquire must outlive the failover (cluster-node-timeout is 1 s).
    const locker = makeLocker(await readyCluster(set), { commandTimeoutMs: 20_000, onEvent: (e) => events.push(e) })
    const control = makeLocker(blind(await readyCluster(set)), { commandTimeoutMs: 20_000 })
    const before = await grants(locker, r, 3)
    const controlBefore = await grants(control, rc, 3)
    // The replica has the counters as they stand, then sees no more: it is frozen, cut off.
    expect(await node(primary).call('WAIT', 1, 5_000)).toBe(1)
    replica.pause()
    await node(primary).call('CLIENT', 'KILL', 'TYPE', 'replica')
    before.push(...(await grants(locker, r, 2)))
    controlBefore.push(...(await grants(control, rc, 2)))

    primary.pause()
    const inFlight = settle(locker.acquire(r, { waitMs: 30_000 }))
    primary.killNow()
    replica.resume()
    // The replica is promoted with the counters of the third grants (the test writes nothing on
    // it: the Locker may reach it at any time from here).
    await waitUntil(
      async () =>
        (await set.primaryOf(slot)).port === replica.port && (await set.primaryOf(controlSlot)).port === replica.port,
      { timeoutMs: 30_000, everyMs: 50, what: 'the replica promoted' },
    )
    expect(await node(replica).get(keysOf(rc).fence)).toBe(String(controlBefore[2]))

    const { value: lock, error, ms } = await inFlight
    console.info(
      `the acquire in flight: ${lock ? 'granted' : (error as Error).name} after ${ms.toFixed(0)} ms (kill -9, node-timeout 1 s)`,
    )
    if (lock !== undefined) {
      expect(lock.token).toBeGreaterThan(before[4]!)
      await lock.release()
    } else expect(error).toBeInstanceOf(LockError)
    const [next] = await grants(locker, r, 1)
    expect(next).toBeGreaterThan(before[4]!)
    if (lock !== undefined) expect(next).toBeGreaterThan(lock.token)
    // Control: the counter goes on from the promoted replica's, to the fourth grant's token.
    const [controlAfter] = await grants(control, rc, 1)
    expect(controlAfter).toBe(controlBefore[3])
    expect(events.filter((e) => e.type === 'token-regressed')).toEqual([])
  }, 90_000)
})

describe('node-redis Cluster: a root node that is down', () => {
  it("the Locker's first acquire, sent while node-redis discovers past dead root nodes, is granted (a discovery's error is no outage)", async () => {
    const set = await startCluster()
    sets.push(set)
    const dead = await freePort()
    // node-redis starts its discovery at a random root node: with 10 dead ones of 11, it meets one
    // first 10 times out of 11 (and when it does not, the test asserts the plain case).
    const cluster = createCluster({
      rootNodes: [
        ...Array.from({ length: 10 }, () => ({ socket: { host: '127.0.0.1', port: dead } })),
        { socket: { host: set.nodes[0]!.host, port: set.nodes[0]!.port } },
      ],
    })
    let errors = 0
    cluster.on('error', () => errors++)
    const connected = cluster.connect()
    try {
      const locker = makeLocker(cluster)
      const lock = await locker.acquire(unique('nrc-dead-root'), { waitMs: 5_000 })
      expect(lock.token).toBeGreaterThan(0n)
      await lock.release()
      await connected
      console.info(`discovery errors before the live root node: ${errors}`)
    } finally {
      cluster.destroy()
    }
  }, 60_000)
})

describe('node-redis Cluster: a reply lost to a dropped connection', () => {
  it('the acquire ran on the shard primary, its reply lost, the connection dropped (CLIENT KILL): node-redis does not send it again and the Locker gives the grant back — nothing is left held; control: a plain SET NX sent the same way stays held', async () => {
    const set = await startCluster()
    sets.push(set)
    const [r, plain, primary] = await twoOnOneShard(set, 'nrc-lost-reply')
    // node-redis reaches that primary through a proxy that can drop its replies.
    const proxy = await startLatencyProxy({ port: primary.port }, 0)
    const cluster = createCluster({
      rootNodes: [{ socket: { host: set.nodes[0]!.host, port: set.nodes[0]!.port } }],
      nodeAddressMap: (address: string) =>
        address === `127.0.0.1:${primary.port}` ? { host: '127.0.0.1', port: proxy.port } : undefined,
      defaults: { socket: { reconnectStrategy: (retries: number) => Math.min(retries * 20, 200) } },
    })
    cluster.on('error', () => {})
    await cluster.connect()
    try {
      const locker = makeLocker(cluster, { ttlMs: 30_000, commandTimeoutMs: 5_000 })
      await (await locker.acquire(r)).release() // scripts loaded, the connection settled
      const admin = node(primary)

      // Control first: a SET NX whose reply is lost stays held by nobody for its 30 s.
      const plainKey = keysOf(plain).lock
      let dropped = proxy.dropped
      proxy.blackhole('replies')
      const control = settle(cluster.sendCommand(plainKey, false, ['SET', plainKey, 'x', 'NX', 'PX', '30000']))
      await waitUntil(async () => (await admin.exists(plainKey)) === 1, { what: 'the SET ran on the server' })
      // Its reply reached the proxy and was dropped (one that came after the restore would be delivered).
      await waitUntil(() => proxy.dropped > dropped, { what: "the SET's reply dropped" })
      proxy.restore()
      await admin.call('CLIENT', 'KILL', 'TYPE', 'normal', 'SKIPME', 'yes')
      expect((await control).error).toBeInstanceOf(Error) // failed, not sent again
      expect(await admin.exists(plainKey)).toBe(1)

      const lockKey = keysOf(r).lock
      // One answer from that shard through node-redis: its connection to the primary is back (a
      // reconnection's handshake whose replies the blackhole below dropped would never end).
      await cluster.sendCommand(lockKey, false, ['EXISTS', lockKey])
      dropped = proxy.dropped
      proxy.blackhole('replies')
      const pending = settle(locker.acquire(r, { waitMs: 3_000 }))
      await waitUntil(async () => (await admin.exists(lockKey)) === 1, { what: 'the acquire ran on the server' })
      // Its reply dropped too: a stop-46 run restored the proxy before the reply reached it, the
      // grant was delivered, and the test's own release went out on the connection being killed.
      await waitUntil(() => proxy.dropped > dropped, { what: "the acquire's reply dropped" })
      proxy.restore()
      await admin.call('CLIENT', 'KILL', 'TYPE', 'normal', 'SKIPME', 'yes')
      const { value: lock } = await pending
      // Granted again after the give-back, or failed: either way nothing of it is left once released.
      if (lock !== undefined) expect(await lock.release()).toBe(true)
      await waitUntil(async () => (await admin.exists(lockKey)) === 0, { timeoutMs: 5_000, what: 'nothing left held' })
      const other = makeLocker(clusterOf(set))
      const next = await other.tryAcquire(r)
      expect(next).not.toBeNull()
      await next!.release()
    } finally {
      cluster.destroy()
    }
  }, 60_000)
})
