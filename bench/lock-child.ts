// One measurement of one contender, in a fresh process: `node --import tsx bench/lock-child.ts
// '<job json>'`, forked by bench/lock.bench.ts, which gets the result over IPC. Every contender
// runs in the same layout: this process, its connection(s) to the benchmark's own redis-server(s)
// (one per server and instance; N in the quorum scenarios), plus one more connection per server
// that only reads INFO at the window's edges.
import { performance } from 'node:perf_hooks'
import { setTimeout as sleep } from 'node:timers/promises'
import { Redis } from 'ioredis'
import { loadContenders, type ContenderInstance, type Scenario } from './lock-contenders.js'
import { faultMs, runDegraded, runMajorityDown, type FaultPlan, type FaultResult } from './lock-quorum-faults.js'
import { parseSnapshot, serverDelta, type ServerDelta, type ServerSnapshot } from './support/redis-info.js'

export interface ServerAddress {
  host: string
  port: number
}

export interface ChildJob {
  contender: string
  modules: string[]
  scenario: Scenario
  /** The redis-server of the run, or the N of a quorum scenario (one connection to each). */
  servers: ServerAddress[]
  workers: number
  warmupMs: number
  durationMs: number
  /** Contended and fair: how long each holder keeps the lock, in ms. */
  holdMs: number
  ttlMs: number
  /** How long an acquire may wait, in ms; undefined: each library's default. */
  waitMs?: number
  /** Unique per child run, so no run sees another's keys. */
  keyPrefix: string
  /** The round this run belongs to (runs of one round are compared with each other). */
  round: number
  /** quorum-degraded and quorum-majority-down: the servers to kill, and the run after it. */
  fault?: FaultPlan
}

/** Messages of a child to the parent: its result, a partial one (fault runs), a request to kill servers. */
export type ChildMessage = { type: 'result'; result: ChildResult } | { type: 'progress'; result: FaultResult } | { type: 'kill'; servers: number[] }
/** The parent's answer to a `kill` message, once those servers are gone. */
export interface KilledMessage {
  type: 'killed'
}

interface Common {
  contender: string
  scenario: Scenario
  workers: number
  /** How many redis-servers the contender ran on (absent in results saved before quorum mode: 1). */
  nodes?: number
  /** The round of the run (absent in results saved before it was recorded). */
  round?: number
  /** Length of the measured window (after warm-up), in ms. */
  elapsedMs: number
  /** Commands this process sent (all its connections but the INFO one), per name. */
  sent: Record<string, number>
  sentTotal: number
  /** What Redis executed in the window (commandstats, including calls inside Lua). */
  server: ServerDelta
  /** CPU time of this process in the window (user + system), in µs. */
  clientCpuUsec: number
  /** Failed acquires in the window, by error name. */
  errors: Record<string, number>
}

export interface UncontendedResult extends Common {
  scenario: 'uncontended' | 'quorum-uncontended'
  /** Acquire+release cycles completed in the window. */
  ops: number
}

export interface ContendedResult extends Common {
  scenario: 'contended' | 'fair' | 'quorum-contended'
  acquisitions: number
  /** Time from calling acquire to holding the lock, per acquisition in the window, in ms. */
  waitsMs: number[]
  /** How long each acquire that failed in the window (e.g. LockTimeoutError) had waited, in ms. */
  failedWaitsMs: number[]
  /** Acquires still waiting when the window closed: how long they had waited by then, in ms. */
  pendingWaitsMs: number[]
  /** From the previous holder's release resolving to this acquire resolving, in ms. */
  gapsMs: number[]
  perWorker: number[]
  /** Times two workers held the lock at once (must be 0). */
  overlaps: number
}

export type ChildResult = UncontendedResult | ContendedResult | FaultResult

const job = JSON.parse(process.argv[2] ?? '') as ChildJob
// Belt and braces: the parent kills us by PID on its own deadline too.
setTimeout(() => process.exit(3), job.warmupMs + job.durationMs + faultMs(job.fault) + 30_000).unref()

// Count every command sent by the contender's connections: with the server-side commandstats
// (which also count calls made inside Lua) this separates round trips from server work. A
// command sent while its connection is down counts too (it waits in ioredis's offline queue).
const sent = new Map<string, number>()
let sentTotal = 0
const admins = new Set<Redis>()
const proto = Redis.prototype as unknown as { sendCommand(this: Redis, command: { name: string }, stream?: unknown): unknown }
const sendCommand = proto.sendCommand
proto.sendCommand = function (command, stream) {
  if (!admins.has(this)) {
    sentTotal++
    sent.set(command.name, (sent.get(command.name) ?? 0) + 1)
  }
  return sendCommand.call(this, command, stream)
}

