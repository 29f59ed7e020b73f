// `npm run bench:lock`: our lock against the raw SET NX PX limit, redis-semaphore and redlock,
// in one run, on a redis-server of its own; and our quorum mode against redis-semaphore's
// RedlockMutex and redlock, on N redis-servers of its own (issue 15). Prints a markdown report
// and writes it into docs/BENCHMARKS.md between the bench:lock markers.
//
//   npm run bench:lock                       full run (~30 min): 12 uncontended rounds, 3 contended
//                                            and 3 fair-queue rounds, the quorum scenarios, then
//                                            the scripts' costs
//   npm run bench:lock -- --quick --no-write smoke run (~4 min), file untouched
//   npm run bench:lock -- --scenarios quorum-uncontended,quorum-contended,quorum-degraded,quorum-majority-down
//                                            the quorum part alone (~15 min)
//   npm run bench:lock -- --scenarios etcd-uncontended,etcd-contended,etcd-election --quiet-below 0
//                                            the etcd rows alone (issue 36, bench/etcd-lock.ts): ours
//                                            on etcd against etcd3's Lock and Election, 1 and 3 members (~8 min)
//   options: --rounds N  --contended-rounds N  --contenders raw,ours  --scenarios contended,fair
//            --quorum-nodes 3,5 (quorum-uncontended node counts)  --degraded-seconds 60 (the
//            window with 2 of 5 servers down)  --down-try-seconds 30 (3 of 5 down: when to give
//            up on an acquire that has not settled)
//            --no-script-costs (skip the per-script INFO commandstats probe)
//            --no-family (skip the lock family's rows, run at the end as bench:lock-family)
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
import { execFileSync, fork, spawn, spawnSync, type ChildProcess } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { readFileSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { loadavg } from 'node:os'
import { commandLineOrExit, EXIT_CODES, integerFlag, stringFlag, UsageError, type CliSpec, type CliValues } from '@fencelock/devkit/cli'
import { redisServerBin } from '@fencelock/devkit/redis-server'
import type { ChildJob, ChildMessage, ChildResult, ContendedResult, KilledMessage, ServerAddress, UncontendedResult } from './lock-child.js'
import { isQuorumScenario, loadContenders, QUORUM_SCENARIOS, SINGLE_SCENARIOS, type Scenario } from './lock-contenders.js'
import { faultMs, type DegradedResult, type FaultPlan, type MajorityDownResult } from './lock-quorum-faults.js'
import type { QuorumPlan } from './lock-quorum-plan.js'
import { renderQuorumReport } from './lock-quorum-report.js'
import { renderReport, type Report } from './lock-report.js'
import { ETCD_SCENARIOS, runEtcdScenarios, type EtcdPlan, type EtcdReport, type EtcdScenario } from './etcd-lock.js'
import { renderEtcdReport } from './etcd-lock-report.js'
import { renderClientReport } from './lock-clients-report.js'
import { measureScriptCosts, type ScriptCost } from './lock-script-costs.js'
import { writeMarkedSection } from './support/docs-section.js'
import { cpuBusyShare, loadAverage, machineInfo } from './support/machine.js'
import { startRedisServer, type BenchRedisServer } from './support/redis-server.js'

const here = dirname(fileURLToPath(import.meta.url))
const root = join(here, '..')

const SCENARIO_NAMES: readonly (Scenario | EtcdScenario)[] = [...SINGLE_SCENARIOS, ...QUORUM_SCENARIOS, ...ETCD_SCENARIOS]
const isEtcdScenario = (name: string): name is EtcdScenario => (ETCD_SCENARIOS as readonly string[]).includes(name)

const CLI: CliSpec = {
  command: 'npm run bench:lock --',
  summary:
    "Our lock against the raw SET NX PX limit, redis-semaphore and redlock, in one run on a redis-server of its own: uncontended throughput, contended latency, the fair queue, and the scripts' costs; and our quorum mode against redis-semaphore's RedlockMutex and redlock on N redis-servers of its own: throughput, contention, 2 of 5 servers killed, 3 of 5 killed; and ours on etcd against the etcd3 package's Lock on 1 and 3 etcd members of its own (data on tmpfs), with etcd's request counts (the etcd-* scenarios, their own section). Writes its sections of docs/BENCHMARKS.md.",
  flags: {
    quick: { type: 'boolean', description: 'smoke run (~4 min, 1 without the quorum scenarios): one short round of each' },
    'no-write': { type: 'boolean', description: 'leave docs/BENCHMARKS.md untouched' },
    rounds: { type: 'string', value: '<n>', description: 'uncontended rounds, 1-100', default: '12, 1 with --quick' },
    'contended-rounds': { type: 'string', value: '<n>', description: 'contended and fair rounds, 1-100', default: '3, 1 with --quick' },
    contenders: { type: 'string', value: '<a,b>', description: 'contenders to run (ids), default all' },
    'contenders-module': { type: 'string', value: '<a.ts,b.ts>', description: 'modules with extra contenders (see bench/lock-contenders.ts)' },
    scenarios: { type: 'string', value: '<a,b>', description: SCENARIO_NAMES.join(', '), default: SCENARIO_NAMES.join(',') },
    'no-script-costs': { type: 'boolean', description: "skip the per-script INFO commandstats probe" },
    'etcd-members': { type: 'string', value: '<n,m>', description: 'etcd scenarios: member counts, each 1, 3 or 5 (data on tmpfs)', default: '1,3' },
    'write-etcd-only': { type: 'boolean', description: 'write only the etcd section of docs/BENCHMARKS.md (a partial Redis run leaves its section alone)' },
    'write-clients-only': { type: 'boolean', description: 'write only the per-client section of docs/BENCHMARKS.md (the node-redis, iovalkey and GLIDE rows; a partial run leaves the main section alone)' },
    'no-family': {
      type: 'boolean',
      description: "skip the lock family's rows at the end (bench/lock-family.bench.ts, as npm run bench:lock-family; skipped too when --scenarios names a part)",
    },
    'cpu-prof': { type: 'string', value: '<dir>', description: 'V8 CPU profile of every child, into <dir>' },
    workers: { type: 'string', value: '<n,m>', description: 'uncontended worker counts (quorum-uncontended too), each 1-1000', default: '1,50' },
    'warmup-ms': {
      type: 'string',
      value: '<ms>',
      description: "uncontended rows (one Redis, quorum, etcd): each measurement's warm-up before its window, 100-30000 (a longer one gives the larger libraries' code time to be compiled)",
      default: '500 (quorum: 3000), 300 with --quick',
    },
    'quorum-nodes': { type: 'string', value: '<n,m>', description: 'quorum-uncontended: redis-servers in the quorum, each 3-15', default: '3,5' },
    'degraded-seconds': { type: 'string', value: '<s>', description: 'quorum-degraded: how long to run with 2 of 5 servers down, 5-600', default: '60, 6 with --quick' },
    'down-try-seconds': { type: 'string', value: '<s>', description: 'quorum-majority-down: give up on an acquire still unsettled after this long, 1-900', default: '30, 3 with --quick' },
    save: { type: 'string', value: '<file.json>', description: 'raw results', default: 'a temp file' },
    pin: { type: 'boolean', description: 'children on CPU 0, redis-server on CPU 1 (taskset)' },
    'quiet-below': { type: 'string', value: '<share>', description: 'before each measurement, wait up to 3 min until other processes use less than this share of all CPUs, 0-1 (0 skips)', default: '0.2, 0 with --quick' },
    render: { type: 'string', value: '<file.json>', description: 're-render saved results, measuring nothing' },
  },
  notes: `REDIS_SERVER_BIN (default redis-server), ETCD_BIN (default etcd, Debian's etcd-server). A full run takes ~40 min, half of it the quorum scenarios, ~8 the etcd ones.
--rounds and --contended-rounds apply to the quorum scenarios too (quorum-uncontended defaults to 6 rounds).
A missed target is reported, and the exit code stays 0.`,
  failure: 'it broke off with an error',
}

const listFlag = (values: CliValues, name: string): string[] | undefined => stringFlag(values, name)?.split(',').map((item) => item.trim())

const args = commandLineOrExit(CLI, process.argv.slice(2), (values) => {
  const scenarios = listFlag(values, 'scenarios') ?? [...SCENARIO_NAMES]
  const bad = scenarios.filter((name) => !(SCENARIO_NAMES as readonly string[]).includes(name))
  if (bad.length > 0) throw new UsageError(`--scenarios must name ${SCENARIO_NAMES.join(', ')} (got ${bad.join(', ')})`)
  const workers = listFlag(values, 'workers')
  if (workers?.some((w) => !/^\d+$/.test(w) || Number(w) < 1 || Number(w) > 1_000)) throw new UsageError(`--workers must list integers from 1 to 1000 (got ${JSON.stringify(values.workers)})`)
  const etcdMembers = listFlag(values, 'etcd-members')
  if (etcdMembers?.some((n) => !['1', '3', '5'].includes(n))) throw new UsageError(`--etcd-members must list 1, 3 or 5 (got ${JSON.stringify(values['etcd-members'])})`)
  const quorumNodes = listFlag(values, 'quorum-nodes')
  if (quorumNodes?.some((n) => !/^\d+$/.test(n) || Number(n) < 3 || Number(n) > 15)) throw new UsageError(`--quorum-nodes must list integers from 3 to 15 (got ${JSON.stringify(values['quorum-nodes'])})`)
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
    scenarios: scenarios.filter((name) => !isEtcdScenario(name)) as Scenario[],
    etcdScenarios: scenarios.filter(isEtcdScenario),
    'etcd-members': etcdMembers?.map(Number),
    'write-etcd-only': values['write-etcd-only'] === true,
    'write-clients-only': values['write-clients-only'] === true,
    'no-script-costs': values['no-script-costs'] === true,
    family: values['no-family'] !== true && values.scenarios === undefined,
    'cpu-prof': stringFlag(values, 'cpu-prof'),
    workers: workers?.map(Number),
    'warmup-ms': values['warmup-ms'] === undefined ? undefined : integerFlag(values, 'warmup-ms', 500, 100, 30_000),
    'quorum-nodes': quorumNodes?.map(Number),
    'degraded-seconds': values['degraded-seconds'] === undefined ? undefined : integerFlag(values, 'degraded-seconds', 60, 5, 600),
    'down-try-seconds': values['down-try-seconds'] === undefined ? undefined : integerFlag(values, 'down-try-seconds', 30, 1, 900),
    save: stringFlag(values, 'save'),
    pin: values.pin === true,
    'quiet-below': quietBelow === undefined ? undefined : Number(quietBelow),
    render: stringFlag(values, 'render'),
  }
})

