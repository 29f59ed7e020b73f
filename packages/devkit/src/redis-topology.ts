/**
 * Throw-away Redis deployments of more than one process, for the tests, the benchmarks and the
 * chaos suite, each on loopback ports of its own and stopped by PID (redis-server.ts):
 *
 * - {@link startSentinelSet}: a primary, its replicas and Sentinels watching it (Debian's
 *   `redis-server <conf> --sentinel`), with a short `down-after-milliseconds` so a failover takes
 *   seconds, not half a minute;
 * - {@link startCluster}: a Redis Cluster of N primaries with R replicas each
 *   (`redis-cli --cluster create ... --cluster-replicas R --cluster-yes`), ready when every node
 *   says `cluster_state:ok`.
 *
 * Nothing is kept on disk; every process is killed when the test process exits, as any spawned
 * server is.
 */
import { execFile } from 'node:child_process'
import { promisify } from 'node:util'
import { startRedisServer, type RedisServer } from './redis-server.js'
import { redisCommand } from './redis-command.js'

const run = promisify(execFile)

/** A primary, its replicas and the Sentinels that watch it. */
export interface SentinelSet {
  /** The master name the Sentinels know the primary by. */
  readonly name: string
  /** The servers that hold data: the first primary, then its replicas (a failover swaps roles). */
  readonly servers: readonly RedisServer[]
  readonly sentinels: readonly RedisServer[]
  /** `{ host, port }` of each Sentinel, as ioredis's `sentinels` option wants them. */
  readonly sentinelAddresses: readonly { host: string; port: number }[]
  /** The server the Sentinels name as primary now. */
  primary(): Promise<RedisServer>
  /** Resolves once the Sentinels name a primary other than `old`, within `timeoutMs`. */
  failedOver(old: RedisServer, timeoutMs?: number): Promise<RedisServer>
  /** Stops every process of the set. */
  dispose(): Promise<void>
}

/** Options of {@link startSentinelSet}. */
export interface SentinelSetOptions {
  /** Replicas of the primary. Default 2. */
  readonly replicas?: number
  /** Sentinels. Default 3 (quorum 2). */
  readonly sentinels?: number
  /** Sentinel's `down-after-milliseconds`. Default 1 000. */
  readonly downAfterMs?: number
  /** The master name. Default `fencelock`. */
  readonly name?: string
}

/** Spawns a primary, its replicas and Sentinels, and resolves once every Sentinel sees every replica. */
export async function startSentinelSet(options: SentinelSetOptions = {}): Promise<SentinelSet> {
  const name = options.name ?? 'fencelock'
  const replicaCount = options.replicas ?? 2
  const sentinelCount = options.sentinels ?? 3
  const downAfterMs = options.downAfterMs ?? 1_000
  const servers: RedisServer[] = []
  const sentinels: RedisServer[] = []
  const dispose = async () => {
    await Promise.all([...sentinels, ...servers].map((s) => s.dispose()))
  }
  try {
    // Redis 7 syncs a new replica diskless, after a 5 s wait for more replicas to join: not here.
    const fastSync = ['--repl-diskless-sync-delay', '0']
    const primary = await startRedisServer({ args: fastSync })
    servers.push(primary)
    for (let i = 0; i < replicaCount; i++) {
      servers.push(await startRedisServer({ args: [...fastSync, '--replicaof', primary.host, String(primary.port)] }))
    }
    await waitFor(
      async () => {
        for (const replica of servers.slice(1)) {
          if (field(await redisCommand(replica.port, ['INFO', 'replication']), 'master_link_status') !== 'up')
            return false
        }
        return true
      },
      10_000,
      'the replicas to sync',
    )
    const quorum = Math.floor(sentinelCount / 2) + 1
    const config = [
      `sentinel monitor ${name} ${primary.host} ${primary.port} ${quorum}`,
      `sentinel down-after-milliseconds ${name} ${downAfterMs}`,
      `sentinel failover-timeout ${name} ${Math.max(3 * downAfterMs, 3_000)}`,
      `sentinel parallel-syncs ${name} 1`,
      '',
    ].join('\n')
    for (let i = 0; i < sentinelCount; i++) sentinels.push(await startRedisServer({ sentinelConfig: config }))
    const byPort = (port: number) => servers.find((s) => s.port === port)
    const primaryNow = async (): Promise<RedisServer> => {
      for (const sentinel of sentinels) {
        if (!sentinel.running) continue
        try {
          const reply = await redisCommand(sentinel.port, ['SENTINEL', 'get-master-addr-by-name', name])
          const port = Number(reply.split('\n')[1])
          const server = byPort(port)
          if (server) return server
        } catch {
          // Another Sentinel may answer.
        }
      }
      throw new Error(`no Sentinel names a primary for ${name}`)
    }
    await waitFor(
      async () => {
        for (const sentinel of sentinels) {
          const replicas = await redisCommand(sentinel.port, ['SENTINEL', 'replicas', name])
          if ((replicas.match(/flags\n[^\n]*slave/g) ?? []).length < replicaCount) return false
          if (
            Number(
              field(await redisCommand(sentinel.port, ['SENTINEL', 'master', name]).then(flat), 'num-other-sentinels'),
            ) <
            sentinelCount - 1
          )
            return false
        }
        return true
      },
      15_000,
      'the Sentinels to see the replicas and each other',
    )
    return {
      name,
      servers,
      sentinels,
      sentinelAddresses: sentinels.map((s) => ({ host: s.host, port: s.port })),
      primary: primaryNow,
      async failedOver(old, timeoutMs = 15_000) {
        let now: RedisServer | undefined
        await waitFor(
          async () => {
            now = await primaryNow().catch(() => undefined)
            return now !== undefined && now !== old
          },
          timeoutMs,
          'a failover',
        )
        return now!
      },
      dispose,
    }
  } catch (error) {
    await dispose()
    throw error
  }
}

