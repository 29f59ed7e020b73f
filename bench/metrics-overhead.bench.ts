// `npm run bench:metrics`: what instrument() from @fencelock/metrics costs the lock, measured as
// throughput of our Locker without and with instrumentation, in the same run, on a redis-server
// of its own. Prints a markdown report and writes it into docs/BENCHMARKS.md between the
// bench:metrics markers (every other section is left as it is). Target: at most 5 % slower.
//
//   npm run bench:metrics                          full run (~6 min): 5 interleaved rounds
//   npm run bench:metrics -- --quick --no-write    smoke run (~30 s), file untouched
//   options: --rounds N  --slices N (a multiple of 12)  --slice-ms N  --quick  --no-write
//
// Scenarios: uncontended acquire + release by 1 worker and by 50 async workers sharing one
// connection (each worker its own resource), and 20 workers contending for one resource with a
// 1 ms hold. Each round runs every scenario in two fresh child processes (this file with
// --child): one compares the metrics paths with no instrumentation, the other the spans with no
// instrumentation (the garbage a span per acquire leaves would otherwise land in the metrics
// paths' slices). A child's workers run without pause while the variant is switched in short
// slices, in mirrored blocks (without, prom-client, OpenTelemetry, OpenTelemetry, prom-client,
// without; or without, spans, spans, without: a linear drift weighs on every variant alike); the
// first fifth of a slice settles and is not counted; ops and CPU time are summed per variant.
// Slow drifts of a shared machine (other processes, frequency scaling) then hit every variant
// inside every few seconds, which separate runs cannot promise. Each ratio (variant / without
// ops/s) is taken per block (one stretch of the machine's load) and summarised by its median over
// the blocks of every round, with its interquartile range.
import { fork, type ChildProcess } from 'node:child_process'
import { createRequire } from 'node:module'
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

/** What the lock runs with in a slice. */
type Variant = 'without' | 'prom' | 'otel' | 'otelp' | 'spans'
type Instrumented = Exclude<Variant, 'without'>
/** The variants of each child, in the order of the first half of its mirrored block. */
const CHILDREN = Object.freeze({
  metrics: ['without', 'prom', 'otel', 'otelp'],
  spans: ['without', 'spans'],
} as const satisfies Record<string, readonly Variant[]>)
type ChildKind = keyof typeof CHILDREN
/** Slices of one mirrored block: the variants, then the same reversed. */
const blockOf = (variants: readonly Variant[]): Variant[] => [...variants, ...[...variants].reverse()]
/** `--slices` must fill whole blocks of every child. */
const SLICE_MULTIPLE = 8
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
  readonly kind: ChildKind
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
  readonly totals: Partial<Record<Variant, VariantTotals>>
  /** The same per mirrored block of slices: each block compares its variants under one stretch of load. */
  readonly blocks: Partial<Record<Variant, VariantTotals>>[]
  /**
   * What each instrumented variant counted during its slices (acquires; spans exported, for
   * `spans`): proof it was instrumented.
   */
  readonly counted: Partial<Record<Instrumented, number>>
  readonly spansExported: number
}

/** One scenario of one round: its two children. */
type RoundResult = Record<ChildKind, ChildResult>

// --- child: one scenario, instrumentation switched on and off in slices ---------------------------