function publish(report: Report): void {
  // The lock family's rows run at the end, in a process of their own (their own redis-server and workers), into their own section.
  const FAMILY_POINTER =
    "The lock family's rows — a reentrant re-acquire (no round trip), `acquireAll` of 3 against 3 sequential acquires, a semaphore with 3 permits under 20 workers — are measured at the end of `npm run bench:lock` (unless `--no-family` or `--scenarios`), or alone by `npm run bench:lock-family`: [The lock family](#the-lock-family-issue-22) below.\n"
  const redisRan = report.uncontended.length + report.contended.length + (report.fair?.length ?? 0) + (report.quorum ? 1 : 0) > 0
  const markdown = [renderReport(report), renderQuorumReport(report), FAMILY_POINTER].filter((part) => part !== '').join('\n')
  if (redisRan) console.log(markdown)
  const etcd = report.etcd ? renderEtcdSection(report) : undefined
  if (etcd) console.log(etcd)
  const clientTables = renderClientReport(report)
  const clients = clientTables === '' ? undefined : renderClientsSection(report, clientTables)
  if (clients) console.log(clients)
  if (args['no-write']) return
  const file = join(root, 'docs', 'BENCHMARKS.md')
  if (redisRan && !args['write-etcd-only'] && !args['write-clients-only']) {
    writeMarkedSection(file, 'bench:lock', markdown)
    console.error('[bench:lock] written to docs/BENCHMARKS.md')
  }
  if (clients) {
    writeMarkedSection(file, 'bench:lock-clients', clients)
    console.error('[bench:lock] per-client rows written to docs/BENCHMARKS.md')
  }
  if (etcd) {
    writeMarkedSection(file, 'bench:lock-etcd', etcd)
    console.error("[bench:lock] etcd rows written to docs/BENCHMARKS.md")
  }
}

