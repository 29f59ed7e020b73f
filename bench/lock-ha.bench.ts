// `npm run bench:lock:ha`: the lock on the highly available deployments (issue 21), in one run, on
// deployments of its own spawned by the devkit (loopback ports, stopped by PID):
//
// - Sentinel (a primary, 2 replicas, 3 Sentinels), through ioredis's Sentinel client: uncontended
//   (50 workers, each its own resource) and contended (20 workers, one resource, 1 ms holds), with
//   `replicas` 0 and 1, interleaved rounds, and the ratio of 1 to 0 in the same run;
// - Cluster (3 shards, a replica each), through ioredis's Cluster client, 50 workers on resources
//   spread over the shards; and, beside it, one redis-server with the same client code (the
//   one-shard baseline).
//
// - waiting on a Cluster (issue 38), classic against sharded pub/sub: lock-ha-pubsub.ts.
//
// Every row also gives the Redis CPU per lock operation (acquire + release), from `INFO cpu` of
// each primary: the capacity of one shard is about 1 / that, whatever the client could drive.
// Writes its sections of docs/BENCHMARKS.md (bench:lock-ha and bench:lock-ha-pubsub markers)
// unless --no-write.
//
//   npm run bench:lock:ha                    3 rounds of 4 s per row (~4 min)
//   npm run bench:lock:ha -- --rounds 1 --seconds 2 --no-write
//   npm run bench:lock:ha -- --only pubsub   the pub/sub rows only (and only their section)
import { randomBytes } from 'node:crypto'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { choiceFlag, commandLineOrExit, integerFlag, type CliSpec } from '@fencelock/devkit/cli'
import { redisCommand } from '@fencelock/devkit/redis-command'
import { startRedisServer, type RedisServer } from '@fencelock/devkit/redis-server'
import { startCluster, startSentinelSet } from '@fencelock/devkit/redis-topology'
import { Locker } from '@fencelock/lock'
import { Cluster, Redis } from 'ioredis'
import { pubsubBench } from './lock-ha-pubsub.js'
import { exitUnlessRedisServerRuns } from './support/can-start.js'
import { writeMarkedSection } from './support/docs-section.js'
import { loadAverage, machineInfo } from './support/machine.js'

const here = dirname(fileURLToPath(import.meta.url))
const BENCHMARKS_MD = join(here, '..', 'docs', 'BENCHMARKS.md')

const CLI: CliSpec = {
  command: 'npm run bench:lock:ha --',
  summary: 'The lock on Redis Sentinel (replicas 0 and 1, uncontended and contended) and on a Redis Cluster of 3 shards against one redis-server: ops/s and Redis CPU per operation. Writes its section of docs/BENCHMARKS.md.',
  flags: {
    rounds: { type: 'string', value: '<n>', description: 'interleaved rounds per row, 1-20', default: '3' },
    seconds: { type: 'string', value: '<s>', description: 'length of one measurement, 1-60', default: '4' },
    'no-write': { type: 'boolean', description: 'leave docs/BENCHMARKS.md untouched' },
    only: { type: 'string', value: '<part>', description: "'all', or 'pubsub' (classic vs sharded pub/sub on a Cluster only)", default: 'all' },
  },
  notes: 'REDIS_SERVER_BIN (default redis-server).',
  failure: 'it broke off with an error',
}

const args = commandLineOrExit(CLI, process.argv.slice(2), (values) => ({
  rounds: integerFlag(values, 'rounds', 3, 1, 20),
  seconds: integerFlag(values, 'seconds', 4, 1, 60),
  write: values['no-write'] !== true,
  only: choiceFlag(values, 'only', 'all', ['all', 'pubsub'] as const),
}))

exitUnlessRedisServerRuns('bench:lock:ha')

const TTL_MS = 10_000
const UNCONTENDED_WORKERS = 50
const CONTENDED_WORKERS = 20

/** Redis CPU (user + sys) of `ports`, in seconds. */
async function redisCpu(ports: readonly number[]): Promise<number> {
  let total = 0
  for (const port of ports) {
    const info = await redisCommand(port, ['INFO', 'cpu'])
    for (const field of ['used_cpu_sys', 'used_cpu_user']) total += Number(new RegExp(`^${field}:(\\S+)`, 'm').exec(info)?.[1] ?? 0)
  }
  return total
}

interface Measurement {
  readonly ops: number
  readonly seconds: number
  /** Redis CPU of the primaries per lock operation, µs. */
  readonly redisUsPerOp: number
}

/**
 * `workers` loops of acquire + release for `seconds`, each on its own resource (`shared` false)
 * or all on one (true, holding 1 ms). Counts completed operations.
 */
