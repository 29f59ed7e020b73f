// The pub/sub part of `npm run bench:lock:ha` (issue 38): waiting on a Redis Cluster of 3 shards
// with classic pub/sub (PUBLISH, broadcast by the cluster bus to every node) against sharded
// pub/sub (SPUBLISH, heard on the owner's shard only), in the same run, rounds interleaved.
//
// Load: 50 resources spread over the 3 shards (CLUSTER KEYSLOT), each contended by LOCKERS
// Lockers (each its own Cluster client: waiters of one Locker are woken in-process, so only
// contention between Lockers goes through Redis pub/sub), holding 1 ms. Per mode:
// - waits: acquire() call to grant, p50 / p99;
// - Redis CPU per acquisition: `used_cpu_user + used_cpu_sys` of every node (primaries and their
//   replicas: the bus delivers classic messages to replicas too) over the measurement;
// - on one shard (the primary of slot 0): the pub/sub messages it handles per release announced
//   in the whole cluster: its own PUBLISH/SPUBLISH calls (from the scripts) plus those it receives
//   over the cluster bus (`CLUSTER INFO` cluster_stats_messages_publish_received /
//   publishshard_received), divided by every primary's PUBLISH/SPUBLISH calls.
import { randomBytes } from 'node:crypto'
import { redisCommand } from '@fencelock/devkit/redis-command'
import { startCluster, type ClusterSet } from '@fencelock/devkit/redis-topology'
import { Locker, type PubSubOption } from '@fencelock/lock'
import { Cluster } from 'ioredis'

const RESOURCES = 50
const LOCKERS = 4
const HOLD_MS = 1
const TTL_MS = 10_000

type Mode = Extract<PubSubOption, 'classic' | 'sharded'>

/** What one measurement saw. */
export interface PubSubMeasurement {
  readonly acquisitions: number
  readonly seconds: number
  readonly waitsMs: number[]
  /** Redis CPU of every node, seconds. */
  readonly cpuS: number
  /** Redis CPU of the observed shard's primary, seconds. */
  readonly shardCpuS: number
  /** Releases announced (PUBLISH or SPUBLISH calls on every primary). */
  readonly announced: number
  /** Messages the observed shard handled: its own announcements plus those it received over the bus. */
  readonly shardMessages: number
  /** Bus messages the observed shard received (publish or publishshard). */
  readonly shardBusReceived: number
}

interface NodeCounters {
  readonly cpuS: number
  readonly publish: number
  readonly spublish: number
  readonly busPublish: number
  readonly busPublishShard: number
}

async function counters(port: number): Promise<NodeCounters> {
  const cpu = await redisCommand(port, ['INFO', 'cpu'])
  const stats = await redisCommand(port, ['INFO', 'commandstats'])
  const bus = await redisCommand(port, ['CLUSTER', 'INFO'])
  const num = (text: string, re: string) => Number(new RegExp(re, 'm').exec(text)?.[1] ?? 0)
  return {
    cpuS: num(cpu, '^used_cpu_sys:(\\S+)') + num(cpu, '^used_cpu_user:(\\S+)'),
    publish: num(stats, '^cmdstat_publish:calls=(\\d+)'),
    spublish: num(stats, '^cmdstat_spublish:calls=(\\d+)'),
    busPublish: num(bus, '^cluster_stats_messages_publish_received:(\\d+)'),
    busPublishShard: num(bus, '^cluster_stats_messages_publishshard_received:(\\d+)'),
  }
}

async function primaryPorts(set: ClusterSet): Promise<number[]> {
  const ports = new Set<number>()
  for (const slot of [0, 5_500, 11_000]) ports.add((await set.primaryOf(slot)).port)
  return [...ports]
}

function quantile(xs: readonly number[], q: number): number {
  const s = [...xs].sort((a, b) => a - b)
  return s[Math.min(s.length - 1, Math.floor(q * s.length))] ?? Number.NaN
}

