/**
 * The one place where a Locker's engine is chosen, from what its constructor was given: one
 * Redis client (ioredis or iovalkey: a single Redis, also Sentinel or Cluster; node-redis: a
 * single Redis, also Sentinel), an array of 3 or more clients of one kind (quorum mode), or an etcd3 client
 * (etcd/etcd-backend.ts). Each Redis client is adapted to the client seam (client/). Everything
 * above the {@link LockBackend} seam — the wait queues, the locks, the family, the election — is
 * the same over any engine; an
 * engine of another kind is one more branch of {@link chooseBackend}.
 */
import type { Deadlines } from '../deadline.js'
import { InvalidLockOptionError } from '../errors.js'
import { QUORUM_TTL_FLOOR, SINGLE_TTL_FLOOR, type ResolvedLockerOptions, type TtlFloor } from '../options.js'
import { QuorumBackend } from '../quorum/quorum-backend.js'
import { EtcdBackend } from '../etcd/etcd-backend.js'
import { isEtcdClient, type EtcdClient } from '../etcd/etcd-client.js'
import type { BackendListener, LockBackend } from './backend.js'
import { adaptClient } from '../client/choose-client.js'
import { IoredisConnection } from '../client/ioredis-client.js'
import { GlideConnection } from '../client/glide-client.js'
import type { RedisConnection } from '../client/redis-client.js'
import { RedisBackend, type RedisBackendOptions } from './redis-backend.js'
import { PubSubMode } from './pubsub-mode.js'
import { READ_WRITE_PREFIX } from '../keys.js'
import { SingleReadWrite, type ReadWriteEngine } from '../family/read-write-engine.js'
import type { Wakes } from '../family/read-write.js'
import { ReadWriteWakes } from '../family/read-write-wakes.js'
import { quorumReadWrite } from '../quorum/quorum-read-write.js'

/** Largest quorum accepted: more nodes only add round trips (a majority of 99 is 50). */
export const MAX_QUORUM_NODES = 99

/** An engine, chosen: what it is, and how to make a backend on it. */
export interface BackendChoice {
  /** How many nodes grant each lock: 1, or N in quorum mode (a majority must grant). */
  readonly nodes: number
  /** The shortest lease the engine takes. */
  readonly ttlFloor: TtlFloor
  /** What error messages call the store: `Redis` or `etcd`. */
  readonly store: string
  /**
   * Refuses an option this engine has no use for, before any I/O, and sets on the Locker's own
   * client adapters what belongs to them (`coalesceWrites`).
   * @throws InvalidLockOptionError
   */
  checkOptions(o: ResolvedLockerOptions): void
  /**
   * A backend over the chosen client(s) with these options (the semaphores' has a prefix of its
   * own), its calls on `deadlines`, its release messages to `listener`.
   */
  create(o: ResolvedLockerOptions, deadlines: Deadlines, listener: BackendListener): LockBackend
  /**
   * The read-write locks' round trips and wakes on this engine (family/read-write-engine.ts), made
   * once per Locker on first use; undefined where there are none yet (etcd).
   */
  readonly readWrite: ((o: ResolvedLockerOptions, deadlines: Deadlines) => ReadWriteParts) | undefined
}

/** What a Locker's read-write locks run on. */
export interface ReadWriteParts {
  readonly engine: ReadWriteEngine
  readonly wakes: Wakes
}

/** The listener of a backend that never waits through the lock's queues (the read-write lock's quorum). */
const NO_LISTENER: BackendListener = { released: () => {}, reconnected: () => {} }

/**
 * Chooses the engine for `connection`, the Locker constructor's first argument.
 * @throws InvalidLockOptionError when it is none of the kinds accepted, before any I/O.
 */
export function chooseBackend(connection: unknown): BackendChoice {
  if (Array.isArray(connection)) return quorum(checkClientList(connection))
  if (isEtcdClient(connection)) return etcd(connection)
  return single(adaptClient(connection, 'redis'))
}

