// `npm run bench:metrics`: what instrument() from @fencelock/metrics costs the lock, measured as
// throughput of our Locker without and with instrumentation, in the same run, on a redis-server
// of its own. Prints a markdown report and writes it into docs/BENCHMARKS.md between the
// bench:metrics markers (every other section is left as it is). Target: at most 5 % slower.
//
//   npm run bench:metrics                          full run (~4 min): 5 interleaved rounds
//   npm run bench:metrics -- --quick --no-write    smoke run (~15 s), file untouched
//   options: --rounds N  --slices N (a multiple of 4)  --slice-ms N  --quick  --no-write
//
// Scenarios: uncontended acquire + release by 1 worker and by 50 async workers sharing one
// connection (each worker its own resource), and 20 workers contending for one resource with a
// 1 ms hold. Each round runs every scenario in a fresh child process (this file with --child),
// whose workers run without pause while instrumentation is switched on and off in short slices
// (without, with, with, without, ...: ABBA, so a linear drift weighs on both alike); ops and CPU
// time are summed per variant. Slow drifts of a shared machine (other processes, frequency
// scaling) then hit both variants inside every second, which separate runs cannot promise. The
// ratio (with / without ops/s) is taken per round and summarised by its median.
import { fork, type ChildProcess } from 'node:child_process'
import { availableParallelism, cpus, loadavg } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { integerFlag, runCommand, UsageError, type CliSpec, type CliValues } from '@fencelock/devkit/cli'
import { redisServerVersion, startRedisServer } from '@fencelock/devkit/redis-server'
import { writeMarkedSection } from './support/docs-section.js'

const here = dirname(fileURLToPath(import.meta.url))
const BENCHMARKS_FILE = join(here, '..', 'docs', 'BENCHMARKS.md')
const SECTION = 'bench:metrics'
const TARGET_COST = 0.05

type Variant = 'without' | 'with'
type ScenarioId = 'uncontended-1' | 'uncontended-50' | 'contended-20'

interface Scenario {
  readonly id: ScenarioId
  readonly title: string
  readonly workers: number
  /** One resource for every worker (contended) or one per worker. */
  readonly shared: boolean
  readonly holdMs: number
}

const SCENARIOS: readonly Scenario[] = [
  { id: 'uncontended-1', title: 'uncontended, 1 worker', workers: 1, shared: false, holdMs: 0 },
  { id: 'uncontended-50', title: 'uncontended, 50 async workers, one connection', workers: 50, shared: false, holdMs: 0 },
  { id: 'contended-20', title: 'contended, 20 workers on one resource, 1 ms hold', workers: 20, shared: true, holdMs: 1 },
]

interface ChildJob {
  readonly port: number
  readonly scenario: Scenario
  readonly warmupMs: number
  readonly slices: number
  readonly sliceMs: number
  readonly run: string
}

interface VariantTotals {
  ops: number
  seconds: number
  /** Process CPU time (user + system), in microseconds. */
  cpuMicros: number
}

interface ChildResult {
  readonly without: VariantTotals
  readonly with: VariantTotals
  /** Acquires the metrics counted during the instrumented slices: proof they were instrumented. */
  readonly countedAcquires: number
}

// --- child: one scenario, instrumentation switched on and off in slices ---------------------------