/** LOCKERS Lockers with `pubsub: mode`, each on its own Cluster client; closed by the caller. */
function lockersOf(set: ClusterSet, mode: Mode): { lockers: Locker[]; clients: Cluster[] } {
  const clients = Array.from({ length: LOCKERS }, () => {
    const c = new Cluster([...set.nodes])
    c.on('error', () => {})
    return c
  })
  // pollMs stays at its default: a waiter woken by its poll instead of a message shows in p99.
  return { clients, lockers: clients.map((c) => new Locker(c, { ttlMs: TTL_MS, pubsub: mode })) }
}

async function measure(set: ClusterSet, lockers: readonly Locker[], resources: readonly string[], seconds: number): Promise<PubSubMeasurement> {
  const all = set.servers.filter((s) => s.running).map((s) => s.port)
  const primaries = await primaryPorts(set)
  const observed = (await set.primaryOf(0)).port
  const before = new Map(await Promise.all(all.map(async (p) => [p, await counters(p)] as const)))
  const waitsMs: number[] = []
  let acquisitions = 0
  const start = performance.now()
  const until = start + seconds * 1_000
  await Promise.all(
    lockers.flatMap((locker) =>
      resources.map(async (resource) => {
        while (performance.now() < until) {
          const asked = performance.now()
          const lock = await locker.acquire(resource, { waitMs: 30_000 })
          waitsMs.push(performance.now() - asked)
          await new Promise((r) => setTimeout(r, HOLD_MS))
          await lock.release()
          acquisitions++
        }
      }),
    ),
  )
  const elapsed = (performance.now() - start) / 1_000
  const after = new Map(await Promise.all(all.map(async (p) => [p, await counters(p)] as const)))
  const delta = (p: number, f: keyof NodeCounters) => after.get(p)![f] - before.get(p)![f]
  const announced = primaries.reduce((n, p) => n + delta(p, 'publish') + delta(p, 'spublish'), 0)
  const shardBusReceived = delta(observed, 'busPublish') + delta(observed, 'busPublishShard')
  return {
    acquisitions,
    seconds: elapsed,
    waitsMs,
    cpuS: all.reduce((s, p) => s + delta(p, 'cpuS'), 0),
    shardCpuS: delta(observed, 'cpuS'),
    announced,
    shardMessages: delta(observed, 'publish') + delta(observed, 'spublish') + shardBusReceived,
    shardBusReceived,
  }
}

