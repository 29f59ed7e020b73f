// Many Lockers on one client, the usual set-up: each Locker follows the client's connection
// events, and an EventEmitter warns past 10 listeners of one event (MaxListenersExceededWarning:
// 15 Lockers on one ioredis client warned for close, ready, error, +node and -node). The adapters
// now put one set of listeners on a client however many Lockers share it
// (src/client/event-fan-out.ts); every Locker still hears each event, shown by a restart of the
// server: every Locker of the 15 sees the connection go and come back.
import { startCluster, startSentinelSet, type ClusterSet, type SentinelSet } from '@fencelock/devkit/redis-topology'
import type { Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Locker, LockUnavailableError, type SupportedRedisClient } from '../../src/index.js'
import {
  CLUSTER_CLIENT_LIBRARIES,
  clientOf,
  clusterClientOf,
  clusterClientReady,
  glideClusterClient,
  prepareClients,
  SENTINEL_CLIENT_LIBRARIES,
  sentinelClientOf,
  sentinelClientReady,
  type ClientLibrary,
} from '../support/clients.js'
import { unique } from '../support/connections.js'
import { startRedisServer, type RedisServer } from '../support/redis-server.js'
import { waitUntil } from '../support/timing.js'

const LOCKERS = 15
let server: RedisServer
let cluster: ClusterSet
let sentinel: SentinelSet
beforeAll(async () => {
  ;[server, cluster, sentinel] = await Promise.all([
    startRedisServer(),
    startCluster(),
    startSentinelSet({ replicas: 0, sentinels: 1 }),
  ])
  await prepareClients('glide', [server.port])
}, 90_000)
afterAll(async () => {
  await Promise.all([cluster?.dispose(), sentinel?.dispose()])
})

/** The MaxListenersExceededWarnings emitted while `run` ran. */
async function maxListenerWarnings(run: () => Promise<void>): Promise<string[]> {
  const warnings: string[] = []
  const onWarning = (w: Error) => {
    if (w.name === 'MaxListenersExceededWarning') warnings.push(w.message)
  }
  process.on('warning', onWarning)
  try {
    await run()
    // Warnings are emitted on the next tick.
    await new Promise((resolve) => setImmediate(resolve))
  } finally {
    process.off('warning', onWarning)
  }
  return warnings
}

/** 15 Lockers on `client`, each taking and giving back a lock, then closed. */
async function fifteenLockers(client: SupportedRedisClient): Promise<string[]> {
  return maxListenerWarnings(async () => {
    const lockers = Array.from({ length: LOCKERS }, () => new Locker(client, { ttlMs: 5_000, waitMs: 10_000 }))
    try {
      for (const locker of lockers) await (await locker.acquire(unique('shared-client'))).release()
    } finally {
      await Promise.all(lockers.map((l) => l.close()))
    }
  })
}

describe(`${LOCKERS} Lockers on one client: no MaxListenersExceededWarning`, () => {
  const singles: ClientLibrary[] = ['ioredis', 'iovalkey', 'node-redis', 'glide']
  it.each(singles)('one Redis, %s', async (library) => {
    expect(await fifteenLockers(clientOf(library, server.port))).toEqual([])
  })

  it.each(CLUSTER_CLIENT_LIBRARIES)('a Cluster, %s', async (library) => {
    const client =
      library === 'glide' ? await glideClusterClient(cluster.nodes) : clusterClientOf(library, cluster.nodes)
    await waitUntil(() => library === 'glide' || clusterClientReady(client), {
      timeoutMs: 30_000,
      what: 'the Cluster client',
    })
    expect(await fifteenLockers(client)).toEqual([])
  })

  it.each(SENTINEL_CLIENT_LIBRARIES)('Sentinel, %s', async (library) => {
    const client = sentinelClientOf(library, sentinel)
    await waitUntil(() => sentinelClientReady(client), { timeoutMs: 30_000, what: 'the Sentinel client' })
    expect(await fifteenLockers(client)).toEqual([])
  })
})

describe('every Locker still hears the client', () => {
  it.each(['ioredis', 'node-redis'] as const)(
    '%s: 15 Lockers on one client, the server restarted: each one fails at once while it is down and takes a lock once it is back',
    async (library) => {
      const own = await startRedisServer()
      const client = clientOf(library, own.port)
      const lockers = Array.from(
        { length: LOCKERS },
        () => new Locker(client, { ttlMs: 5_000, waitMs: 3_000, commandTimeoutMs: 1_000 }),
      )
      try {
        for (const locker of lockers) await (await locker.acquire(unique('heard'))).release()
        await own.stop()
        // Down is heard by every Locker: each acquire fails with the connection's error, not at its waitMs.
        const failures = await Promise.all(
          lockers.map(async (locker) => {
            const started = performance.now()
            const error = await locker.acquire(unique('heard')).then(
              () => undefined,
              (e: unknown) => e as Error,
            )
            return {
              down: error instanceof LockUnavailableError && /the connection to Redis is down/.test(error.message),
              ms: performance.now() - started,
            }
          }),
        )
        expect(failures.map((f) => f.down)).toEqual(Array(LOCKERS).fill(true))
        // At once, not at the waitMs (3 s) or later (the bound is for a loaded machine).
        expect(Math.max(...failures.map((f) => f.ms))).toBeLessThan(2_500)
        await own.restart()
        // And ready: every Locker takes a lock again.
        await waitUntil(
          async () =>
            library === 'ioredis' ? (client as Redis).status === 'ready' : (client as { isReady: boolean }).isReady,
          {
            timeoutMs: 30_000,
            what: 'the client reconnected',
          },
        )
        for (const locker of lockers) await (await locker.acquire(unique('heard'))).release()
      } finally {
        await Promise.all(lockers.map((l) => l.close()))
      }
    },
  )
})