async function runChild(job: ChildJob): Promise<ChildResult> {
  const { Redis } = await import('ioredis')
  const { Locker } = await import('@fencelock/lock')
  const { Registry } = await import('prom-client')
  const redis = new Redis({ host: '127.0.0.1', port: job.port })
  await redis.ping()
  const locker = new Locker(redis, { ttlMs: 10_000, waitMs: 30_000 })
  const { scenario } = job
  const resourceOf = (worker: number) => (scenario.shared ? `bench:${job.run}` : `bench:${job.run}-${worker}`)
  const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))
  const variants: readonly Variant[] = CHILDREN[job.kind]
  const paths = await instrumentations(locker, new Registry(), variants.includes('spans'))

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

  let current: Variant = 'without'
  let stop: (() => void) | undefined
  const setVariant = (variant: Variant) => {
    if (variant === current) return
    stop?.()
    stop = variant === 'without' ? undefined : paths[variant].start()
    current = variant
  }
  // Warm every path up: the JIT must have compiled the lock with and without each listener.
  for (const variant of [...variants.slice(1), 'without'] as const) {
    setVariant(variant)
    await sleep(job.warmupMs / variants.length)
  }

  const instrumented = variants.filter((v): v is Instrumented => v !== 'without')
  const totals: Partial<Record<Variant, VariantTotals>> = Object.fromEntries(variants.map((v) => [v, { ops: 0, seconds: 0, cpuMicros: 0 }]))
  const before = await countAll(paths, instrumented)
  const spansBefore = await paths.spans.exported()
  const block = blockOf(variants)
  const blocks: Partial<Record<Variant, VariantTotals>>[] = []
  // A switch leaves the previous variant's garbage and cold caches behind: not counted.
  const settleMs = job.sliceMs / 5
  for (let i = 0; i < job.slices; i++) {
    const variant = block[i % block.length]!
    if (i % block.length === 0) blocks.push(Object.fromEntries(variants.map((v) => [v, { ops: 0, seconds: 0, cpuMicros: 0 }])))
    setVariant(variant)
    await sleep(settleMs)
    const ops0 = ops
    const cpu0 = process.cpuUsage()
    const t0 = performance.now()
    await sleep(job.sliceMs - settleMs)
    const cpu = process.cpuUsage(cpu0)
    const seconds = (performance.now() - t0) / 1000
    for (const t of [totals[variant]!, blocks.at(-1)![variant]!]) {
      t.seconds += seconds
      t.ops += ops - ops0
      t.cpuMicros += cpu.user + cpu.system
    }
  }
  setVariant('without')
  const after = await countAll(paths, instrumented)
  const counted = Object.fromEntries(instrumented.map((v) => [v, after[v]! - before[v]!]))
  const spansExported = (await paths.spans.exported()) - spansBefore
  stopping = true
  await Promise.all(running)
  await locker.close()
  redis.disconnect()
  await paths.shutdown()
  return { totals, blocks, counted, spansExported }
}

async function countAll(paths: Record<Instrumented, Path>, variants: readonly Instrumented[]): Promise<Partial<Record<Instrumented, number>>> {
  const counts: Partial<Record<Instrumented, number>> = {}
  for (const v of variants) counts[v] = await paths[v].counted()
  return counts
}

interface Path {
  /** Instruments the locker; returns what stops it. */
  start(): () => void
  /** Acquires this path has counted so far (read from what it exports). */
  counted(): Promise<number>
  /** Spans exported so far (0 for a path without spans). */
  exported(): Promise<number>
}

/**
 * The instrumented variants: prom-client into a registry; OpenTelemetry's metrics on the real
 * SDK (a MeterProvider whose reader is the Prometheus exporter, read only when asked, as a scrape
 * would); the same plus spans (an AlwaysOn tracer provider, a batch span processor, an exporter
 * that counts and drops; with `traced`, Node's AsyncLocalStorage context manager registered, as
 * the Node SDK does). Each OpenTelemetry variant has a meter provider of its own, so each counts
 * its own slices.
 */