async function run(locker: Locker, workers: number, shared: boolean, seconds: number, primaries: () => Promise<number[]>): Promise<Measurement> {
  const tag = randomBytes(4).toString('hex')
  const ports = await primaries()
  const cpuBefore = await redisCpu(ports)
  const start = performance.now()
  const until = start + seconds * 1_000
  let ops = 0
  await Promise.all(
    Array.from({ length: workers }, async (_, w) => {
      const resource = shared ? `bench-ha:${tag}:one` : `bench-ha:${tag}:${w}`
      while (performance.now() < until) {
        const lock = await locker.acquire(resource, { waitMs: 30_000 })
        if (shared) await new Promise((r) => setTimeout(r, 1))
        await lock.release()
        ops++
      }
    }),
  )
  const elapsed = (performance.now() - start) / 1_000
  const cpu = (await redisCpu(ports)) - cpuBefore
  return { ops, seconds: elapsed, redisUsPerOp: (cpu / ops) * 1e6 }
}

interface Row {
  readonly label: string
  readonly measurements: Measurement[]
}

const rows = new Map<string, Row>()
function record(label: string, m: Measurement): void {
  const row = rows.get(label) ?? { label, measurements: [] }
  row.measurements.push(m)
  rows.set(label, row)
  console.error(`  ${label}: ${Math.round(m.ops / m.seconds)} ops/s, Redis ${m.redisUsPerOp.toFixed(1)} µs/op`)
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b)
  return s[Math.floor((s.length - 1) / 2)] as number
}
const opsPerSecond = (label: string) => median(rows.get(label)!.measurements.map((m) => m.ops / m.seconds))
const usPerOp = (label: string) => median(rows.get(label)!.measurements.map((m) => m.redisUsPerOp))

const startedAt = new Date().toISOString()
const loadAtStart = loadAverage()
const machine = machineInfo()

const shardsUsed = new Set<number>()
if (args.only === 'all') {
// Sentinel: replicas 0 and 1, interleaved, order rotating per round.
console.error('Sentinel set: a primary, 2 replicas, 3 Sentinels')
const sentinel = await startSentinelSet()
const sentinelClient = new Redis({ sentinels: [...sentinel.sentinelAddresses], name: sentinel.name })
sentinelClient.on('error', () => {})
const sentinelPrimary = async () => [(await sentinel.primary()).port]
try {
  const lockers = { 0: new Locker(sentinelClient, { ttlMs: TTL_MS }), 1: new Locker(sentinelClient, { ttlMs: TTL_MS, replicas: 1 }) }
  for (let round = 0; round < args.rounds; round++) {
    for (const replicas of round % 2 === 0 ? ([0, 1] as const) : ([1, 0] as const)) {
      record(`sentinel uncontended, replicas ${replicas}`, await run(lockers[replicas], UNCONTENDED_WORKERS, false, args.seconds, sentinelPrimary))
      record(`sentinel contended, replicas ${replicas}`, await run(lockers[replicas], CONTENDED_WORKERS, true, args.seconds, sentinelPrimary))
    }
  }
  await Promise.all(Object.values(lockers).map((l) => l.close()))
} finally {
  sentinelClient.disconnect()
  await sentinel.dispose()
}

// Cluster of 3 shards against one redis-server, the same client code and workers.
console.error('Cluster: 3 shards, a replica each; and one redis-server')
const cluster = await startCluster()
const single: RedisServer = await startRedisServer()
const clusterClient = new Cluster([...cluster.nodes])
clusterClient.on('error', () => {})
const singleClient = new Redis({ host: single.host, port: single.port })
singleClient.on('error', () => {})
const clusterPrimaries = async () => {
  const ports = new Set<number>()
  for (const slot of [0, 5_500, 11_000]) ports.add((await cluster.primaryOf(slot)).port)
  return [...ports]
}
try {
  const clusterLocker = new Locker(clusterClient, { ttlMs: TTL_MS })
  const singleLocker = new Locker(singleClient, { ttlMs: TTL_MS })
  // The workers' resources land on every shard (CLUSTER KEYSLOT of their lock keys).
  for (let w = 0; w < UNCONTENDED_WORKERS; w++) shardsUsed.add((await cluster.primaryOf(await cluster.keySlot(`fencelock:{bench-ha:x:${w}}:lock`))).port)
  for (let round = 0; round < args.rounds; round++) {
    const order = round % 2 === 0 ? (['cluster', 'single'] as const) : (['single', 'cluster'] as const)
    for (const which of order) {
      if (which === 'cluster') record('cluster 3 shards, 50 workers, resources spread', await run(clusterLocker, UNCONTENDED_WORKERS, false, args.seconds, clusterPrimaries))
      else record('one redis-server, 50 workers', await run(singleLocker, UNCONTENDED_WORKERS, false, args.seconds, async () => [single.port]))
    }
  }
  await clusterLocker.close()
  await singleLocker.close()
} finally {
  clusterClient.disconnect()
  singleClient.disconnect()
  await cluster.dispose()
  await single.dispose()
}

}