/**
 * The head of a section of its own (the per-client and the etcd rows): heading, smoke-run warning,
 * command, date, machine (`engine` names the store's version) and load.
 */
function sectionHead(report: Report, heading: string, where: string, engine: string): string[] {
  const { machine } = report
  const date = report.startedAt.replace('T', ' ').replace(/\.\d+Z$/, ' UTC')
  const loads = report.loads.length > 0 ? `${Math.min(...report.loads).toFixed(2)}–${Math.max(...report.loads).toFixed(2)}` : '—'
  return [
    heading,
    '',
    ...(report.quick ? ['> **Smoke run (`--quick`)**: short windows, one round. Not a result.', ''] : []),
    `- Command: \`${report.command}\`${report.command.startsWith('npm ') ? ' (builds the packages, then runs `node --import tsx bench/lock.bench.ts`)' : ' (the packages built beforehand)'}; ${where}`,
    `- Date: ${date}`,
    `- Machine: ${machine.nproc} × ${machine.cpuModel}, ${machine.totalMemGiB} GiB RAM, ${machine.os}; Node ${machine.node}; ${engine}`,
    `- Load average (1, 5, 15 min): ${report.loadAtStart} at start, ${report.loadAtEnd} at the end; 1-min load at the start of each measurement ${loads}`,
    '',
  ]
}

