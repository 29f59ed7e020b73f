/**
 * Recognises the client a Locker is given and adapts it to the client seam (redis-client.ts), or
 * refuses it with a typed error that names what it got, before any I/O.
 */
import { InvalidLockOptionError } from '../errors.js'
import {
  GlideConnection,
  glideConfigurationOf,
  isGlideClient,
  isGlideClusterClient,
  type GlideClient,
} from './glide-client.js'
import { GlideClusterConnection, type GlideClusterClient } from './glide-cluster-client.js'
import { IoredisConnection, isIoredisClient, type IoredisClient } from './ioredis-client.js'
import { isNodeRedisClient, nodeRedisConnection, type NodeRedisClient } from './node-redis-client.js'
import { isNodeRedisCluster, nodeRedisClusterConnection, type NodeRedisCluster } from './node-redis-cluster.js'
import { isNodeRedisSentinel, nodeRedisSentinelConnection, type NodeRedisSentinel } from './node-redis-sentinel.js'
import type { RedisConnection } from './redis-client.js'

/**
 * A Redis client the Locker takes: ioredis or iovalkey (`Redis`, `Cluster`), node-redis
 * (`createClient`, `createSentinel`, `createCluster`), or Valkey GLIDE (`GlideClient`, `GlideClusterClient`).
 */
export type SupportedRedisClient =
  IoredisClient | NodeRedisClient | NodeRedisSentinel | NodeRedisCluster | GlideClient | GlideClusterClient

/** What the Locker takes, in one sentence (error messages). */
export const ACCEPTED =
  'must be an ioredis or iovalkey Redis or Cluster client, a node-redis client (createClient, createSentinel or createCluster, connected), a Valkey GLIDE GlideClient or GlideClusterClient, an array of 3 or more of one kind (quorum mode), or an etcd3 client'

/** Whether `value` is a Redis client of a kind the Locker knows (connected or not). */
export function isRedisClient(value: unknown): value is SupportedRedisClient {
  return (
    isIoredisClient(value) ||
    isNodeRedisClient(value) ||
    isNodeRedisSentinel(value) ||
    isNodeRedisCluster(value) ||
    isGlideClient(value) ||
    isGlideClusterClient(value)
  )
}

/**
 * The adapter of `value`, a client of a kind the Locker knows.
 * @throws InvalidLockOptionError (`field`) for a client it does not know or does not support, or
 *   a node-redis client whose `connect()` was never called.
 */
export function adaptClient(value: unknown, field: string): RedisConnection {
  // ioredis first: it has a sendCommand of its own, which the node-redis checks look for.
  if (isIoredisClient(value)) return new IoredisConnection(value)
  if (isNodeRedisClient(value)) {
    if (!value.isOpen)
      throw new InvalidLockOptionError(
        field,
        'is a node-redis client that is not connected: call client.connect() first (node-redis does not connect by itself, and the Locker does not connect a client it does not own)',
        'a node-redis client, not connected',
      )
    return nodeRedisConnection(value)
  }
  if (isNodeRedisSentinel(value)) {
    if (!value.isOpen)
      throw new InvalidLockOptionError(
        field,
        'is a node-redis sentinel client that is not connected: call sentinel.connect() first (node-redis does not connect by itself, and the Locker does not connect a client it does not own)',
        'a node-redis sentinel client, not connected',
      )
    return nodeRedisSentinelConnection(value)
  }
  if (isNodeRedisCluster(value)) {
    if (!value.isOpen)
      throw new InvalidLockOptionError(
        field,
        'is a node-redis cluster client that is not connected: call cluster.connect() first (node-redis does not connect by itself, and the Locker does not connect a client it does not own)',
        'a node-redis cluster client, not connected',
      )
    return nodeRedisClusterConnection(value)
  }
  if (isGlideClient(value)) {
    const config = glideConfigurationOf(value)
    if (config === undefined)
      throw new InvalidLockOptionError(
        field,
        'is a Valkey GLIDE client whose configuration the Locker cannot read (the `config` field of GLIDE 2.x): the Locker creates its pub/sub client from it',
        'a GLIDE client without its configuration',
      )
    return new GlideConnection(value, config)
  }
  if (isGlideClusterClient(value)) {
    const config = glideConfigurationOf(value)
    if (config === undefined)
      throw new InvalidLockOptionError(
        field,
        'is a Valkey GLIDE cluster client whose configuration the Locker cannot read (the `config` field of GLIDE 2.x): the Locker creates its pub/sub client from it',
        'a GLIDE cluster client without its configuration',
      )
    return new GlideClusterConnection(value, config)
  }
  throw new InvalidLockOptionError(field, ACCEPTED, kindOf(value))
}

/** What `value` is, for an error message: its type, or its class. */
export function kindOf(value: unknown): unknown {
  if (value === null || typeof value !== 'object') return value
  if (Array.isArray(value)) return `an array of ${value.length}`
  const name = (value as { constructor?: { name?: unknown } }).constructor?.name
  return typeof name === 'string' && name !== 'Object' && name !== '' ? `an object of class ${name}` : 'a plain object'
}