/** One Redis (also Sentinel, Cluster): redis-backend.ts. */
function single(client: RedisConnection): BackendChoice {
  return {
    nodes: 1,
    ttlFloor: SINGLE_TTL_FLOOR,
    store: 'Redis',
    checkOptions: (o) => {
      if (o.nodeRestartDelayMs !== undefined)
        throw new InvalidLockOptionError(
          'nodeRestartDelayMs',
          'is for quorum mode (an array of 3 or more clients): one Redis has no restart guard',
          o.nodeRestartDelayMs,
        )
      if (o.pubsub === 'sharded' && !client.cluster)
        throw new InvalidLockOptionError(
          'pubsub',
          "'sharded' is for a Redis Cluster: one Redis and Sentinel use classic pub/sub",
          o.pubsub,
        )
      applyCoalescing([client], o.coalesceWrites)
    },
    create: (o, deadlines, listener) =>
      new RedisBackend(
        client,
        { ...redisOptions(o), replicas: o.replicas, replicasTimeoutMs: o.replicasTimeoutMs, pubsub: o.pubsub },
        deadlines,
        listener,
      ),
    readWrite: (o, deadlines) => {
      const pubsub = new PubSubMode(client, o.pubsub, o.commandTimeoutMs)
      return {
        engine: new SingleReadWrite(client, deadlines, redisOptions(o), pubsub),
        wakes: new ReadWriteWakes(client, o.commandTimeoutMs, pubsub),
      }
    },
  }
}

/** N independent masters, a majority granting each lock: quorum/quorum-backend.ts. */
function quorum(clients: readonly RedisConnection[]): BackendChoice {
  return {
    nodes: clients.length,
    ttlFloor: QUORUM_TTL_FLOOR,
    store: 'Redis',
    checkOptions: (o) => {
      if (o.replicas > 0)
        throw new InvalidLockOptionError(
          'replicas',
          'is for one Redis with replicas (Sentinel, Cluster): quorum mode takes independent masters',
          o.replicas,
        )
      if (o.pubsub === 'sharded')
        throw new InvalidLockOptionError(
          'pubsub',
          "'sharded' is for a Redis Cluster: quorum mode's independent masters use classic pub/sub",
          o.pubsub,
        )
      applyCoalescing(clients, o.coalesceWrites)
    },
    create: (o, deadlines, listener) =>
      new QuorumBackend(clients, { ...redisOptions(o), nodeRestartDelayMs: o.nodeRestartDelayMs }, deadlines, listener),
    // A quorum backend of its own, under the read-write lock's prefix: its restart guard's marker
    // and lease records apart from the locks'.
    readWrite: (o, deadlines) => {
      const prefixed = { ...o, prefix: o.prefix + READ_WRITE_PREFIX }
      const options = { ...redisOptions(prefixed), nodeRestartDelayMs: o.nodeRestartDelayMs }
      const backend = new QuorumBackend(clients, options, deadlines, NO_LISTENER)
      return quorumReadWrite(backend, clients, redisOptions(o))
    },
  }
}

/** etcd: a consensus store, each grant committed on a majority of its members (etcd/etcd-backend.ts). */
function etcd(client: EtcdClient): BackendChoice {
  return {
    nodes: 1,
    ttlFloor: SINGLE_TTL_FLOOR,
    store: 'etcd',
    checkOptions: (o) => {
      if (o.nodeRestartDelayMs !== undefined)
        throw new InvalidLockOptionError(
          'nodeRestartDelayMs',
          'is for quorum mode over Redis masters: etcd keeps what it committed across a restart',
          o.nodeRestartDelayMs,
        )
      if (o.pubsub === 'sharded')
        throw new InvalidLockOptionError('pubsub', "'sharded' is for a Redis Cluster: etcd has no pub/sub", o.pubsub)
      if (o.coalesceWrites !== undefined)
        throw new InvalidLockOptionError(
          'coalesceWrites',
          'is for ioredis and iovalkey clients: the etcd3 client sends its own requests',
          o.coalesceWrites,
        )
    },
    readWrite: undefined,
    create: (o, deadlines, listener) =>
      new EtcdBackend(
        client,
        { prefix: o.prefix, commandTimeoutMs: o.commandTimeoutMs, replicas: o.replicas },
        deadlines,
        listener,
      ),
  }
}