/**
 * The cluster slot of `key`, as `CLUSTER KEYSLOT` gives it: CRC16 (XMODEM: polynomial 0x1021,
 * initial value 0) of the key's bytes in UTF-8, modulo 16384 — of only the part between the first
 * `{` and the first `}` after it when that part is not empty (the hash tag).
 */
export function hashSlot(key: string): number {
  let bytes = Buffer.from(key, 'utf8')
  const open = bytes.indexOf(0x7b) // {
  if (open >= 0) {
    const close = bytes.indexOf(0x7d, open + 1) // }
    if (close > open + 1) bytes = bytes.subarray(open + 1, close)
  }
  let crc = 0
  for (const byte of bytes) {
    crc ^= byte << 8
    for (let bit = 0; bit < 8; bit++) crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff
  }
  return crc % 16384
}

/** A Redis Cluster. */
export interface ClusterSet {
  /** Every node, primaries first (as created; a failover swaps roles). */
  readonly servers: readonly RedisServer[]
  /** `{ host, port }` of every node, as ioredis's `Cluster` wants its startup nodes. */
  readonly nodes: readonly { host: string; port: number }[]
  /** The node that serves `slot` as primary now. */
  primaryOf(slot: number): Promise<RedisServer>
  /** The node that serves each slot as primary now (undefined: none), from one `CLUSTER SLOTS`. */
  primaries(slots: readonly number[]): Promise<(RedisServer | undefined)[]>
  /** The slot of `key`, as CLUSTER KEYSLOT gives it ({@link hashSlot}, computed here). */
  keySlot(key: string): Promise<number>
  /** Resolves once every running node says `cluster_state:ok`. */
  ready(timeoutMs?: number): Promise<void>
  dispose(): Promise<void>
}

/** Options of {@link startCluster}. */
export interface ClusterOptions {
  /** Primaries (shards). Default 3, at least 3. */
  readonly primaries?: number
  /** Replicas per primary. Default 1. */
  readonly replicasPerPrimary?: number
  /** `cluster-node-timeout`, ms. Default 1 000 (a failover in a few seconds). */
  readonly nodeTimeoutMs?: number
}

/**
 * Spawns the nodes, creates the cluster, and resolves once every node says `cluster_state:ok`,
 * every replica's link to its primary is up and every node's table names each primary's replicas.
 */