/** 'error' events of the contender's connections (a killed server makes them). */
let clientErrors = 0

/** One connection at ioredis's defaults, ready; an 'error' listener only counts (no other handling). */
async function connect(server: ServerAddress): Promise<Redis> {
  const redis = new Redis({ host: server.host, port: server.port })
  redis.on('error', () => {
    if (!admins.has(redis)) clientErrors++
  })
  await new Promise<void>((resolve, reject) => {
    redis.once('ready', resolve)
    redis.once('error', reject)
  })
  return redis
}

interface Snapshot {
  at: number
  server: ServerSnapshot
  cpu: NodeJS.CpuUsage
  sent: Map<string, number>
  sentTotal: number
}

/** INFO of every server, summed (a quorum's N servers count as one). */
async function snapshot(): Promise<Snapshot> {
  const texts = await Promise.all([...admins].map(async (admin) => (await admin.info('commandstats')) + '\n' + (await admin.info('cpu'))))
  return { at: performance.now(), server: sumSnapshots(texts.map(parseSnapshot)), cpu: process.cpuUsage(), sent: new Map(sent), sentTotal }
}

function sumSnapshots(snapshots: ServerSnapshot[]): ServerSnapshot {
  const commands = new Map<string, { calls: number; usec: number }>()
  let cpuSec = 0
  for (const s of snapshots) {
    cpuSec += s.cpuSec
    for (const [name, stat] of s.commands) {
      const sum = commands.get(name) ?? { calls: 0, usec: 0 }
      commands.set(name, { calls: sum.calls + stat.calls, usec: sum.usec + stat.usec })
    }
  }
  return { commands, cpuSec }
}

/** `elapsedMs` is the window ops are counted in; the INFO snapshots bracket it within a round trip. */
function common(a: Snapshot, b: Snapshot, elapsedMs: number, errors: Map<string, number>): Common {
  const sentDelta: Record<string, number> = {}
  for (const [name, n] of b.sent) {
    const d = n - (a.sent.get(name) ?? 0)
    if (d > 0) sentDelta[name] = d
  }
  return {
    contender: job.contender,
    scenario: job.scenario,
    workers: job.workers,
    nodes: job.servers.length,
    round: job.round,
    elapsedMs,
    sent: sentDelta,
    sentTotal: b.sentTotal - a.sentTotal,
    server: serverDelta(a.server, b.server),
    clientCpuUsec: b.cpu.user - a.cpu.user + (b.cpu.system - a.cpu.system),
    errors: Object.fromEntries(errors),
  }
}

/** Asks the parent to SIGKILL these servers (indices into `job.servers`); resolves once they are gone. */
function killServers(servers: number[]): Promise<void> {
  return new Promise((resolve) => {
    const onMessage = (m: unknown) => {
      if ((m as Partial<KilledMessage>).type !== 'killed') return
      process.off('message', onMessage)
      resolve()
    }
    process.on('message', onMessage)
    process.send!({ type: 'kill', servers } satisfies ChildMessage)
  })
}

