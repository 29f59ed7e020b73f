/**
 * The deployments the contract suites (locker-contract.ts, family-contract.ts) run over, each on
 * a client library given as a parameter: one Redis, and a quorum of independent masters. The
 * admin clients that look behind the Locker's back stay ioredis: only the Locker's client varies.
 */
import type { Redis } from 'ioredis'
import { resourceKeys } from '../../src/index.js'
import { clientOf, type ClientLibrary } from '../support/clients.js'
import { makeLocker } from '../support/connections.js'
import type { QuorumNodes } from '../support/quorum.js'
import type { ContractDeployment } from './locker-contract.js'

const keysOf = (resource: string) => resourceKeys('fencelock:', resource)
const sum = (values: number[]) => values.reduce((a, b) => a + b, 0)

/** One Redis at `port()` (read inside the tests, after beforeAll), the Locker on `library`. */
export function singleRedisDeployment(
  library: ClientLibrary,
  port: () => number,
  admin: () => Redis,
): ContractDeployment {
  return {
    locker: (options) => makeLocker(clientOf(library, port()), options),
    steal: async (resource) => {
      await admin().del(keysOf(resource).lock)
    },
    traces: async (resource) => ({
      held: await admin().exists(keysOf(resource).lock),
      queued: await admin().zcard(keysOf(resource).queue),
    }),
  }
}

/** A quorum over `nodes` (through their proxies), the Locker's clients on `library`. */
export function quorumDeployment(library: ClientLibrary, nodes: QuorumNodes): ContractDeployment {
  return {
    locker: (options) =>
      library === 'ioredis'
        ? nodes.locker(options)
        : makeLocker(
            nodes.proxies.map((proxy) => clientOf(library, proxy.port)),
            options,
          ),
    steal: async (resource) => {
      await Promise.all(nodes.admins.map((a) => a.del(keysOf(resource).lock)))
    },
    traces: async (resource) => ({
      held: sum(await Promise.all(nodes.admins.map((a) => a.exists(keysOf(resource).lock)))),
      queued: sum(await Promise.all(nodes.admins.map((a) => a.zcard(keysOf(resource).queue)))),
    }),
  }
}