/** Why `coalesceWrites` means nothing on a client of each kind, where it does not. */
function noCoalescing(client: RedisConnection): string | undefined {
  if (client instanceof IoredisConnection)
    return client.cluster
      ? 'an ioredis Cluster client is left as it is (its commands go out on many connections)'
      : undefined
  if (client instanceof GlideConnection) return client.noCoalescing
  return client.kind === 'node-redis'
    ? 'node-redis already writes the commands of a tick together'
    : 'a GLIDE cluster client is left as it is (its commands go to many primaries)'
}

/**
 * `coalesceWrites`, when given, on the Locker's adapters (client/write-coalescing.ts and
 * client/glide-batching.ts; an ioredis or iovalkey `Redis` adapter, and a GLIDE `GlideClient`'s,
 * have it on by default); given where it cannot apply it is refused, naming why.
 * @throws InvalidLockOptionError
 */
function applyCoalescing(clients: readonly RedisConnection[], coalesce: boolean | undefined): void {
  if (coalesce === undefined) return
  for (const client of clients) {
    const why = noCoalescing(client)
    if (why !== undefined)
      throw new InvalidLockOptionError(
        'coalesceWrites',
        `is for ioredis and iovalkey Redis clients and GLIDE standalone clients: ${why}`,
        coalesce,
      )
  }
  for (const client of clients)
    if (client instanceof IoredisConnection || client instanceof GlideConnection) client.coalesce = coalesce
}

/** What a Redis backend takes of the Locker's options. */
function redisOptions(o: ResolvedLockerOptions): RedisBackendOptions {
  return {
    prefix: o.prefix,
    commandTimeoutMs: o.commandTimeoutMs,
    fenceTtlMs: o.fenceTtlMs,
    handoffMs: o.handoffMs,
    // A queued locker that stops trying (a crashed process) is dropped after this lease. Waiters
    // try at least every 1.2 × pollMs (the safety poll), so a live one always renews it in time.
    queueLeaseMs: 3 * o.pollMs + o.commandTimeoutMs,
  }
}

/** A Cluster client of each library, as the errors name it. */
const CLUSTER_CLIENTS: Readonly<Record<RedisConnection['kind'], string>> = {
  ioredis: 'an ioredis Cluster client',
  'node-redis': 'a node-redis cluster client (createCluster)',
  glide: 'a GLIDE cluster client (GlideClusterClient)',
}

/** An array of 3 or more distinct clients of one kind (quorum mode), adapted. */
function checkClientList(redis: readonly unknown[]): readonly RedisConnection[] {
  if (redis.length < 3 || redis.length > MAX_QUORUM_NODES) {
    throw new InvalidLockOptionError(
      'redis',
      `an array (quorum mode) must hold 3 to ${MAX_QUORUM_NODES} clients of independent Redis masters; for one Redis pass the client itself`,
      redis.length,
    )
  }
  const seen = new Set<unknown>()
  const adapted: RedisConnection[] = []
  redis.forEach((client: unknown, i) => {
    const connection = adaptClient(client, `redis[${i}]`)
    // A Cluster client is many masters behind one client: each node of a quorum is one master
    // (its restart guard reads one server's run_id, its marker lives on one server).
    if (connection.cluster) {
      const what = CLUSTER_CLIENTS[connection.kind]
      throw new InvalidLockOptionError(
        `redis[${i}]`,
        `must be a client of one Redis master: quorum mode takes independent masters, not ${what}; pass that client alone for a Redis Cluster`,
        what,
      )
    }
    const first = adapted[0]
    // One kind: the clients differ in how they reconnect and resend, and a quorum is reasoned about as one.
    if (first !== undefined && first.kind !== connection.kind)
      throw new InvalidLockOptionError(
        `redis[${i}]`,
        `must be a client of the same kind as redis[0] (${first.kind}): quorum mode does not mix client libraries`,
        `a ${connection.kind} client`,
      )
    if (seen.has(client))
      throw new InvalidLockOptionError(
        `redis[${i}]`,
        'must not repeat a client: each node counts once toward the majority',
        client,
      )
    seen.add(client)
    adapted.push(connection)
  })
  return Object.freeze(adapted)
}