async function runChild(job: ChildJob): Promise<ChildResult> {
  const { Redis } = await import('ioredis')
  const { Locker } = await import('@fencelock/lock')
  const { instrument } = await import('@fencelock/metrics')
  const { Registry } = await import('prom-client')
  const redis = new Redis({ host: '127.0.0.1', port: job.port })
  await redis.ping()
  const locker = new Locker(redis, { ttlMs: 10_000, waitMs: 30_000 })
  const registry = new Registry()
  const { scenario } = job
  const resourceOf = (worker: number) => (scenario.shared ? `bench:${job.run}` : `bench:${job.run}-${worker}`)
  const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

  let ops = 0
  let stopping = false
  const worker = async (index: number) => {
    const resource = resourceOf(index)
    while (!stopping) {
      const lock = await locker.acquire(resource)
      if (scenario.holdMs > 0) await sleep(scenario.holdMs)
      await lock.release()
      ops++
    }
  }
  const running = Array.from({ length: scenario.workers }, (_, i) => worker(i))

  let instrumentation: ReturnType<typeof instrument> | undefined
  const setVariant = (variant: Variant) => {
    if (variant === 'with' && !instrumentation) instrumentation = instrument(locker, { registry })
    if (variant === 'without' && instrumentation) {
      instrumentation.stop()
      instrumentation = undefined
    }
  }
  // Warm both paths up: the JIT must have compiled the lock with and without a listener.
  setVariant('with')
  await sleep(job.warmupMs / 2)
  setVariant('without')
  await sleep(job.warmupMs / 2)

  const totals: Record<Variant, VariantTotals> = {
    without: { ops: 0, seconds: 0, cpuMicros: 0 },
    with: { ops: 0, seconds: 0, cpuMicros: 0 },
  }
  const countedBefore = await countedAcquires(registry)
  for (let i = 0; i < job.slices; i++) {
    const variant: Variant = i % 4 === 0 || i % 4 === 3 ? 'without' : 'with'
    setVariant(variant)
    const ops0 = ops
    const cpu0 = process.cpuUsage()
    const t0 = performance.now()
    await sleep(job.sliceMs)
    const cpu = process.cpuUsage(cpu0)
    totals[variant].seconds += (performance.now() - t0) / 1000
    totals[variant].ops += ops - ops0
    totals[variant].cpuMicros += cpu.user + cpu.system
  }
  setVariant('without')
  const counted = (await countedAcquires(registry)) - countedBefore
  stopping = true
  await Promise.all(running)
  await locker.close()
  redis.disconnect()
  return { without: totals.without, with: totals.with, countedAcquires: counted }
}

async function countedAcquires(registry: import('prom-client').Registry): Promise<number> {
  const metric = registry.getSingleMetric('fencelock_acquire_total')
  if (!metric) return 0
  const values = (await metric.get()).values
  return values.filter((v) => v.labels.outcome === 'acquired').reduce((sum, v) => sum + v.value, 0)
}

// --- the listener alone: CPU per acquire + release, no Redis ---------------------------------------

/**
 * Feeds instrument()'s listener synthetic `acquired` + `released` pairs (50 resources, as the
 * 50-worker scenario has) and returns the median CPU time per pair over `rounds` runs, in ns.
 * Free of Redis and of the machine's other load, it shows what the throughput ratios are made of.
 */
async function listenerCostNs(rounds: number, pairs: number): Promise<number> {
  const { instrument } = await import('@fencelock/metrics')
  type Listener = Parameters<Parameters<typeof instrument>[0]['listen']>[0]
  let listener: Listener = () => {}
  const fake = {
    listen(l: Listener) {
      listener = l
      return () => {}
    },
  }
  instrument(fake)
  const events: Parameters<Listener>[0][] = []
  for (let i = 0; i < 50; i++) {
    const resource = `bench:${i}`
    const token = 1_700_000_000_000_000n + BigInt(i)
    events.push({ type: 'acquired', resource, token, ttlMs: 10_000, waitedMs: 0.4, attempts: 1 })
    events.push({ type: 'released', resource, token, heldMs: 0.8, outcome: 'released', wasLost: false })
  }
  const results: number[] = []
  for (let round = 0; round <= rounds; round++) {
    const cpu0 = process.cpuUsage()
    for (let i = 0; i < pairs; i++) {
      const j = (i % 50) * 2
      listener(events[j]!)
      listener(events[j + 1]!)
    }
    const cpu = process.cpuUsage(cpu0)
    // Round 0 warms the JIT up and is not counted.
    if (round > 0) results.push(((cpu.user + cpu.system) * 1000) / pairs)
  }
  return median(results)
}

// --- parent: the redis-server, the rounds, the report ----------------------------------------------

const CLI: CliSpec = {
  command: 'npm run bench:metrics --',
  summary: 'What instrument() of @fencelock/metrics costs the lock: throughput without and with it, in interleaved slices, on a redis-server of its own. Writes its section of docs/BENCHMARKS.md.',
  flags: {
    rounds: { type: 'string', value: '<n>', description: 'rounds, 1-100', default: '5 (1 with --quick)' },
    slices: { type: 'string', value: '<n>', description: 'slices per scenario, a multiple of 4, 4-400', default: '24 (8 with --quick)' },
    'slice-ms': { type: 'string', value: '<ms>', description: 'length of a slice, 50-60000', default: '500 (250 with --quick)' },
    quick: { type: 'boolean', description: 'a smoke run (~15 s)' },
    'no-write': { type: 'boolean', description: 'leave docs/BENCHMARKS.md untouched' },
  },
  notes: 'REDIS_SERVER_BIN (default redis-server). A missed target is reported, and the exit code stays 0.',
  failure: 'it broke off with an error',
}