/**
 * The median of the per-round ratios of `a` to `b` (both measured in the same round, one right
 * after the other): on a shared machine the load drifts between rounds, much less within one.
 */
const ratio = (a: string, b: string) => {
  const x = rows.get(a)!.measurements
  const y = rows.get(b)!.measurements
  return median(x.map((m, i) => m.ops / m.seconds / ((y[i] as Measurement).ops / (y[i] as Measurement).seconds)))
}
const extra = process.argv.slice(2).join(' ')
const command = `\`npm run bench:lock:ha${extra ? ` -- ${extra}` : ''}\` (\`node --import tsx bench/lock-ha.bench.ts\`)`
console.error('Cluster: classic vs sharded pub/sub')
const pubsubRows = await pubsubBench(args.rounds, args.seconds, (line) => console.error(line))
const pubsubBody = `## Waiting on a Redis Cluster: classic vs sharded pub/sub (issue 38)

- Command: ${command}, ${startedAt.slice(0, 16)} UTC
- Machine: ${machine.nproc} CPUs (${machine.cpuModel}), ${machine.totalMemGiB} GiB, ${machine.os}, Node ${machine.node}, redis-server ${machine.redisServer}; load average at start ${loadAtStart}, at end ${loadAverage()} (a shared machine: other sessions' tests ran meanwhile; times are not firm, counts are)

${pubsubRows.replace(/^### .*\n\n/, '')}`
console.log(pubsubBody)
if (args.write) {
  writeMarkedSection(BENCHMARKS_MD, 'bench:lock-ha-pubsub', pubsubBody)
  console.error(`written: ${BENCHMARKS_MD} (bench:lock-ha-pubsub)`)
}
if (args.only === 'pubsub') process.exit(0)

const uncontendedRatio = ratio('sentinel uncontended, replicas 1', 'sentinel uncontended, replicas 0')
const contendedRatio = ratio('sentinel contended, replicas 1', 'sentinel contended, replicas 0')
const table = [
  '| row | ops/s (median) | runs | Redis CPU per op, µs (primaries) |',
  '| --- | --- | --- | --- |',
  ...[...rows.values()].map((r) => `| ${r.label} | ${Math.round(opsPerSecond(r.label))} | ${r.measurements.map((m) => Math.round(m.ops / m.seconds)).join(', ')} | ${usPerOp(r.label).toFixed(1)} |`),
].join('\n')
const body = `## The lock on Sentinel and Cluster (issue 21)

- Command: \`npm run bench:lock:ha${extra ? ` -- ${extra}` : ''}\` (\`node --import tsx bench/lock-ha.bench.ts\`), ${startedAt.slice(0, 16)} UTC
- Machine: ${machine.nproc} CPUs (${machine.cpuModel}), ${machine.totalMemGiB} GiB, ${machine.os}, Node ${machine.node}, redis-server ${machine.redisServer}; load average at start ${loadAtStart}, at end ${loadAverage()} (a shared machine: other sessions' tests ran meanwhile)
- One Node process drives every row (one ioredis client, one \`Locker\`), acquire + release per operation, TTL ${TTL_MS / 1000} s; ${args.rounds} interleaved round(s) of ${args.seconds} s per row, order rotating. Uncontended: ${UNCONTENDED_WORKERS} workers, each its own resource; contended: ${CONTENDED_WORKERS} workers on one resource, holding 1 ms. Sets spawned by the devkit on loopback (Sentinel: a primary, 2 replicas, 3 Sentinels; Cluster: 3 primaries with a replica each); the Cluster workers' resources land on ${shardsUsed.size} of 3 shards (CLUSTER KEYSLOT).
- Redis CPU per op: \`used_cpu_user + used_cpu_sys\` of the primaries over the measurement, divided by the operations (replication to the replicas included).

${table}

- **\`replicas: 1\` costs** ${uncontendedRatio.toFixed(2)}× the ops/s of \`replicas: 0\` uncontended (median of the per-round ratios) (target ≥ 0.5×: ${uncontendedRatio >= 0.5 ? 'met' : '**missed**'}) and ${contendedRatio.toFixed(2)}× contended, in the same run.
- **Cluster**: ${ratio('cluster 3 shards, 50 workers, resources spread', 'one redis-server, 50 workers').toFixed(2)}× (median of the per-round ratios) the ops/s of one redis-server with the same client — one Node process is the bottleneck here, not the shards (each shard's Redis CPU per op is what sets a shard's ceiling: about ${Math.round(1e6 / usPerOp('one redis-server, 50 workers'))} lock operations per second per fully busy Redis core at ${usPerOp('one redis-server, 50 workers').toFixed(1)} µs/op).
`
console.log(body)
if (args.write) {
  writeMarkedSection(BENCHMARKS_MD, 'bench:lock-ha', body)
  console.error(`written: ${BENCHMARKS_MD}`)
}
process.exit(0)
