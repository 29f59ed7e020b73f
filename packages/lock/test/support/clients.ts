/**
 * Clients of every library the Locker takes, for the tests that run on each (the contract suites
 * over test/contract/deployments.ts, the node-redis faults). Every client made here is closed in
 * `afterAll` of the test file. Each reconnects fast (a restarted server is back in ~20 ms) and
 * swallows its `error` events: the tests assert outcomes instead.
 */
import { GlideClient, GlideClusterClient, Logger } from '@valkey/valkey-glide'
import { Cluster, Redis } from 'ioredis'
import { Redis as Valkey } from 'iovalkey'
import { createClient, createCluster, createSentinel } from 'redis'
import { afterAll } from 'vitest'
import type { SupportedRedisClient } from '../../src/index.js'
import { connect } from './connections.js'

/** The client libraries under test: ioredis (the default everywhere else), its fork iovalkey, node-redis, GLIDE. */
export type ClientLibrary = 'ioredis' | 'iovalkey' | 'node-redis' | 'glide'

/** The libraries the contract suites run on besides ioredis (which the suites' own files cover). */
export const OTHER_CLIENT_LIBRARIES = ['node-redis', 'iovalkey', 'glide'] as const satisfies readonly ClientLibrary[]

// GLIDE's core logs every timed-out or refused request as a warning on stdout; the tests assert outcomes.
Logger.setLoggerConfig('off')

/** What closing a node-redis client needs (its full generic type varies with its options). */
interface NodeRedis {
  readonly isOpen: boolean
  destroy(): void
}

const valkeys = new Set<Valkey>()
const glides = new Set<GlideClient | GlideClusterClient>()
/** The GLIDE client of each port, made by {@link prepareClients} (GLIDE creates its clients asynchronously). */
const glideByPort = new Map<number, GlideClient>()
const nodeRedises = new Set<NodeRedis>()
/** The never-connected node-redis client each port's clients are duplicates of ({@link nodeRedisClient}). */
const nodeRedisTemplates = new Map<number, ReturnType<typeof createClient>>()
const nodeRedisSentinels = new Set<{ readonly isOpen: boolean; destroy(): Promise<void> }>()
const ioredisSentinels = new Set<Redis>()
const nodeRedisClusters = new Set<{ readonly isOpen: boolean; destroy(): void }>()
const ioredisClusters = new Set<Cluster>()

/**
 * A node-redis client to 127.0.0.1:`port`, `connect()` called (not awaited: its commands wait in
 * its offline queue until it is ready, as a user's would).
 */
export function nodeRedisClient(port: number, options: { connect?: boolean } = {}) {
  // A duplicate of one (never connected) client per port: node-redis builds its client class anew
  // for options unlike the last client's (~55 ms of CPU here), so clients of 3 nodes made in turn
  // paid that each time (a 20-Locker quorum test spent 2.7 s before its first grant); a duplicate
  // reuses its original's class.
  let template = nodeRedisTemplates.get(port)
  if (template === undefined) {
    template = createClient({
      socket: { host: '127.0.0.1', port, reconnectStrategy: (retries) => Math.min(retries * 20, 200) },
    })
    nodeRedisTemplates.set(port, template)
  }
  const client = template.duplicate()
  client.on('error', () => {})
  nodeRedises.add(client)
  if (options.connect !== false) client.connect().catch(() => {})
  return client
}

/** Where a Sentinel set's Sentinels are, and the master name they watch. */
export interface SentinelAddresses {
  readonly name: string
  readonly sentinelAddresses: readonly { host: string; port: number }[]
}

/**
 * A node-redis Sentinel client (`createSentinel`) of `set`, `connect()` called (not awaited: its
 * commands wait for the connection, as a user's would). Its master client reconnects fast.
 */
export function nodeRedisSentinel(set: SentinelAddresses) {
  const sentinel = createSentinel({
    name: set.name,
    sentinelRootNodes: [...set.sentinelAddresses],
    nodeClientOptions: { socket: { reconnectStrategy: (retries: number) => Math.min(retries * 20, 200) } },
  })
  sentinel.on('error', () => {})
  nodeRedisSentinels.add(sentinel)
  sentinel.connect().catch(() => {})
  return sentinel
}

/** A Sentinel client of `library` (ioredis or node-redis) to `set`. */
export function sentinelClientOf(library: 'ioredis' | 'node-redis', set: SentinelAddresses): SupportedRedisClient {
  if (library === 'node-redis') return nodeRedisSentinel(set)
  const client = new Redis({ sentinels: [...set.sentinelAddresses], name: set.name })
  client.on('error', () => {})
  ioredisSentinels.add(client)
  return client
}

/** Whether a Sentinel client of {@link sentinelClientOf} is connected to a primary and ready for commands. */
export function sentinelClientReady(client: SupportedRedisClient): boolean {
  if (client instanceof Redis) return client.status === 'ready'
  const sentinel = client as { isReady?: boolean; getMasterNode?: () => unknown }
  return sentinel.isReady === true && sentinel.getMasterNode?.() !== undefined
}

/** The libraries whose Sentinel client the Locker takes. */
export const SENTINEL_CLIENT_LIBRARIES = ['ioredis', 'node-redis'] as const satisfies readonly ClientLibrary[]

/** The libraries whose Cluster client the Locker takes. */
export const CLUSTER_CLIENT_LIBRARIES = ['ioredis', 'node-redis', 'glide'] as const satisfies readonly ClientLibrary[]