async function instrumentations(locker: InstrumentableLocker, registry: import('prom-client').Registry, traced: boolean) {
  const { instrument } = await import('@fencelock/metrics')
  const { instrumentOpenTelemetry, lockHistogramProducer, OTEL_INSTRUMENTS, OTEL_ATTRIBUTES } = await import('@fencelock/metrics/opentelemetry')
  const { context } = await import('@opentelemetry/api')
  const { AsyncLocalStorageContextManager } = await import('@opentelemetry/context-async-hooks')
  const { MeterProvider } = await import('@opentelemetry/sdk-metrics')
  const { PrometheusExporter } = await import('@opentelemetry/exporter-prometheus')
  const { BasicTracerProvider, BatchSpanProcessor } = await import('@opentelemetry/sdk-trace-base')
  // As the Node SDK sets a process up: spans find their parent through AsyncLocalStorage.
  if (traced) context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable())

  const otelPath = (traced: boolean, produced = false) => {
    const histograms = produced ? lockHistogramProducer() : undefined
    const reader = new PrometheusExporter({ preventServerStart: true, metricProducers: histograms ? [histograms] : [] })
    const meterProvider = new MeterProvider({ readers: [reader] })
    let exported = 0
    const processor = new BatchSpanProcessor({
      export: (spans, done) => {
        exported += spans.length
        done({ code: 0 })
      },
      shutdown: async () => {},
    })
    const tracerProvider = new BasicTracerProvider({ spanProcessors: [processor] })
    return {
      start: () => {
        const i = instrumentOpenTelemetry(locker, { meterProvider, tracerProvider, traces: traced, histograms })
        return () => i.stop()
      },
      counted: async () => {
        const { resourceMetrics } = await reader.collect()
        const metric = resourceMetrics.scopeMetrics.flatMap((s) => s.metrics).find((m) => m.descriptor.name === OTEL_INSTRUMENTS.acquires)
        const points = (metric?.dataPoints ?? []) as { attributes: Record<string, unknown>; value: number }[]
        return points.filter((p) => p.attributes[OTEL_ATTRIBUTES.acquireOutcome] === 'acquired').reduce((sum, p) => sum + p.value, 0)
      },
      exported: async () => {
        await processor.forceFlush()
        return exported
      },
      shutdown: async () => {
        await Promise.all([meterProvider.shutdown(), tracerProvider.shutdown()])
      },
    }
  }
  const otel = otelPath(false)
  const otelp = otelPath(false, true)
  const spans = otelPath(true)
  const prom: Path = {
    start: () => {
      const i = instrument(locker, { registry })
      return () => i.stop()
    },
    counted: () => countedAcquires(registry),
    exported: async () => 0,
  }
  return {
    prom,
    otel: otel as Path,
    otelp: otelp as Path,
    spans: spans as Path,
    shutdown: async () => {
      await Promise.all([otel.shutdown(), otelp.shutdown(), spans.shutdown()])
      context.disable()
    },
  }
}

type InstrumentableLocker = import('@fencelock/metrics').InstrumentableLocker

async function countedAcquires(registry: import('prom-client').Registry): Promise<number> {
  const metric = registry.getSingleMetric('fencelock_acquire_total')
  if (!metric) return 0
  const values = (await metric.get()).values
  return values.filter((v) => v.labels.outcome === 'acquired').reduce((sum, v) => sum + v.value, 0)
}

// --- the listener alone: CPU per acquire + release, no Redis ---------------------------------------

type Listener = Parameters<InstrumentableLocker['listen']>[0]

/**
 * Feeds each path's listener synthetic `acquired` + `released` pairs (50 resources, as the
 * 50-worker scenario has) and returns the median CPU time per pair over `rounds` runs, in ns.
 * Free of Redis and of the machine's other load, it shows what the throughput ratios are made of.
 * The paths run on the same set-up as in the children (a dedicated meter provider, spans through
 * a batch processor to an exporter that drops them).
 */
async function listenerCostsNs(rounds: number, pairs: number): Promise<Record<Instrumented, number>> {
  const { Registry } = await import('prom-client')
  const costs = {} as Record<Instrumented, number>
  for (const variant of ['prom', 'otel', 'otelp', 'spans'] as const) {
    let listener: Listener = () => {}
    const fake: InstrumentableLocker = {
      listen(l: Listener) {
        listener = l
        return () => {}
      },
    }
    const paths = await instrumentations(fake, new Registry(), variant === 'spans')
    const stop = paths[variant].start()
    costs[variant] = listenerCost(() => listener, rounds, pairs)
    stop()
    await paths.shutdown()
  }
  return costs
}

function listenerCost(listenerOf: () => Listener, rounds: number, pairs: number): number {
  const listener = listenerOf()
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
  summary:
    'What the instrumentation of @fencelock/metrics costs the lock, prom-client and OpenTelemetry (with and without spans): throughput without and with each, in interleaved slices, on a redis-server of its own. Writes its section of docs/BENCHMARKS.md.',
  flags: {
    rounds: { type: 'string', value: '<n>', description: 'rounds, 1-100', default: '5 (1 with --quick)' },
    slices: { type: 'string', value: '<n>', description: 'slices per scenario, a multiple of 8, 8-400', default: '24 (16 with --quick)' },
    'slice-ms': { type: 'string', value: '<ms>', description: 'length of a slice, 50-60000', default: '500 (250 with --quick)' },
    quick: { type: 'boolean', description: 'a smoke run (~20 s)' },
    'no-write': { type: 'boolean', description: 'leave docs/BENCHMARKS.md untouched' },
  },
  notes: 'REDIS_SERVER_BIN (default redis-server). A missed target is reported, and the exit code stays 0.',
  failure: 'it broke off with an error',
}

