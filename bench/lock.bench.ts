// `npm run bench:lock`: our lock against the raw SET NX PX limit, redis-semaphore and redlock,
// in one run, on a redis-server of its own. Prints a markdown report and writes it into
// docs/BENCHMARKS.md between the bench:lock markers.
//
//   npm run bench:lock                       full run (~15 min): 12 uncontended rounds, 3 contended
//                                            and 3 fair-queue rounds, then the scripts' costs
//   npm run bench:lock -- --quick --no-write smoke run (~1 min), file untouched
//   options: --rounds N  --contended-rounds N  --contenders raw,ours  --scenarios contended,fair
//            --no-script-costs (skip the per-script INFO commandstats probe)
//            --contenders-module <file.ts> (extra contenders, see lock-contenders.ts)
//            --workers 1,50 (uncontended worker counts)  --cpu-prof <dir> (V8 CPU profile of
//            every child)  --no-write  --save <file.json> (raw results; default: a temp file)
//            --render <file.json> (re-render saved results, measuring nothing)
//            --pin (children on CPU 0, redis-server on CPU 1, with taskset)
//            --quiet-below 0.2 (before each measurement, wait up to 3 min until other processes
//            use less than this share of all CPUs; default 0.2, 0 to skip; off with --quick)
//
// Every measurement is a fresh child process (bench/lock-child.ts), one contender at a time, in
// interleaved rounds whose order rotates, so drift on a shared machine hits every contender alike.
import { execFileSync, fork, type ChildProcess } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { readFileSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { loadavg } from 'node:os'
import { commandLineOrExit, integerFlag, stringFlag, UsageError, type CliSpec, type CliValues } from '@fencelock/devkit/cli'
import type { ChildJob, ChildResult, ContendedResult, UncontendedResult } from './lock-child.js'
import { loadContenders, type Scenario } from './lock-contenders.js'
import { renderReport, type Report } from './lock-report.js'
import { measureScriptCosts, type ScriptCost } from './lock-script-costs.js'
import { writeMarkedSection } from './support/docs-section.js'
import { cpuBusyShare, loadAverage, machineInfo } from './support/machine.js'
import { startRedisServer, type BenchRedisServer } from './support/redis-server.js'

const here = dirname(fileURLToPath(import.meta.url))
const root = join(here, '..')

const SCENARIO_NAMES: readonly Scenario[] = ['uncontended', 'contended', 'fair']

const CLI: CliSpec = {
  command: 'npm run bench:lock --',
  summary:
    'Our lock against the raw SET NX PX limit, redis-semaphore and redlock, in one run on a redis-server of its own: uncontended throughput, contended latency, the fair queue, and the scripts\' costs. Writes its section of docs/BENCHMARKS.md.',
  flags: {
    quick: { type: 'boolean', description: 'smoke run (~1 min): one short round of each' },
    'no-write': { type: 'boolean', description: 'leave docs/BENCHMARKS.md untouched' },
    rounds: { type: 'string', value: '<n>', description: 'uncontended rounds, 1-100', default: '12, 1 with --quick' },
    'contended-rounds': { type: 'string', value: '<n>', description: 'contended and fair rounds, 1-100', default: '3, 1 with --quick' },
    contenders: { type: 'string', value: '<a,b>', description: 'contenders to run (ids), default all' },
    'contenders-module': { type: 'string', value: '<a.ts,b.ts>', description: 'modules with extra contenders (see bench/lock-contenders.ts)' },
    scenarios: { type: 'string', value: '<a,b>', description: SCENARIO_NAMES.join(', '), default: SCENARIO_NAMES.join(',') },
    'no-script-costs': { type: 'boolean', description: "skip the per-script INFO commandstats probe" },
    'cpu-prof': { type: 'string', value: '<dir>', description: 'V8 CPU profile of every child, into <dir>' },
    workers: { type: 'string', value: '<n,m>', description: 'uncontended worker counts, each 1-1000', default: '1,50' },
    save: { type: 'string', value: '<file.json>', description: 'raw results', default: 'a temp file' },
    pin: { type: 'boolean', description: 'children on CPU 0, redis-server on CPU 1 (taskset)' },
    'quiet-below': { type: 'string', value: '<share>', description: 'before each measurement, wait up to 3 min until other processes use less than this share of all CPUs, 0-1 (0 skips)', default: '0.2, 0 with --quick' },
    render: { type: 'string', value: '<file.json>', description: 're-render saved results, measuring nothing' },
  },
  notes: `REDIS_SERVER_BIN (default redis-server). A full run takes ~15 min.
Exit codes: 0 done (a missed target is reported, not an error); 1 it failed; 2 a bad command line; 130 interrupted.`,
}

const listFlag = (values: CliValues, name: string): string[] | undefined => stringFlag(values, name)?.split(',').map((item) => item.trim())

const args = commandLineOrExit(CLI, process.argv.slice(2), (values) => {
  const scenarios = listFlag(values, 'scenarios') ?? [...SCENARIO_NAMES]
  const bad = scenarios.filter((name) => !(SCENARIO_NAMES as readonly string[]).includes(name))
  if (bad.length > 0) throw new UsageError(`--scenarios must name ${SCENARIO_NAMES.join(', ')} (got ${bad.join(', ')})`)
  const workers = listFlag(values, 'workers')
  if (workers?.some((w) => !/^\d+$/.test(w) || Number(w) < 1 || Number(w) > 1_000)) throw new UsageError(`--workers must list integers from 1 to 1000 (got ${JSON.stringify(values.workers)})`)
  const quietBelow = stringFlag(values, 'quiet-below')
  if (quietBelow !== undefined && !(/^\d+(\.\d+)?$/.test(quietBelow) && Number(quietBelow) <= 1)) throw new UsageError(`--quiet-below must be a number from 0 to 1 (got ${JSON.stringify(quietBelow)})`)
  const quick = values.quick === true
  return {
    quick,
    'no-write': values['no-write'] === true,
    rounds: values.rounds === undefined ? undefined : integerFlag(values, 'rounds', 1, 1, 100),
    'contended-rounds': values['contended-rounds'] === undefined ? undefined : integerFlag(values, 'contended-rounds', 1, 1, 100),
    contenders: stringFlag(values, 'contenders'),
    'contenders-module': listFlag(values, 'contenders-module') ?? [],
    scenarios: scenarios as Scenario[],
    'no-script-costs': values['no-script-costs'] === true,
    'cpu-prof': stringFlag(values, 'cpu-prof'),
    workers: workers?.map(Number),
    save: stringFlag(values, 'save'),
    pin: values.pin === true,
    'quiet-below': quietBelow === undefined ? undefined : Number(quietBelow),
    render: stringFlag(values, 'render'),
  }
})

function publish(report: Report): void {
  const markdown = renderReport(report)
  console.log(markdown)
  if (!args['no-write']) {
    writeMarkedSection(join(root, 'docs', 'BENCHMARKS.md'), 'bench:lock', markdown)
    console.error('[bench:lock] written to docs/BENCHMARKS.md')
  }
}

if (args.render) {
  publish(JSON.parse(readFileSync(args.render, 'utf8')) as Report)
  process.exit(0)
}

const quick = args.quick
/** Lease time given to every contender (redis-semaphore's default lockTimeout). */
const TTL_MS = 10_000
const PLAN = {
  // Many short rounds rather than a few long ones: on this VM the throughput of even the raw loop
  // alone swings between ~20k and ~50k ops/s within one process, in spells of 0.5 to 5 s (client
  // CPU per op swinging with it), so a 5 s window per contender and round gives per-round ratios
  // that scatter by ±30 %; the median of 12 interleaved rounds is far steadier than that of 5.
  uncontended: {
    workers: args.workers ?? [1, 50],
    warmupMs: quick ? 300 : 500,
    durationMs: quick ? 1_000 : 2_000,
    rounds: args.rounds ?? (quick ? 1 : 12),
  },
  contended: {
    workers: 20,
    holdMs: 1,
    warmupMs: quick ? 300 : 1_000,
    durationMs: quick ? 2_000 : 10_000,
    rounds: args['contended-rounds'] ?? args.rounds ?? (quick ? 1 : 3),
  },
  // Issue 13's starvation case: 18 processes on one key, each holding it 400 ms, waiting up to
  // 15 s. A fair queue serves each in turn: the longest wait is about 17 holds (6.8 s). No
  // warm-up: the first round, all 18 arriving at once, is part of it.
  fair: {
    workers: 18,
    holdMs: 400,
    waitMs: 15_000,
    warmupMs: 0,
    durationMs: quick ? 8_000 : 25_000,
    rounds: args['contended-rounds'] ?? args.rounds ?? (quick ? 1 : 3),
  },
}

const scenarios = args.scenarios
const modules = args['contenders-module']
const all = await loadContenders(modules)
const wanted = args.contenders?.split(',')
const contenders = wanted ? wanted.map((id) => all.find((c) => c.id === id) ?? fail(`unknown contender "${id}"`)) : all

function fail(message: string): never {
  console.error(message)
  process.exit(2)
}

// --- processes we own: the redis-server and at most one child at a time -------------------------

let server: BenchRedisServer | undefined
let child: ChildProcess | undefined
let interrupted = false

process.on('SIGINT', () => {
  interrupted = true
  if (child?.pid !== undefined && child.exitCode === null) process.kill(child.pid, 'SIGKILL')
  void (server?.stop() ?? Promise.resolve()).finally(() => process.exit(130))
})

/** The 1-minute load average when each child started (it counts our own processes too). */
const loads: number[] = []
/** Share of all CPUs other processes used in the second before each child started. */
const othersBusy: number[] = []
let quietWaitMs = 0
const quietBelow = args['quiet-below'] ?? (quick ? 0 : 0.2)
const QUIET_MAX_WAIT_MS = 180_000

/**
 * On a shared machine other test suites come and go: measure only while they leave the CPUs
 * (nearly) to us, waiting up to 3 minutes per measurement, and report what they left.
 */
async function awaitQuiet(): Promise<void> {
  const start = performance.now()
  let busy = await cpuBusyShare(1000)
  while (quietBelow > 0 && busy >= quietBelow && performance.now() - start < QUIET_MAX_WAIT_MS && !interrupted) {
    busy = await cpuBusyShare(2000)
  }
  quietWaitMs += performance.now() - start
  othersBusy.push(busy)
}

async function runChild(job: ChildJob): Promise<ChildResult> {
  await awaitQuiet()
  loads.push(loadavg()[0]!)
  return forkChild(job)
}

function forkChild(job: ChildJob): Promise<ChildResult> {
  const execArgv = ['--import', 'tsx']
  // V8 names each profile CPU.<date>.<pid>.<thread>...; the main thread's is the one of interest
  // (tsx's loader runs on a second thread). The log line below maps PIDs to runs.
  if (args['cpu-prof']) execArgv.push('--cpu-prof', '--cpu-prof-dir', args['cpu-prof'])
  const limitMs = job.warmupMs + job.durationMs + 45_000
  return new Promise((resolve, reject) => {
    const c = fork(join(here, 'lock-child.ts'), [JSON.stringify(job)], { execArgv, cwd: root, stdio: ['ignore', 'inherit', 'inherit', 'ipc'] })
    child = c
    if (args.pin && c.pid !== undefined) pin(c.pid, 0)
    if (args['cpu-prof']) console.error(`[bench:lock] child pid ${c.pid}: ${job.contender} ${job.scenario} ${job.workers}w`)
    let result: ChildResult | undefined
    const timer = setTimeout(() => {
      if (c.pid !== undefined && c.exitCode === null) process.kill(c.pid, 'SIGKILL')
      reject(new Error(`${job.contender} ${job.scenario} ${job.workers}w: no result within ${limitMs} ms, killed`))
    }, limitMs)
    c.on('message', (m) => (result = m as ChildResult))
    c.on('exit', (code, signal) => {
      clearTimeout(timer)
      child = undefined
      if (result) resolve(result)
      else reject(new Error(`${job.contender} ${job.scenario} ${job.workers}w: child exited (${code ?? signal}) without a result`))
    })
  })
}

/** Binds every thread of `pid` (and those it starts later) to one CPU. */
function pin(pid: number, cpu: number): void {
  execFileSync('taskset', ['-a', '-p', '-c', String(cpu), String(pid)], { stdio: 'ignore' })
}

/** Round r starts at contender r (mod n), so no contender always runs first or last. */
function rotated<T>(list: readonly T[], r: number): T[] {
  const k = r % list.length
  return [...list.slice(k), ...list.slice(0, k)]
}

// --- the run ---------------------------------------------------------------------------------

const runId = randomBytes(4).toString('hex')
const startedAt = new Date().toISOString()
const loadAtStart = loadAverage()
const machine = machineInfo()
server = await startRedisServer()
if (args.pin) pin(server.pid, 1)
console.error(`[bench:lock] redis-server ${machine.redisServer} pid ${server.pid} on ${server.host}:${server.port}; load ${loadAtStart}`)

const uncontended: UncontendedResult[] = []
const contended: ContendedResult[] = []
const fair: ContendedResult[] = []
let scriptCosts: ScriptCost[] = []
const jobBase = { modules, host: server.host, port: server.port, ttlMs: TTL_MS }
let n = 0
/** Runs that produced no result (crashed or killed on the deadline): reported, not hidden. */
const failures: string[] = []
async function measure(job: ChildJob): Promise<ChildResult | undefined> {
  try {
    return await runChild(job)
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error)
    console.error(`[bench:lock] FAILED: ${message}`)
    failures.push(message)
    return undefined
  }
}
const log = (r: ChildResult) => {
  const what =
    r.scenario === 'uncontended'
      ? `${Math.round((r.ops / r.elapsedMs) * 1000)} ops/s`
      : `${Math.round((r.acquisitions / r.elapsedMs) * 1000)} acq/s, overlaps ${r.overlaps}`
  console.error(`[bench:lock] ${r.scenario} ${r.workers}w ${r.contender}: ${what}`)
}