/** The per-client rows' section (issue 37). */
function renderClientsSection(report: Report, tables: string): string {
  const heading = '## Lock on each client library: node-redis, iovalkey and GLIDE beside ioredis (issue 37)'
  return [...sectionHead(report, heading, 'the contenders are in bench/lock-contenders.ts', `redis-server ${report.machine.redisServer}`), tables].join('\n')
}

/** The etcd rows' section. */
function renderEtcdSection(report: Report): string {
  const etcd = report.etcd!
  const redis = report.uncontended.length + report.contended.length > 0 ? { uncontended: report.uncontended, contended: report.contended } : undefined
  const heading = "## Lock on etcd: our Locker against the etcd3 package's Lock (issue 36)"
  return [...sectionHead(report, heading, 'the etcd rows are bench/etcd-lock.ts', `etcd ${etcd.etcdVersion} (Debian's etcd-server)`), renderEtcdReport(etcd, redis)].join('\n')
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
    warmupMs: args['warmup-ms'] ?? (quick ? 300 : 500),
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

/** Quorum mode (issue 15): N redis-servers of the run's own, one connection to each per instance. */
const QUORUM_PLAN: QuorumPlan = {
  // As the single-server uncontended runs, at each quorum size; fewer rounds (3 contenders × 2 sizes).
  uncontended: {
    nodes: args['quorum-nodes'] ?? [3, 5],
    workers: args.workers ?? [1, 50],
    // 3 s: with 0.5 s (~1,500 operations at 1 worker) a fresh child's code is still being
    // compiled when its window opens, and the libraries with more code per operation pay for it
    // in the window (at load ~9, ours spent 229-282 µs of client CPU per operation against
    // redlock's 197-210 after 0.5 s, and 189-191 against 215-231 after 3 s).
    warmupMs: args['warmup-ms'] ?? (quick ? 300 : 3_000),
    durationMs: quick ? 1_000 : 2_000,
    rounds: args.rounds ?? (quick ? 1 : 6),
  },
  contended: {
    nodes: 5,
    workers: 20,
    holdMs: 1,
    warmupMs: quick ? 300 : 1_000,
    durationMs: quick ? 2_000 : 10_000,
    rounds: args['contended-rounds'] ?? args.rounds ?? (quick ? 1 : 3),
  },
  // 10 workers loop acquire → release on keys of their own; 2 of 5 servers SIGKILLed after the
  // all-up window and kept down for the degraded one. The RSS cap only spares the machine.
  degraded: {
    nodes: 5,
    kill: 2,
    workers: 10,
    warmupMs: quick ? 300 : 1_000,
    allUpMs: quick ? 1_500 : 5_000,
    windowMs: (args['degraded-seconds'] ?? (quick ? 6 : 60)) * 1000,
    rssCapMb: 1024,
  },
  // 3 of 5 killed, then single acquires one after another (waitMs 1 s where a library has a
  // wait); a try unsettled after tryDeadlineMs is given up, and no try starts after windowMs.
  majorityDown: {
    nodes: 5,
    kill: 3,
    waitMs: 1_000,
    warmupMs: 300,
    tries: quick ? 3 : 20,
    tryDeadlineMs: (args['down-try-seconds'] ?? (quick ? 3 : 30)) * 1000,
    windowMs: quick ? 6_000 : 60_000,
  },
}

/**
 * The etcd rows (issue 36): ours against etcd3's Lock on 1 and 3 spawned members, data on tmpfs.
 * Fewer, shorter rounds than Redis's: every measurement runs in this process, and the members
 * share the 2 CPUs with it.
 */
const ETCD_PLAN: EtcdPlan = {
  members: args['etcd-members'] ?? [1, 3],
  uncontended: {
    workers: args.workers ?? [1, 50],
    warmupMs: args['warmup-ms'] ?? (quick ? 300 : 500),
    durationMs: quick ? 1_000 : 2_000,
    rounds: args.rounds ?? (quick ? 1 : 5),
  },
  contended: {
    workers: 20,
    holdMs: 1,
    warmupMs: quick ? 300 : 1_000,
    durationMs: quick ? 2_000 : 5_000,
    rounds: args['contended-rounds'] ?? args.rounds ?? (quick ? 1 : 3),
    anchorRetryMs: 5,
  },
  election: {
    candidates: 3,
    holdMs: 1,
    warmupMs: quick ? 300 : 1_000,
    durationMs: quick ? 2_000 : 5_000,
    rounds: args['contended-rounds'] ?? args.rounds ?? (quick ? 1 : 3),
  },
  ttlSeconds: TTL_MS / 1000,
  dataDir: '/dev/shm',
}
let etcdReport: EtcdReport | undefined

const scenarios = args.scenarios
const modules = args['contenders-module']
const all = await loadContenders(modules)
const wanted = args.contenders?.split(',')
const contenders = wanted ? wanted.map((id) => all.find((c) => c.id === id) ?? fail(`--contenders: unknown contender "${id}" (known: ${all.map((c) => c.id).join(', ')})`)) : all

function fail(message: string): never {
  console.error(`bench:lock: ${message}`)
  process.exit(EXIT_CODES.usage)
}

// Every measurement runs on redis-servers of our own: without the binary the run cannot start.
if (spawnSync(redisServerBin(), ['--version']).status !== 0) {
  console.error(`bench:lock: could not start: ${redisServerBin()} cannot be run: install Debian's redis-server, or set REDIS_SERVER_BIN`)
  process.exit(EXIT_CODES.cannotStart)
}

// --- processes we own: the redis-server(s) and at most one child at a time -----------------------

let server: BenchRedisServer | undefined
/** The quorum scenarios' servers (the first N of them for a quorum of N). */
const quorumServers: BenchRedisServer[] = []
let child: ChildProcess | undefined
let familyChild: ChildProcess | undefined
let interrupted = false

async function stopServers(): Promise<void> {
  await Promise.allSettled([server, ...quorumServers].map((s) => s?.stop()))
}

for (const [signal, code] of [['SIGINT', EXIT_CODES.interrupted], ['SIGTERM', EXIT_CODES.terminated]] as const) {
  process.on(signal, () => {
    interrupted = true
    if (child?.pid !== undefined && child.exitCode === null) process.kill(child.pid, 'SIGKILL')
    // The family's process stops its own redis-server on a signal of its own.
    if (familyChild?.pid !== undefined && familyChild.exitCode === null) process.kill(familyChild.pid, signal)
    void stopServers().finally(() => process.exit(code))
  })
}

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
  const young = respawnedReadyAt - performance.now()
  if (young > 0) await new Promise((resolve) => setTimeout(resolve, young))
  await awaitQuiet()
  loads.push(loadavg()[0]!)
  return forkChild(job)
}

