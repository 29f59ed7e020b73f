// One measurement of one contender, in a fresh process: `node --import tsx bench/lock-child.ts
// '<job json>'`, forked by bench/lock.bench.ts, which gets the result over IPC. Every contender
// runs in the same layout: this process, its connection(s) to the benchmark's own redis-server,
// plus one more connection that only reads INFO at the window's edges.
import { performance } from 'node:perf_hooks'
import { setTimeout as sleep } from 'node:timers/promises'
import { Redis } from 'ioredis'
import { loadContenders, type ContenderInstance, type Scenario } from './lock-contenders.js'
import { parseSnapshot, serverDelta, type ServerDelta, type ServerSnapshot } from './support/redis-info.js'

export interface ChildJob {
  contender: string
  modules: string[]
  scenario: Scenario
  host: string
  port: number
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
}

interface Common {
  contender: string
  scenario: Scenario
  workers: number
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
  scenario: 'uncontended'
  /** Acquire+release cycles completed in the window. */
  ops: number
}

export interface ContendedResult extends Common {
  scenario: 'contended' | 'fair'
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

export type ChildResult = UncontendedResult | ContendedResult

const job = JSON.parse(process.argv[2] ?? '') as ChildJob
// Belt and braces: the parent kills us by PID on its own deadline too.
setTimeout(() => process.exit(3), job.warmupMs + job.durationMs + 30_000).unref()

// Count every command sent by the contender's connections: with the server-side commandstats
// (which also count calls made inside Lua) this separates round trips from server work.
const sent = new Map<string, number>()
let sentTotal = 0
let admin: Redis | undefined
const proto = Redis.prototype as unknown as { sendCommand(this: Redis, command: { name: string }, stream?: unknown): unknown }
const sendCommand = proto.sendCommand
proto.sendCommand = function (command, stream) {
  if (this !== admin) {
    sentTotal++
    sent.set(command.name, (sent.get(command.name) ?? 0) + 1)
  }
  return sendCommand.call(this, command, stream)
}

async function connect(): Promise<Redis> {
  const redis = new Redis({ host: job.host, port: job.port })
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

async function snapshot(): Promise<Snapshot> {
  const text = (await admin!.info('commandstats')) + '\n' + (await admin!.info('cpu'))
  return { at: performance.now(), server: parseSnapshot(text), cpu: process.cpuUsage(), sent: new Map(sent), sentTotal }
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
    round: job.round,
    elapsedMs,
    sent: sentDelta,
    sentTotal: b.sentTotal - a.sentTotal,
    server: serverDelta(a.server, b.server),
    clientCpuUsec: b.cpu.user - a.cpu.user + (b.cpu.system - a.cpu.system),
    errors: Object.fromEntries(errors),
  }
}

async function main(): Promise<ChildResult> {
  const contender = (await loadContenders(job.modules)).find((c) => c.id === job.contender)
  if (!contender) throw new Error(`unknown contender "${job.contender}"`)
  admin = await connect()
  const ctx = { scenario: job.scenario, ttlMs: job.ttlMs, waitMs: job.waitMs }
  const instances: ContenderInstance[] = []
  const connections: Redis[] = []
  if (contender.layout === 'shared') {
    const redis = await connect()
    connections.push(redis)
    instances.push(await contender.create({ ...ctx, redis }))
  } else {
    for (let w = 0; w < job.workers; w++) {
      const redis = await connect()
      connections.push(redis)
      instances.push(await contender.create({ ...ctx, redis }))
    }
  }
  const instanceOf = (w: number) => instances[contender.layout === 'shared' ? 0 : w]!

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
    atWindowEnd?.()
    const b = await snapshot()
    // Counts freeze at windowEnd; the commands of the INFO round trip itself are noise (≤ 1 cycle per worker).
    stop = true
    return [a, b] as const
  }

  if (job.scenario === 'uncontended') {
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
    return { ...common(a, b, windowEnd - windowStart, errors), scenario: 'uncontended', ops }
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
    scenario: job.scenario === 'fair' ? 'fair' : 'contended',
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
    process.send!(result, () => process.exit(0))
  },
  (error: unknown) => {
    console.error(error)
    process.exit(2)
  },
)
