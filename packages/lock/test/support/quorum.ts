/**
 * N redis-servers of a test file's own, for quorum mode, each reached through a TCP proxy (so a
 * test can cut a node off with a partition while it keeps its data), with an admin client per
 * server (direct, not through the proxy) and Lockers over new client sets. Call in a file's top
 * level; the fields are set in its `beforeAll`.
 */
import type { Redis, RedisOptions } from 'ioredis'
import { beforeAll } from 'vitest'
import type { LockerOptions } from '../../src/index.js'
import { connect, makeLocker, ready } from './connections.js'
import { startTcpProxy, type TcpProxy } from './latency-proxy.js'
import { startRedisServer, type RedisServer } from './redis-server.js'

export interface QuorumNodes {
  readonly servers: RedisServer[]
  readonly proxies: TcpProxy[]
  /** One admin client per server, connected directly. */
  readonly admins: Redis[]
  /** New clients, one per node, through the proxies (ioredis options on top of the tests' fast reconnect). */
  clients(options?: RedisOptions): Redis[]
  /** A Locker over new clients to every node. */
  locker(options?: LockerOptions, clientOptions?: RedisOptions): ReturnType<typeof makeLocker>
  /**
   * Cuts node `i` off by a partition (calls get no answer; its data is kept), or heals it (held
   * calls are answered late).
   */
  cut(i: number): void
  mend(i: number): void
}

export function useQuorumNodes(n: number): QuorumNodes {
  const env: QuorumNodes = {
    servers: [],
    proxies: [],
    admins: [],
    clients: (options = {}) => env.proxies.map((proxy) => connect({ port: proxy.port }, options)),
    locker: (options = {}, clientOptions = {}) => makeLocker(env.clients(clientOptions), options),
    cut: (i) => env.proxies[i]!.partition(),
    mend: (i) => env.proxies[i]!.heal(),
  }
  beforeAll(async () => {
    for (let i = 0; i < n; i++) {
      const server = await startRedisServer()
      env.servers.push(server)
      env.proxies.push(await startTcpProxy({ port: server.port }))
      const admin = connect({ port: server.port })
      await ready(admin, server.url)
      env.admins.push(admin)
    }
  })
  return env
}

/**
 * Deletes `keys` on one node once the try a Locker sent there on `connection` has run there. A
 * quorum grant resolves on a majority, and the other nodes' tries may still be on their way; one
 * run after this DEL would grant too — a late grant the holder keeps, so a contender could find no
 * majority where the test means it to (clean-clone CI runs failed two controls so). A PING on the
 * same connection answers after that try.
 */
export async function delAfterTry(connection: Redis, admin: Redis, ...keys: string[]): Promise<void> {
  await connection.ping()
  await admin.del(...keys)
}