/**
 * The libraries cluster-pubsub.test.ts runs on (their Cluster clients made at once by
 * {@link clusterClientOf}); GLIDE's sharded and classic wakes are tested in glide-cluster.test.ts.
 */
export const CLUSTER_PUBSUB_LIBRARIES = ['ioredis', 'node-redis'] as const satisfies readonly ClientLibrary[]

/**
 * A node-redis Cluster client (`createCluster`) of `nodes`, `connect()` called (not awaited: its
 * commands fail until the first discovery is done, so callers wait for {@link clusterClientReady}).
 * Its node clients reconnect fast, and a node that keeps failing makes it re-read the slot table
 * after 500 ms (node-redis's default: 5 s).
 */
export function nodeRedisCluster(nodes: readonly { host: string; port: number }[]) {
  const cluster = createCluster({
    rootNodes: nodes.map((n) => ({ socket: { host: n.host, port: n.port } })),
    defaults: { socket: { reconnectStrategy: (retries: number) => Math.min(retries * 20, 200) } },
    topologyRefreshOnReconnectionAttemptStrategy: 500,
  })
  cluster.on('error', () => {})
  nodeRedisClusters.add(cluster)
  cluster.connect().catch(() => {})
  return cluster
}

/** A Cluster client of `library` (ioredis or node-redis) to `nodes`. */
export function clusterClientOf(
  library: 'ioredis' | 'node-redis',
  nodes: readonly { host: string; port: number }[],
): SupportedRedisClient {
  if (library === 'node-redis') return nodeRedisCluster(nodes)
  const client = new Cluster([...nodes])
  client.on('error', () => {})
  ioredisClusters.add(client)
  return client
}

/** Whether a Cluster client of {@link clusterClientOf} has found the cluster and is ready for commands. */
export function clusterClientReady(client: SupportedRedisClient): boolean {
  if (client instanceof Cluster) return client.status === 'ready'
  return (client as { isReady?: boolean }).isReady === true
}

/** An iovalkey client to 127.0.0.1:`port`. */
export function valkeyClient(port: number): Valkey {
  const client = new Valkey({ host: '127.0.0.1', port, retryStrategy: (times) => Math.min(times * 20, 200) })
  client.on('error', () => {})
  valkeys.add(client)
  return client
}

/**
 * A GLIDE client to 127.0.0.1:`port`, connected (GLIDE connects as it creates the client). Its
 * `requestTimeout` is above every test's `commandTimeoutMs`: the Locker's deadlines decide.
 */
export async function glideClient(port: number, options: { requestTimeoutMs?: number } = {}): Promise<GlideClient> {
  const client = await GlideClient.createClient({
    addresses: [{ host: '127.0.0.1', port }],
    requestTimeout: options.requestTimeoutMs ?? 10_000,
    // Reconnects fast: at most 20 ms × 2^4 between tries (a restarted server is back in ~20 ms).
    connectionBackoff: { numberOfRetries: 4, factor: 20, exponentBase: 2 },
  })
  glides.add(client)
  return client
}

/**
 * A GLIDE cluster client to the Cluster of `nodes` (its startup nodes), connected; the same
 * `requestTimeout` and fast reconnection as {@link glideClient}.
 */
export async function glideClusterClient(
  nodes: readonly { host: string; port: number }[],
): Promise<GlideClusterClient> {
  const client = await GlideClusterClient.createClient({
    addresses: [...nodes],
    requestTimeout: 10_000,
    connectionBackoff: { numberOfRetries: 4, factor: 20, exponentBase: 2 },
  })
  glides.add(client)
  return client
}

/**
 * Makes what {@link clientOf} hands out for `library` on each of `ports` and cannot make at once:
 * a GLIDE client per port (one, shared by every Locker of the file on that port, as GLIDE
 * multiplexes one connection). Call it in `beforeAll`, once the servers are up.
 */
export async function prepareClients(library: ClientLibrary, ports: readonly number[]): Promise<void> {
  if (library !== 'glide') return
  for (const port of ports) if (!glideByPort.has(port)) glideByPort.set(port, await glideClient(port))
}

/** A new client of `library` to 127.0.0.1:`port` (GLIDE: the one {@link prepareClients} made). */
export function clientOf(library: ClientLibrary, port: number): SupportedRedisClient {
  switch (library) {
    case 'ioredis':
      return connect({ port })
    case 'iovalkey':
      return valkeyClient(port)
    case 'node-redis':
      return nodeRedisClient(port)
    case 'glide': {
      const client = glideByPort.get(port)
      if (client === undefined) throw new Error(`no GLIDE client for port ${port}: call prepareClients in beforeAll`)
      return client
    }
  }
}

afterAll(() => {
  for (const client of valkeys) client.disconnect()
  valkeys.clear()
  for (const client of nodeRedises) if (client.isOpen) client.destroy()
  nodeRedises.clear()
  nodeRedisTemplates.clear()
  for (const sentinel of nodeRedisSentinels) if (sentinel.isOpen) sentinel.destroy().catch(() => {})
  nodeRedisSentinels.clear()
  for (const client of ioredisSentinels) client.disconnect()
  ioredisSentinels.clear()
  for (const cluster of nodeRedisClusters) if (cluster.isOpen) cluster.destroy()
  nodeRedisClusters.clear()
  for (const client of ioredisClusters) client.disconnect()
  ioredisClusters.clear()
  for (const client of glides) client.close()
  glides.clear()
  glideByPort.clear()
})