export async function startCluster(options: ClusterOptions = {}): Promise<ClusterSet> {
  const primaries = options.primaries ?? 3
  const replicas = options.replicasPerPrimary ?? 1
  const nodeTimeoutMs = options.nodeTimeoutMs ?? 1_000
  if (primaries < 3) throw new RangeError('a Redis Cluster needs at least 3 primaries')
  const servers: RedisServer[] = []
  const dispose = async () => {
    await Promise.all(servers.map((s) => s.dispose()))
  }
  try {
    for (let i = 0; i < primaries * (1 + replicas); i++) {
      const args = ['--cluster-node-timeout', String(nodeTimeoutMs), '--repl-diskless-sync-delay', '0']
      servers.push(await startRedisServer({ cluster: true, args }))
    }
    const addresses = servers.map((s) => `${s.host}:${s.port}`)
    await run(
      'redis-cli',
      ['--cluster', 'create', ...addresses, '--cluster-replicas', String(replicas), '--cluster-yes'],
      { timeout: 30_000 },
    )
    const set: ClusterSet = {
      servers,
      nodes: servers.map((s) => ({ host: s.host, port: s.port })),
      async primaryOf(slot) {
        const primary = (await set.primaries([slot]))[0]
        if (primary === undefined) throw new Error(`no node serves slot ${slot}`)
        return primary
      },
      async primaries(slots) {
        const found: (RedisServer | undefined)[] = slots.map(() => undefined)
        for (const server of servers) {
          if (!server.running) continue
          const reply = await redisCommand(server.port, ['CLUSTER', 'SLOTS']).catch(() => '')
          const lines = reply.split('\n')
          // Flattened: start, end, then the primary's host, port, id, then the replicas'.
          for (let i = 0; i + 4 < lines.length; i++) {
            const start = Number(lines[i])
            const end = Number(lines[i + 1])
            if (!Number.isInteger(start) || !Number.isInteger(end)) continue
            const primary = servers.find((s) => s.port === Number(lines[i + 3]))
            if (primary === undefined) continue
            for (const [j, slot] of slots.entries())
              if (found[j] === undefined && slot >= start && slot <= end) found[j] = primary
          }
          if (found.every((p) => p !== undefined)) break
        }
        return found
      },
      // Computed here, as every node would: a redis-cli process per call made loops of them take
      // tens of seconds on a loaded machine (a clean-clone CI run timed a test out on them).
      async keySlot(key) {
        return hashSlot(key)
      },
      async ready(timeoutMs = 20_000) {
        await waitFor(
          async () => {
            for (const server of servers) {
              if (!server.running) continue
              if (field(await redisCommand(server.port, ['CLUSTER', 'INFO']), 'cluster_state') !== 'ok') return false
            }
            return true
          },
          timeoutMs,
          'cluster_state:ok on every node',
        )
      },
      dispose,
    }
    await set.ready()
    // cluster_state:ok says every slot is served, not that the replicas are attached: a test
    // that asked a primary for its replica (CLUSTER REPLICAS) right after got none (a clean-clone
    // CI run). Every replica's link up, and every node's table naming each primary's replicas.
    await waitFor(
      async () => {
        for (const server of servers) {
          const nodes = await redisCommand(server.port, ['CLUSTER', 'NODES'])
          const table = nodes.split('\n').map((line) => line.trim().split(' '))
          const masters = table.filter((f) => f[2]?.split(',').includes('master')).map((f) => f[0])
          if (masters.length !== primaries) return false
          for (const id of masters)
            if (table.filter((f) => f[2]?.split(',').includes('slave') && f[3] === id).length !== replicas) return false
          const replication = await redisCommand(server.port, ['INFO', 'replication'])
          if (field(replication, 'role') === 'slave' && field(replication, 'master_link_status') !== 'up') return false
        }
        return true
      },
      20_000,
      'every replica attached and known to every node',
    )
    return set
  } catch (error) {
    await dispose()
    throw error
  }
}

/** `name:value` from an INFO-style reply (or `name\nvalue` pairs, see {@link flat}). */
function field(text: string, name: string): string | undefined {
  return new RegExp(`^${name}:(.*)$`, 'm').exec(text)?.[1]?.trim()
}

/** A flat `name\nvalue\n...` reply as `name:value` lines. */
function flat(text: string): string {
  const lines = text.split('\n')
  const out: string[] = []
  for (let i = 0; i + 1 < lines.length; i += 2) out.push(`${lines[i]}:${lines[i + 1]}`)
  return out.join('\n')
}

async function waitFor(probe: () => Promise<boolean>, timeoutMs: number, what: string): Promise<void> {
  const deadline = performance.now() + timeoutMs
  let last: unknown
  while (performance.now() < deadline) {
    try {
      if (await probe()) return
    } catch (error) {
      last = error
    }
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
  throw new Error(`${what}: not within ${timeoutMs} ms${last ? ` (${(last as Error).message})` : ''}`)
}