/** Runs the classic and sharded rounds, interleaved; returns the markdown rows and notes. */
export async function pubsubBench(rounds: number, seconds: number, log: (line: string) => void): Promise<string> {
  const set = await startCluster()
  const made = { classic: lockersOf(set, 'classic'), sharded: lockersOf(set, 'sharded') }
  const results: Record<Mode, PubSubMeasurement[]> = { classic: [], sharded: [] }
  let shards = 0
  let observedOwns = 0
  try {
    const tag = randomBytes(4).toString('hex')
    const resources = Array.from({ length: RESOURCES }, (_, i) => `bench-ps:${tag}:${i}`)
    const owners = new Set<number>()
    const observed = (await set.primaryOf(0)).port
    for (const r of resources) {
      const port = (await set.primaryOf(await set.keySlot(`fencelock:{${r}}:lock`))).port
      owners.add(port)
      if (port === observed) observedOwns++
    }
    shards = owners.size
    for (let round = 0; round < rounds; round++) {
      for (const mode of round % 2 === 0 ? (['classic', 'sharded'] as const) : (['sharded', 'classic'] as const)) {
        const m = await measure(set, made[mode].lockers, resources, seconds)
        results[mode].push(m)
        log(
          `  pubsub ${mode}: ${Math.round(m.acquisitions / m.seconds)} acq/s, wait p50 ${quantile(m.waitsMs, 0.5).toFixed(1)} ms p99 ${quantile(m.waitsMs, 0.99).toFixed(1)} ms, Redis ${((m.cpuS / m.acquisitions) * 1e6).toFixed(1)} µs/acq, shard msgs/release ${(m.shardMessages / m.announced).toFixed(2)}`,
        )
      }
    }
  } finally {
    for (const { lockers, clients } of Object.values(made)) {
      await Promise.all(lockers.map((l) => l.close()))
      for (const c of clients) c.disconnect()
    }
    await set.dispose()
  }
  const median = (xs: number[]) => quantile(xs, 0.5)
  const row = (mode: Mode) => {
    const ms = results[mode]
    const waits = ms.flatMap((m) => m.waitsMs)
    return {
      acqPerS: median(ms.map((m) => m.acquisitions / m.seconds)),
      p50: quantile(waits, 0.5),
      p99: quantile(waits, 0.99),
      usPerAcq: median(ms.map((m) => (m.cpuS / m.acquisitions) * 1e6)),
      shardUsPerAcq: median(ms.map((m) => (m.shardCpuS / m.acquisitions) * 1e6)),
      announced: ms.reduce((n, m) => n + m.announced, 0),
      acquisitions: ms.reduce((n, m) => n + m.acquisitions, 0),
      perRelease: ms.reduce((n, m) => n + m.shardMessages, 0) / Math.max(1, ms.reduce((n, m) => n + m.announced, 0)),
      busPerRelease: ms.reduce((n, m) => n + m.shardBusReceived, 0) / Math.max(1, ms.reduce((n, m) => n + m.announced, 0)),
    }
  }
  const c = row('classic')
  const s = row('sharded')
  const ratioOf = (f: (m: PubSubMeasurement) => number) =>
    median(results.sharded.map((m, i) => f(m) / f(results.classic[i]!)))
  const cpuRatio = ratioOf((m) => m.cpuS / m.acquisitions)
  const line = (mode: Mode, r: ReturnType<typeof row>) =>
    `| ${mode} | ${Math.round(r.acqPerS)} | ${r.p50.toFixed(1)} / ${r.p99.toFixed(1)} | ${r.usPerAcq.toFixed(1)} | ${r.shardUsPerAcq.toFixed(1)} | ${r.perRelease.toFixed(2)} | ${r.busPerRelease.toFixed(2)} | ${r.announced} / ${r.acquisitions} |`
  return `### Waiting on a Cluster: classic vs sharded pub/sub (issue 38)

- ${RESOURCES} resources on ${shards} of 3 shards (CLUSTER KEYSLOT), each contended by ${LOCKERS} Lockers (each its own ioredis \`Cluster\` client, one worker per resource each, holding ${HOLD_MS} ms), \`pubsub: 'classic'\` and \`pubsub: 'sharded'\` in the same run, ${rounds} interleaved round(s) of ${seconds} s each; a 3-primary Cluster with a replica each.
- Waits: \`acquire()\` call to grant, over every acquisition of the mode's rounds. Redis CPU: \`used_cpu_user + used_cpu_sys\` of all 6 nodes (classic messages reach replicas too), and of one shard's primary (slot 0), per acquisition, median of the rounds.
- Messages on one shard per release: that primary's own PUBLISH/SPUBLISH calls plus the pub/sub messages it received over the cluster bus (\`CLUSTER INFO\` publish_received + publishshard_received), divided by the releases announced in the whole cluster (every primary's PUBLISH/SPUBLISH calls; a release announces only when another Locker waits for it). Firm counts: classic ≈ 1 (every shard sees every release), sharded ≈ the shard's share of the releases (its own only; it owns ${observedOwns} of the ${RESOURCES} resources, ${(observedOwns / RESOURCES).toFixed(2)}).

| pubsub | acquisitions/s (median) | wait p50 / p99, ms | Redis CPU per acquisition, µs (6 nodes) | one shard's CPU per acquisition, µs | messages on one shard per release | of which over the bus | releases announced / acquisitions |
| --- | --- | --- | --- | --- | --- | --- | --- |
${line('classic', c)}
${line('sharded', s)}

- **Sharded / classic**, median of the per-round ratios: Redis CPU per acquisition ${cpuRatio.toFixed(2)}×; messages one shard handles per release ${(s.perRelease / c.perRelease).toFixed(2)}× (${c.perRelease.toFixed(2)} → ${s.perRelease.toFixed(2)}). With 3 shards the broadcast costs each shard 2 extra messages per release; on N shards it is N − 1, the load that saturated Redisson users' 20-node clusters.
`
}