/** Quorum servers a child had killed; started again (empty) once that child has exited. */
const killed = new Set<BenchRedisServer>()
/**
 * When the servers started again have been up for a lease: a node restarted without persistence
 * must sit out a TTL before it grants again (Redlock's rule; ours enforces it by default with
 * nodeRestartDelayMs = ttlMs), so the next measurement waits for it and starts with every node in.
 */
let respawnedReadyAt = 0

async function respawnKilled(): Promise<void> {
  if (killed.size === 0) return
  for (const s of killed) {
    await s.respawn()
    if (args.pin) pin(s.pid, 1)
  }
  killed.clear()
  respawnedReadyAt = performance.now() + TTL_MS
}

function forkChild(job: ChildJob): Promise<ChildResult> {
  const execArgv = ['--import', 'tsx']
  // V8 names each profile CPU.<date>.<pid>.<thread>...; the main thread's is the one of interest
  // (tsx's loader runs on a second thread). The log line below maps PIDs to runs.
  if (args['cpu-prof']) execArgv.push('--cpu-prof', '--cpu-prof-dir', args['cpu-prof'])
  const limitMs = job.warmupMs + job.durationMs + faultMs(job.fault) + 45_000
  const what = `${job.contender} ${job.scenario} ${job.workers}w${job.servers.length > 1 ? ` N=${job.servers.length}` : ''}`
  return new Promise((resolve, reject) => {
    const c = fork(join(here, 'lock-child.ts'), [JSON.stringify(job)], { execArgv, cwd: root, stdio: ['ignore', 'inherit', 'inherit', 'ipc'] })
    child = c
    const started = performance.now()
    if (args.pin && c.pid !== undefined) pin(c.pid, 0)
    if (args['cpu-prof']) console.error(`[bench:lock] child pid ${c.pid}: ${what}`)
    let result: ChildResult | undefined
    // A fault run reports progress: when it does not finish, its last report is what it got to.
    let progress: ChildResult | undefined
    let timedOut = false
    const timer = setTimeout(() => {
      timedOut = true
      if (c.pid !== undefined && c.exitCode === null) process.kill(c.pid, 'SIGKILL')
    }, limitMs)
    c.on('message', (m: ChildMessage) => {
      if (m.type === 'result') result = m.result
      else if (m.type === 'progress') progress = m.result
      else if (m.type === 'kill') {
        const targets = m.servers.map((i) => quorumServers[i] ?? fail(`child asked to kill server ${i}, which does not exist`))
        for (const s of targets) killed.add(s)
        void Promise.all(targets.map((s) => s.kill())).then(() => {
          if (c.connected) c.send({ type: 'killed' } satisfies KilledMessage)
        })
      }
    })
    c.on('exit', (code, signal) => {
      clearTimeout(timer)
      child = undefined
      const why = timedOut ? `did not finish in ${Math.round(limitMs / 1000)} s (killed)` : `exited (${code ?? signal}) before it finished`
      if (result) resolve(result)
      else if (progress && 'final' in progress) resolve({ ...progress, unfinished: { afterMs: performance.now() - started, why } })
      else reject(new Error(`${what}: ${timedOut ? `no result within ${limitMs} ms, killed` : `child exited (${code ?? signal}) without a result`}`))
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
const singleScenarios = scenarios.filter((s) => !isQuorumScenario(s))
const quorumScenarios = scenarios.filter(isQuorumScenario)
// The scripts' costs are the single-server scripts': a quorum-only run skips them.
const runScriptCosts = !args['no-script-costs'] && singleScenarios.length > 0
if (singleScenarios.length > 0 || runScriptCosts) {
  server = await startRedisServer()
  if (args.pin) pin(server.pid, 1)
  console.error(`[bench:lock] redis-server ${machine.redisServer} pid ${server.pid} on ${server.host}:${server.port}; load ${loadAtStart}`)
}
const Q = QUORUM_PLAN
const quorumSize = Math.max(
  0,
  ...(quorumScenarios.includes('quorum-uncontended') ? Q.uncontended.nodes : []),
  ...(quorumScenarios.includes('quorum-contended') ? [Q.contended.nodes] : []),
  ...(quorumScenarios.includes('quorum-degraded') ? [Q.degraded.nodes] : []),
  ...(quorumScenarios.includes('quorum-majority-down') ? [Q.majorityDown.nodes] : []),
)
try {
  for (let i = 0; i < quorumSize; i++) {
    const s = await startRedisServer()
    quorumServers.push(s)
    if (args.pin) pin(s.pid, 1)
  }
} catch (error) {
  await stopServers()
  throw error
}
if (quorumSize > 0) console.error(`[bench:lock] quorum: ${quorumSize} redis-servers on ports ${quorumServers.map((s) => s.port).join(', ')}; load ${loadAtStart}`)

const uncontended: UncontendedResult[] = []
const contended: ContendedResult[] = []
const fair: ContendedResult[] = []
const quorum = { uncontended: [] as UncontendedResult[], contended: [] as ContendedResult[], degraded: [] as DegradedResult[], majorityDown: [] as MajorityDownResult[] }
let scriptCosts: ScriptCost[] = []
const jobBase = { modules, servers: server ? [{ host: server.host, port: server.port }] : [], ttlMs: TTL_MS }
const quorumOf = (nodes: number): ServerAddress[] => quorumServers.slice(0, nodes).map((s) => ({ host: s.host, port: s.port }))
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
  } finally {
    // The next run starts with every server up (and empty where one was killed).
    await respawnKilled()
  }
}
const log = (r: ChildResult) => {
  let what: string
  if (r.scenario === 'quorum-degraded') {
    const d = r.degraded
    const ms = (x: number | null) => (x === null ? '—' : x.toFixed(1))
    what = `${Math.round((r.allUp.ops / r.allUp.elapsedMs) * 1000)} → ${Math.round((d.ops / Math.max(1, d.elapsedMs)) * 1000)} ops/s, acquire p99 ${ms(r.allUp.acquireMs.p99)} → ${ms(d.acquireMs.p99)} ms, RSS +${(r.rssMb.end - r.rssMb.atKill).toFixed(1)} MB, offline queue ${r.offlineQueue}${r.unfinished ? ` (${r.unfinished.why})` : ''}`
  } else if (r.scenario === 'quorum-majority-down') {
    what = r.tries.map((t) => `${t.outcome === 'rejected' ? t.error : t.outcome} ${Math.round(t.ms)} ms`).join(', ') + (r.unfinished ? ` (${r.unfinished.why})` : '')
  } else if ('ops' in r) {
    what = `${Math.round((r.ops / r.elapsedMs) * 1000)} ops/s, ${(r.sentTotal / Math.max(1, r.ops)).toFixed(2)} sent/op`
  } else {
    what = `${Math.round((r.acquisitions / r.elapsedMs) * 1000)} acq/s, overlaps ${r.overlaps}`
  }
  const workers = 'workers' in r ? ` ${r.workers}w` : ''
  console.error(`[bench:lock] ${r.scenario}${r.nodes && r.nodes > 1 ? ` N=${r.nodes}` : ''}${workers} ${r.contender}: ${what}`)
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
  await runQuorum()
  if (args.etcdScenarios.length > 0 && !interrupted) {
    // etcd that cannot start (not installed) costs the etcd rows only, not what was measured.
    try {
      etcdReport = await runEtcdScenarios(args.etcdScenarios, ETCD_PLAN, runId, {
        before: async () => {
          await awaitQuiet()
          loads.push(loadavg()[0]!)
        },
        interrupted: () => interrupted,
        log: (line) => console.error(`[bench:lock] ${line}`),
      })
      failures.push(...etcdReport.failures)
    } catch (error) {
      const message = `etcd rows: ${error instanceof Error ? error.message : String(error)}`
      console.error(`[bench:lock] FAILED: ${message}`)
      failures.push(message)
    }
  }
  if (runScriptCosts && server && !interrupted) {
    await awaitQuiet()
    // Last in the run: a probe that fails is reported, not allowed to lose what was measured.
    try {
      scriptCosts = await measureScriptCosts(server.host, server.port)
    } catch (error) {
      const message = `script costs: ${error instanceof Error ? error.message : String(error)}`
      console.error(`[bench:lock] FAILED: ${message}`)
      failures.push(message)
    }
  }
} finally {
  await stopServers()
}

/** The quorum scenarios, each contender in turn within a round, as the single-server ones. */
async function runQuorum(): Promise<void> {
  const list = (scenario: Scenario) => contenders.filter((c) => c.scenarios.includes(scenario))
  if (scenarios.includes('quorum-uncontended')) {
    const p = Q.uncontended
    for (let r = 0; r < p.rounds; r++) {
      for (const nodes of p.nodes) {
        for (const workers of p.workers) {
          for (const c of rotated(list('quorum-uncontended'), r)) {
            if (interrupted) return
            const job = { ...jobBase, servers: quorumOf(nodes), contender: c.id, scenario: 'quorum-uncontended', workers, warmupMs: p.warmupMs, durationMs: p.durationMs, holdMs: 0, keyPrefix: `bench:${runId}:${n++}`, round: r } as const
            const result = await measure(job)
            if (!result) continue
            log(result)
            quorum.uncontended.push(result as UncontendedResult)
          }
        }
      }
    }
  }
  if (scenarios.includes('quorum-contended')) {
    const p = Q.contended
    for (let r = 0; r < p.rounds; r++) {
      for (const c of rotated(list('quorum-contended'), r)) {
        if (interrupted) return
        const { workers, warmupMs, durationMs, holdMs } = p
        const result = await measure({ ...jobBase, servers: quorumOf(p.nodes), contender: c.id, scenario: 'quorum-contended', workers, warmupMs, durationMs, holdMs, keyPrefix: `bench:${runId}:${n++}`, round: r })
        if (!result) continue
        log(result)
        quorum.contended.push(result as ContendedResult)
      }
    }
  }
  // The last servers of the quorum are the ones killed; each run starts with all of them up.
  const killLast = (nodes: number, k: number) => Array.from({ length: k }, (_, i) => nodes - k + i)
  if (scenarios.includes('quorum-degraded')) {
    const p = Q.degraded
    const fault: FaultPlan = { kill: killLast(p.nodes, p.kill), windowMs: p.windowMs, rssCapMb: p.rssCapMb, tries: 0, tryDeadlineMs: 0 }
    for (const c of list('quorum-degraded')) {
      if (interrupted) return
      const result = await measure({ ...jobBase, servers: quorumOf(p.nodes), contender: c.id, scenario: 'quorum-degraded', workers: p.workers, warmupMs: p.warmupMs, durationMs: p.allUpMs, holdMs: 0, keyPrefix: `bench:${runId}:${n++}`, round: 0, fault })
      if (!result) continue
      log(result)
      quorum.degraded.push(result as DegradedResult)
    }
  }
  if (scenarios.includes('quorum-majority-down')) {
    const p = Q.majorityDown
    const fault: FaultPlan = { kill: killLast(p.nodes, p.kill), windowMs: p.windowMs, rssCapMb: 0, tries: p.tries, tryDeadlineMs: p.tryDeadlineMs }
    for (const c of list('quorum-majority-down')) {
      if (interrupted) return
      const result = await measure({ ...jobBase, servers: quorumOf(p.nodes), contender: c.id, scenario: 'quorum-majority-down', workers: 1, warmupMs: p.warmupMs, durationMs: 0, holdMs: 0, waitMs: p.waitMs, keyPrefix: `bench:${runId}:${n++}`, round: 0, fault })
      if (!result) continue
      log(result)
      quorum.majorityDown.push(result as MajorityDownResult)
    }
  }
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
  ...(quorumScenarios.length > 0 ? { quorum: { plan: QUORUM_PLAN, ...quorum } } : {}),
  scriptCosts,
  ...(etcdReport ? { etcd: etcdReport } : {}),
  quick,
}
const saved = args.save ?? join(tmpdir(), `bench-lock-${runId}.json`)
writeFileSync(saved, JSON.stringify(report))
console.error(`[bench:lock] raw results in ${saved} (re-render with --render ${saved})`)
publish(report)
if (args.family && !interrupted) process.exitCode = await runFamilyRows()

/** The lock family's rows (issue 22): bench/lock-family.bench.ts in a process of its own, which writes its own section. */
function runFamilyRows(): Promise<number> {
  const flags = [...(quick ? ['--quick'] : []), ...(args['no-write'] ? ['--no-write'] : [])]
  console.error(`[bench:lock] the lock family's rows: bench/lock-family.bench.ts ${flags.join(' ')}`)
  const family = spawn(process.execPath, ['--import', 'tsx', join(here, 'lock-family.bench.ts'), ...flags], { cwd: root, stdio: 'inherit' })
  familyChild = family
  return new Promise((resolve) => family.on('exit', (code) => resolve(code ?? EXIT_CODES.failed)))
}