async function main(values: CliValues): Promise<number> {
  const quick = values.quick === true
  const rounds = integerFlag(values, 'rounds', quick ? 1 : 5, 1, 100)
  const slices = integerFlag(values, 'slices', quick ? 16 : 24, SLICE_MULTIPLE, 400)
  const sliceMs = integerFlag(values, 'slice-ms', quick ? 250 : 500, 50, 60_000)
  if (slices % SLICE_MULTIPLE !== 0) throw new UsageError(`--slices must be a multiple of ${SLICE_MULTIPLE} (got ${slices})`)
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

  const results = new Map<ScenarioId, RoundResult[]>()
  try {
    for (let round = 0; round < rounds; round++) {
      for (const scenario of SCENARIOS) {
        const both = {} as RoundResult
        for (const kind of Object.keys(CHILDREN) as ChildKind[]) {
          const job: ChildJob = { port: server.port, kind, scenario, warmupMs, slices, sliceMs, run: `${round}-${kind}-${Date.now()}` }
          child = fork(fileURLToPath(import.meta.url), ['--child'], { execArgv: ['--import', 'tsx'], stdio: 'inherit' })
          const result = await measure(child, job)
          child = undefined
          checkInstrumented(kind, result)
          both[kind] = result
          const base = opsPerSecond(result.totals.without!)
          const line = CHILDREN[kind].map((v) => {
            const t = result.totals[v]!
            const ratio = v === 'without' ? '' : ` (${(opsPerSecond(t) / base).toFixed(3)})`
            return `${v} ${Math.round(opsPerSecond(t))} ops/s${ratio} ${cpuPerOp(t).toFixed(1)} µs`
          })
          console.error(`round ${round + 1}/${rounds} ${scenario.id.padEnd(15)} ${line.join(' | ')}`)
        }
        results.set(scenario.id, [...(results.get(scenario.id) ?? []), both])
      }
    }
  } finally {
    await server.dispose()
  }
  const loadAfter = loadavg()
  const listenerNs = await listenerCostsNs(5, quick ? 100_000 : 500_000)
  console.error(`listener alone, ns CPU per acquire + release: ${JSON.stringify(listenerNs)}`)

  const report = renderReport({ rounds, slices, sliceMs, warmupMs, loadBefore, loadAfter, redisVersion, results, quick, listenerNs })
  console.log(report)
  if (!args['no-write']) {
    writeMarkedSection(BENCHMARKS_FILE, SECTION, report)
    console.error(`wrote the ${SECTION} section of ${BENCHMARKS_FILE}`)
  }
  return 0
}

/**
 * Each instrumented variant counted (nearly) every operation of its slices. An operation is
 * counted in the slice where it ends, so a few were acquired in the slice before, under another
 * variant; and the settling fifth of each slice adds operations counted but not timed.
 */
