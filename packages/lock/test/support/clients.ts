/**
 * Clients of every library the Locker takes, for the tests that run on each (the contract suites
 * over test/contract/deployments.ts, the node-redis faults). Every client made here is closed in
 * `afterAll` of the test file. Each reconnects fast (a restarted server is back in ~20 ms) and
 * swallows its `error` events: the tests assert outcomes instead.
 */
import { Redis as Valkey } from 'iovalkey'
import { createClient } from 'redis'
import { afterAll } from 'vitest'
import type { SupportedRedisClient } from '../../src/index.js'
import { connect } from './connections.js'

/** The client libraries under test: ioredis (the default everywhere else), its fork iovalkey, node-redis. */
export type ClientLibrary = 'ioredis' | 'iovalkey' | 'node-redis'

/** The libraries the contract suites run on besides ioredis (which the suites' own files cover). */
export const OTHER_CLIENT_LIBRARIES = ['node-redis', 'iovalkey'] as const satisfies readonly ClientLibrary[]

/** What closing a node-redis client needs (its full generic type varies with its options). */
interface NodeRedis {
  readonly isOpen: boolean
  destroy(): void
}

const valkeys = new Set<Valkey>()
const nodeRedises = new Set<NodeRedis>()

/**
 * A node-redis client to 127.0.0.1:`port`, `connect()` called (not awaited: its commands wait in
 * its offline queue until it is ready, as a user's would).
 */
export function nodeRedisClient(port: number, options: { connect?: boolean } = {}) {
  const client = createClient({
    socket: { host: '127.0.0.1', port, reconnectStrategy: (retries) => Math.min(retries * 20, 200) },
  })
  client.on('error', () => {})
  nodeRedises.add(client)
  if (options.connect !== false) client.connect().catch(() => {})
  return client
}

/** An iovalkey client to 127.0.0.1:`port`. */
export function valkeyClient(port: number): Valkey {
  const client = new Valkey({ host: '127.0.0.1', port, retryStrategy: (times) => Math.min(times * 20, 200) })
  client.on('error', () => {})
  valkeys.add(client)
  return client
}

/** A new client of `library` to 127.0.0.1:`port`. */
export function clientOf(library: ClientLibrary, port: number): SupportedRedisClient {
  switch (library) {
    case 'ioredis':
      return connect({ port })
    case 'iovalkey':
      return valkeyClient(port)
    case 'node-redis':
      return nodeRedisClient(port)
  }
}

afterAll(() => {
  for (const client of valkeys) client.disconnect()
  valkeys.clear()
  for (const client of nodeRedises) if (client.isOpen) client.destroy()
  nodeRedises.clear()
})