async function main(values: CliValues): Promise<number> {
  const quick = values.quick === true
  const rounds = integerFlag(values, 'rounds', quick ? 1 : 5, 1, 100)
  const slices = integerFlag(values, 'slices', quick ? 8 : 24, 4, 400)
  const sliceMs = integerFlag(values, 'slice-ms', quick ? 250 : 500, 50, 60_000)
  if (slices % 4 !== 0) throw new UsageError(`--slices must be a multiple of 4 (got ${slices})`)
  const args = { 'no-write': values['no-write'] === true }
  const warmupMs = quick ? 500 : 2_000

  const loadBefore = loadavg()
  const server = await startRedisServer()
  const redisVersion = redisServerVersion()
  let child: ChildProcess | undefined
  const cleanUp = () => {
    if (child && child.exitCode === null) child.kill('SIGKILL')
    server.killNow()
  }
  process.on('SIGINT', () => {
    cleanUp()
    process.exit(130)
  })
  process.on('exit', cleanUp)

  const results = new Map<ScenarioId, ChildResult[]>()
  try {
    for (let round = 0; round < rounds; round++) {
      for (const scenario of SCENARIOS) {
        const job: ChildJob = { port: server.port, scenario, warmupMs, slices, sliceMs, run: `${round}-${Date.now()}` }
        child = fork(fileURLToPath(import.meta.url), ['--child'], { execArgv: ['--import', 'tsx'], stdio: 'inherit' })
        const result = await measure(child, job)
        child = undefined
        // An operation is counted in the slice where it ends, so a few of the 'with' operations
        // were acquired in the slice before, uninstrumented.
        if (result.countedAcquires < 0.9 * result.with.ops) {
          throw new Error(`the instrumented slices counted ${result.countedAcquires} acquires for ${result.with.ops} operations`)
        }
        results.set(scenario.id, [...(results.get(scenario.id) ?? []), result])
        const rate = (t: VariantTotals) => Math.round(t.ops / t.seconds).toString().padStart(7)
        const cpuPerOp = (t: VariantTotals) => (t.cpuMicros / Math.max(1, t.ops)).toFixed(1)
        console.error(
          `round ${round + 1}/${rounds} ${scenario.id.padEnd(15)} without ${rate(result.without)} ops/s ${cpuPerOp(result.without)} µs CPU/op | with ${rate(result.with)} ops/s ${cpuPerOp(result.with)} µs CPU/op | ratio ${(result.with.ops / result.with.seconds / (result.without.ops / result.without.seconds)).toFixed(3)}`,
        )
      }
    }
  } finally {
    await server.dispose()
  }
  const loadAfter = loadavg()
  const listenerNs = await listenerCostNs(5, quick ? 200_000 : 1_000_000)
  console.error(`listener alone: ${listenerNs.toFixed(0)} ns CPU per acquire + release`)

  const report = renderReport({ rounds, slices, sliceMs, warmupMs, loadBefore, loadAfter, redisVersion, results, quick, listenerNs })
  console.log(report)
  if (!args['no-write']) {
    writeMarkedSection(BENCHMARKS_FILE, SECTION, report)
    console.error(`wrote the ${SECTION} section of ${BENCHMARKS_FILE}`)
  }
  return 0
}

function measure(child: ChildProcess, job: ChildJob): Promise<ChildResult> {
  return new Promise((resolve, reject) => {
    let settled = false
    child.once('message', (msg: { ok: boolean; result?: ChildResult; error?: string }) => {
      settled = true
      if (msg.ok && msg.result) resolve(msg.result)
      else reject(new Error(`child failed: ${msg.error}`))
    })
    child.once('exit', (code) => {
      if (!settled) reject(new Error(`child exited with ${code} before reporting`))
    })
    child.send(job)
  })
}

// --- statistics and the report ---------------------------------------------------------------------

function median(values: number[]): number {
  const s = [...values].sort((a, b) => a - b)
  const mid = Math.floor(s.length / 2)
  return s.length % 2 === 1 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2
}