function checkInstrumented(kind: ChildKind, result: ChildResult): void {
  for (const variant of CHILDREN[kind]) {
    if (variant === 'without') continue
    const { ops } = result.totals[variant]!
    const counted = result.counted[variant]!
    if (counted < 0.9 * ops) throw new Error(`the ${variant} slices counted ${counted} acquires for ${ops} operations`)
    if (variant === 'spans' && result.spansExported < 0.9 * ops) {
      throw new Error(`the spans slices exported ${result.spansExported} spans for ${ops} operations`)
    }
  }
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

const opsPerSecond = (t: VariantTotals) => t.ops / t.seconds
const cpuPerOp = (t: VariantTotals) => t.cpuMicros / Math.max(1, t.ops)

interface ReportInput {
  rounds: number
  slices: number
  sliceMs: number
  warmupMs: number
  loadBefore: number[]
  loadAfter: number[]
  redisVersion: string
  results: Map<ScenarioId, RoundResult[]>
  quick: boolean
  listenerNs: Record<Instrumented, number>
}

/** Where a variant was measured: the child that ran it. */
const childOf = (v: Instrumented): ChildKind => (v === 'spans' ? 'spans' : 'metrics')

/** The q-quantile of `values` (linear between ranks). */
function quantileOf(values: number[], q: number): number {
  const s = [...values].sort((a, b) => a - b)
  const at = (s.length - 1) * q
  const lo = Math.floor(at)
  return s[lo]! + (s[Math.min(lo + 1, s.length - 1)]! - s[lo]!) * (at - lo)
}

/** Per block of every round: what `f` makes of the variant's slices beside the block's `without` slices. */
function perBlock(rounds: RoundResult[], v: Instrumented, f: (with_: VariantTotals, without: VariantTotals) => number): number[] {
  return rounds.flatMap((r) => r[childOf(v)].blocks.map((b) => f(b[v]!, b.without!)))
}

function renderReport(input: ReportInput): string {
  const fmtLoad = (l: number[]) => l.map((v) => v.toFixed(2)).join(' / ')
  const num = (v: number) => Math.round(v).toLocaleString('en-US')
  const pct = (v: number) => `${(v * 100).toFixed(1)} %`
  const signed = (v: number, digits = 1) => `${v >= 0 ? '+' : '−'}${Math.abs(v).toFixed(digits)}`
  const instrumented = ['prom', 'otel', 'otelp', 'spans'] as const
  const ratioRows: string[] = []
  const cpuRows: string[] = []
  const worst: Record<Instrumented, number> = { prom: -Infinity, otel: -Infinity, otelp: -Infinity, spans: -Infinity }
  /** The least CPU an uncontended operation took (without instrumentation), µs: the listeners' share is largest there. */
  let leanestOpMicros = Infinity
  for (const scenario of SCENARIOS) {
    const r = input.results.get(scenario.id)
    if (!r) continue
    const cells = instrumented.map((v) => {
      const ratios = perBlock(r, v, (w, o) => opsPerSecond(w) / opsPerSecond(o))
      const ratio = quantileOf(ratios, 0.5)
      worst[v] = Math.max(worst[v], 1 - ratio)
      return `${ratio.toFixed(3)} (${quantileOf(ratios, 0.25).toFixed(3)}–${quantileOf(ratios, 0.75).toFixed(3)}), ${pct(1 - ratio)}`
    })
    const withoutOps = quantileOf(
      r.flatMap((x) => x.metrics.blocks.map((b) => opsPerSecond(b.without!))),
      0.5,
    )
    ratioRows.push(`| ${scenario.title} | ${num(withoutOps)} | ${cells.join(' | ')} |`)
    const withoutCpu = (kind: ChildKind) => quantileOf(r.flatMap((x) => x[kind].blocks.map((b) => cpuPerOp(b.without!))), 0.5)
    const added = (v: Instrumented) => {
      const delta = quantileOf(perBlock(r, v, (w, o) => cpuPerOp(w) - cpuPerOp(o)), 0.5)
      const share = quantileOf(perBlock(r, v, (w, o) => (cpuPerOp(w) - cpuPerOp(o)) / cpuPerOp(o)), 0.5)
      return `${signed(delta)} (${signed(share * 100)} %)`
    }
    if (!scenario.shared) leanestOpMicros = Math.min(leanestOpMicros, withoutCpu('metrics'))
    cpuRows.push(`| ${scenario.title} | ${withoutCpu('metrics').toFixed(1)} | ${added('prom')} | ${added('otel')} | ${added('otelp')} | ${withoutCpu('spans').toFixed(1)} | ${added('spans')} |`)
  }
  const ns = input.listenerNs
  // The target is for the cheapest way each library offers: prom-client, and OpenTelemetry with
  // its histograms through lockHistogramProducer(); the SDK's histograms (the default, no reader
  // set-up) are reported beside them.
  const metricsWorst = Math.max(worst.prom, worst.otelp)
  const share = (v: Instrumented) => ns[v] / 1000 / leanestOpMicros
  const loaded = input.loadBefore[0]! > availableParallelism() || input.loadAfter[0]! > availableParallelism()
  const costs = `prom-client ${pct(worst.prom)}, OpenTelemetry with lockHistogramProducer() ${pct(worst.otelp)}; target ≤ ${TARGET_COST * 100} %`
  const alone = `Measured alone, the OpenTelemetry listener takes ${ns.otelp.toFixed(0)} ns of CPU per acquire + release with lockHistogramProducer(), ${pct(share('otelp'))} of the ${leanestOpMicros.toFixed(1)} µs of CPU the leanest uncontended operation took here, and ${ns.otel.toFixed(0)} ns (${pct(share('otel'))}) with the SDK's histograms (prom-client's: ${ns.prom.toFixed(0)} ns, ${pct(share('prom'))}). With the SDK's histograms (no \`histograms\` option) the largest median cost is ${pct(worst.otel)}.`
  const verdict =
    metricsWorst <= TARGET_COST
      ? `Within the target: the largest median cost of a metrics path is ${pct(metricsWorst)} (${costs}). ${alone}`
      : loaded
        ? `Not shown within the target by throughput: the largest median cost of a metrics path is ${pct(metricsWorst)} (${costs}), but the machine was loaded past its ${availableParallelism()} cores (load average below), and prom-client's listener takes ${ns.prom.toFixed(0)} ns (${pct(share('prom'))} of an operation's CPU), so most of its ${pct(worst.prom)} is the other processes' doing. ${alone}`
        : `**Over the target**: the largest median cost of a metrics path is ${pct(metricsWorst)} (${costs}). ${alone}`
  const cpu = cpus()[0]?.model ?? 'unknown CPU'
  return [
    '## Metrics overhead (`npm run bench:metrics`)',
    '',
    'Throughput of our Locker (acquire + release) without instrumentation and with each path of',
    '`@fencelock/metrics`, in the same run, on a dedicated redis-server: *prom-client* is',
    '`instrument()` (one registry, default options); *OpenTelemetry* is `instrumentOpenTelemetry()`',
    'with `traces: false` on the real SDK (a `MeterProvider` read by the Prometheus exporter, not',
    'scraped during the run), its wait and hold histograms recorded into the SDK\'s histograms (the',
    'default); *OTel, producer* is the same with `histograms: lockHistogramProducer()`, the producer',
    'registered with the exporter (`metricProducers`); *+ spans* is *OpenTelemetry* with a span per acquire (an always-on tracer',
    'provider, the AsyncLocalStorage context manager, a batch span processor, an exporter that drops',
    'the spans). Each round runs each scenario in two fresh processes — the metrics paths beside no',
    'instrumentation, then the spans beside none — whose workers never stop while the variant is',
    'switched in mirrored blocks of slices (without, prom-client, OpenTelemetry, OTel producer, the',
    'same reversed; without, + spans, + spans, without), the first fifth of each slice not',
    'counted. Each block compares its variants under one stretch of the machine\'s load: a cell is',
    'the median over the blocks of every round of (variant / without) ops/s, its interquartile range,',
    'and the cost, 1 − ratio.',
    '',
    '| scenario | ops/s without | prom-client | OpenTelemetry | OTel, producer | OpenTelemetry + spans |',
    '| --- | ---: | --- | --- | --- | --- |',
    ...ratioRows,
    '',
    verdict,
    `With a span per acquire the largest median cost is ${pct(worst.spans)}; its listener alone takes ${ns.spans.toFixed(0)} ns per acquire + release (${pct(share('spans'))}).`,
    '',
    'CPU of the benchmark process (user + system, Redis excluded) per operation: without',
    'instrumentation, and what each path adds (median over blocks of the difference, µs, and of its',
    'share of the operation\'s CPU).',
    '',
    '| scenario | µs without | prom-client | OpenTelemetry | OTel, producer | µs without (spans process) | OpenTelemetry + spans |',
    '| --- | ---: | ---: | ---: | ---: | ---: | ---: |',
    ...cpuRows,
    '',
    `${input.quick ? 'Quick run (`--quick`): indicative only. ' : ''}${input.rounds} round(s); per scenario, round and process ${input.warmupMs / 1000} s of warm-up, then ${input.slices} slices of ${input.sliceMs} ms.`,
    `Machine: ${availableParallelism()} cores, ${cpu}, Node ${process.version}, redis-server ${input.redisVersion}, @opentelemetry/sdk-metrics ${sdkVersion('sdk-metrics')}, sdk-trace-base ${sdkVersion('sdk-trace-base')};`,
    `load average (1/5/15 min) ${fmtLoad(input.loadBefore)} before, ${fmtLoad(input.loadAfter)} after; ${new Date().toISOString().slice(0, 10)}.`,
  ].join('\n')
}

/** The installed version of an @opentelemetry package, for the report. */
function sdkVersion(name: string): string {
  const require = createRequire(import.meta.url)
  return (require(`@opentelemetry/${name}/package.json`) as { version: string }).version
}

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