async function main(): Promise<ChildResult> {
  const contender = (await loadContenders(job.modules)).find((c) => c.id === job.contender)
  if (!contender) throw new Error(`unknown contender "${job.contender}"`)
  for (const server of job.servers) admins.add(await connect(server))
  const ctx = { scenario: job.scenario, ttlMs: job.ttlMs, waitMs: job.waitMs }
  const instances: ContenderInstance[] = []
  const connections: Redis[] = []
  const open = async () => {
    const nodes: Redis[] = []
    for (const server of job.servers) nodes.push(await connect(server))
    connections.push(...nodes)
    instances.push(await contender.create({ ...ctx, redis: nodes[0]!, nodes }))
  }
  if (contender.layout === 'shared') await open()
  else for (let w = 0; w < job.workers; w++) await open()
  const instanceOf = (w: number) => instances[contender.layout === 'shared' ? 0 : w]!

  if (job.scenario === 'quorum-degraded' || job.scenario === 'quorum-majority-down') {
    if (!job.fault) throw new Error(`${job.scenario} needs a fault plan`)
    const harness = {
      job: { ...job, fault: job.fault },
      instanceOf,
      connections,
      sentTotal: () => sentTotal,
      clientErrors: () => clientErrors,
      killServers,
      progress: (result: FaultResult) => process.send!({ type: 'progress', result } satisfies ChildMessage),
    }
    return job.scenario === 'quorum-degraded' ? runDegraded(harness) : runMajorityDown(harness)
  }

  const errors = new Map<string, number>()
  let stop = false
  let windowStart = Number.POSITIVE_INFINITY
  let windowEnd = Number.POSITIVE_INFINITY
  const inWindow = (t: number) => t >= windowStart && t < windowEnd

  const onError = async (error: unknown) => {
    const t = performance.now()
    if (inWindow(t)) {
      const name = error instanceof Error ? error.name : typeof error
      errors.set(name, (errors.get(name) ?? 0) + 1)
    }
    // Never spin on a failing Redis: the failure is what gets reported.
    await sleep(1)
  }

  const measure = async (atWindowEnd?: () => void) => {
    await sleep(job.warmupMs)
    const a = await snapshot()
    windowStart = a.at
    await sleep(job.durationMs)
    windowEnd = performance.now()
    // The client's counts freeze at windowEnd, as ops do (the INFO round trips of N servers
    // would otherwise add up to a cycle per worker); the server's include those round trips.
    const edge = { cpu: process.cpuUsage(), sent: new Map(sent), sentTotal }
    atWindowEnd?.()
    const b = { ...(await snapshot()), ...edge }
    stop = true
    return [a, b] as const
  }

  if (job.scenario === 'uncontended' || job.scenario === 'quorum-uncontended') {
    let ops = 0
    const worker = async (w: number) => {
      const instance = instanceOf(w)
      const key = `${job.keyPrefix}:u:${w}`
      while (!stop) {
        let release
        try {
          release = await instance.acquire(key)
          await release()
        } catch (error) {
          await onError(error)
          continue
        }
        const t = performance.now()
        if (t >= windowStart && t < windowEnd) ops++
      }
    }
    for (let w = 0; w < job.workers; w++) void worker(w)
    const [a, b] = await measure()
    return { ...common(a, b, windowEnd - windowStart, errors), scenario: job.scenario, ops }
  }

  const key = `${job.keyPrefix}:c`
  let holders = 0
  let overlaps = 0
  // Grants in order; the gap of grant k is measured against the release of grant k-1.
  const acquiredAt: number[] = []
  const releasedAt: number[] = []
  const waitsMs: number[] = []
  const failedWaitsMs: number[] = []
  const gapIndex: number[] = []
  const perWorker = new Array<number>(job.workers).fill(0)
  const waitingSince = new Array<number | undefined>(job.workers).fill(undefined)
  const worker = async (w: number) => {
    const instance = instanceOf(w)
    while (!stop) {
      const t0 = performance.now()
      waitingSince[w] = t0
      let release
      try {
        release = await instance.acquire(key)
      } catch (error) {
        // A worker that gave up waited too: leaving it out would flatter the wait percentiles.
        const t = performance.now()
        waitingSince[w] = undefined
        if (inWindow(t)) failedWaitsMs.push(t - t0)
        await onError(error)
        continue
      }
      const t1 = performance.now()
      waitingSince[w] = undefined
      const seq = acquiredAt.push(t1) - 1
      if (++holders > 1) overlaps++
      if (inWindow(t1)) {
        waitsMs.push(t1 - t0)
        perWorker[w]!++
        gapIndex.push(seq)
      }
      await sleep(job.holdMs)
      holders--
      try {
        await release()
      } catch (error) {
        await onError(error)
      }
      releasedAt[seq] = performance.now()
    }
  }
  for (let w = 0; w < job.workers; w++) void worker(w)
  // A starved worker never completes an acquire: count its wait so far, or it would not show.
  let pendingWaitsMs: number[] = []
  const [a, b] = await measure(() => {
    pendingWaitsMs = waitingSince.flatMap((t0) => (t0 === undefined ? [] : [windowEnd - t0]))
  })
  const gapsMs: number[] = []
  for (const seq of gapIndex) {
    const prev = releasedAt[seq - 1]
    if (seq > 0 && prev !== undefined) gapsMs.push(acquiredAt[seq]! - prev)
  }
  return {
    ...common(a, b, windowEnd - windowStart, errors),
    scenario: job.scenario === 'fair' || job.scenario === 'quorum-contended' ? job.scenario : 'contended',
    acquisitions: waitsMs.length,
    waitsMs,
    failedWaitsMs,
    pendingWaitsMs,
    gapsMs,
    perWorker,
    overlaps,
  }
}

main().then(
  (result) => {
    // Exit without draining the workers: blocked acquires would otherwise keep polling.
    process.send!({ type: 'result', result } satisfies ChildMessage, () => process.exit(0))
  },
  (error: unknown) => {
    console.error(error)
    process.exit(2)
  },
)