interface ReportInput {
  rounds: number
  slices: number
  sliceMs: number
  warmupMs: number
  loadBefore: number[]
  loadAfter: number[]
  redisVersion: string
  results: Map<ScenarioId, ChildResult[]>
  quick: boolean
  listenerNs: number
}

function renderReport(input: ReportInput): string {
  const fmtLoad = (l: number[]) => l.map((v) => v.toFixed(2)).join(' / ')
  const opsPerSecond = (t: VariantTotals) => t.ops / t.seconds
  const cpuPerOp = (t: VariantTotals) => t.cpuMicros / Math.max(1, t.ops)
  const rows: string[] = []
  let worst = Number.NEGATIVE_INFINITY
  for (const scenario of SCENARIOS) {
    const r = input.results.get(scenario.id)
    if (!r) continue
    const ratios = r.map((x) => opsPerSecond(x.with) / opsPerSecond(x.without))
    const ratio = median(ratios)
    const cost = 1 - ratio
    worst = Math.max(worst, cost)
    const range = ratios.length > 1 ? `${Math.min(...ratios).toFixed(3)}–${Math.max(...ratios).toFixed(3)}` : '—'
    const num = (v: number) => Math.round(v).toLocaleString('en-US')
    rows.push(
      `| ${scenario.title} | ${num(median(r.map((x) => opsPerSecond(x.without))))} | ${num(median(r.map((x) => opsPerSecond(x.with))))} | ${ratio.toFixed(3)} | ${range} | ${(cost * 100).toFixed(1)} % | ${median(r.map((x) => cpuPerOp(x.without))).toFixed(1)} → ${median(r.map((x) => cpuPerOp(x.with))).toFixed(1)} |`,
    )
  }
  const verdict =
    worst <= TARGET_COST
      ? `Within the target: the largest median cost is ${(worst * 100).toFixed(1)} % (target ≤ ${TARGET_COST * 100} %).`
      : `**Over the target**: the largest median cost is ${(worst * 100).toFixed(1)} % (target ≤ ${TARGET_COST * 100} %).`
  const cpu = cpus()[0]?.model ?? 'unknown CPU'
  return [
    '## Metrics overhead (`npm run bench:metrics`)',
    '',
    'Throughput of our Locker (acquire + release) without and with `instrument()` from',
    '`@fencelock/metrics` (one registry, default options), in the same run, on a dedicated',
    'redis-server. Each round runs each scenario in a fresh process whose workers never stop while',
    'instrumentation is switched off and on in alternating slices (ABBA); *ratio* is the median over',
    'rounds of (with / without) ops/s, *cost* is 1 − ratio, and the range shows the spread of the',
    'per-round ratios. CPU is the benchmark process\'s user + system time per operation (Redis excluded).',
    '',
    '| scenario | ops/s without | ops/s with | ratio | ratio range | cost | µs CPU/op without → with |',
    '| --- | ---: | ---: | ---: | --- | ---: | --- |',
    ...rows,
    '',
    verdict,
    '',
    `The listener alone (synthetic \`acquired\` + \`released\` events, no Redis) takes ${input.listenerNs.toFixed(0)} ns of CPU per`,
    'acquire + release, against the tens of µs of CPU the lock itself spends per operation above.',
    '',
    `${input.quick ? 'Quick run (`--quick`): indicative only. ' : ''}${input.rounds} round(s); per scenario and round ${input.warmupMs / 1000} s of warm-up, then ${input.slices} slices of ${input.sliceMs} ms.`,
    `Machine: ${availableParallelism()} cores, ${cpu}, Node ${process.version}, redis-server ${input.redisVersion};`,
    `load average (1/5/15 min) ${fmtLoad(input.loadBefore)} before, ${fmtLoad(input.loadAfter)} after; ${new Date().toISOString().slice(0, 10)}.`,
  ].join('\n')
}

// --- docs/BENCHMARKS.md ----------------------------------------------------------------------------


// --- entry point (last, so every declaration above is initialised) ----------------------------------

if (process.argv.includes('--child')) {
  process.once('message', (job: ChildJob) => {
    runChild(job).then(
      (result) => process.send!({ ok: true, result }, () => process.exit(0)),
      (error: unknown) => process.send!({ ok: false, error: String((error as Error)?.stack ?? error) }, () => process.exit(1)),
    )
  })
} else {
  await runCommand(CLI, process.argv.slice(2), main)
}