try {
  if (scenarios.includes('uncontended')) {
    const list = contenders.filter((c) => c.scenarios.includes('uncontended'))
    const p = PLAN.uncontended
    for (let r = 0; r < p.rounds; r++) {
      for (const workers of p.workers) {
        for (const c of rotated(list, r)) {
          if (interrupted) break
          const result = await measure({ ...jobBase, contender: c.id, scenario: 'uncontended', workers, warmupMs: p.warmupMs, durationMs: p.durationMs, holdMs: 0, keyPrefix: `bench:${runId}:${n++}`, round: r })
          if (!result) continue
          log(result)
          uncontended.push(result as UncontendedResult)
        }
      }
    }
  }
  // One lock, many workers: the contended run and the fair-queue run differ only in their plan.
  const held = async (scenario: 'contended' | 'fair', p: { workers: number; holdMs: number; warmupMs: number; durationMs: number; rounds: number; waitMs?: number }, into: ContendedResult[]) => {
    const list = contenders.filter((c) => c.scenarios.includes(scenario))
    for (let r = 0; r < p.rounds; r++) {
      for (const c of rotated(list, r)) {
        if (interrupted) break
        const { workers, warmupMs, durationMs, holdMs, waitMs } = p
        const result = await measure({ ...jobBase, contender: c.id, scenario, workers, warmupMs, durationMs, holdMs, waitMs, keyPrefix: `bench:${runId}:${n++}`, round: r })
        if (!result) continue
        log(result)
        into.push(result as ContendedResult)
      }
    }
  }
  if (scenarios.includes('contended')) await held('contended', PLAN.contended, contended)
  if (scenarios.includes('fair')) await held('fair', PLAN.fair, fair)
  if (!args['no-script-costs'] && !interrupted) {
    await awaitQuiet()
    scriptCosts = await measureScriptCosts(server.host, server.port)
  }
} finally {
  await server.stop()
}

const extra = process.argv.slice(2).join(' ')
const command = process.env.npm_lifecycle_event === 'bench:lock' ? `npm run bench:lock${extra ? ` -- ${extra}` : ''}` : `node --import tsx bench/lock.bench.ts${extra ? ` ${extra}` : ''}`
const report: Report = {
  command,
  startedAt,
  finishedAt: new Date().toISOString(),
  machine,
  loadAtStart,
  loadAtEnd: loadAverage(),
  loads,
  othersBusy,
  quietWaitMs,
  quietBelow,
  failures,
  plan: PLAN,
  ttlMs: TTL_MS,
  contenders: contenders.map(({ id, label, notes, targets }) => ({ id, label, notes, targets })),
  uncontended,
  contended,
  fair,
  scriptCosts,
  quick,
}
const saved = args.save ?? join(tmpdir(), `bench-lock-${runId}.json`)
writeFileSync(saved, JSON.stringify(report))
console.error(`[bench:lock] raw results in ${saved} (re-render with --render ${saved})`)
publish(report)
