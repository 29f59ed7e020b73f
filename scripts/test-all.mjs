// The body of `npm test`, after the set-up: every workspace built once, then lint and typecheck of
// every workspace (and of the benchmarks and scripts) beside the tests, which two lanes run one
// package at a time, each lane taking the next package from one list, longest first: most of a
// suite's time is waiting (leases running out, servers starting, a paused process), and no two
// suites share anything but the machine's Redis and PostgreSQL (each test makes its own schema, key
// prefix and servers). `--only` keeps a lane from rebuilding what another reads. A failure stops
// nothing: at the end come the time each step and each package took, every failing package, then
// its failing tests by name (from what it printed); the exit code is 1 when anything failed.
// Turbo's run summaries (`--summarize`, .turbo/runs/*.json) say which tasks failed and how long.
import { spawn } from 'node:child_process'
import { readdirSync, readFileSync, statSync } from 'node:fs'
import { join, dirname } from 'node:path'
import { fileURLToPath } from 'node:url'

const root = join(dirname(fileURLToPath(import.meta.url)), '..')
const runs = join(root, '.turbo', 'runs')

// Every workspace with tests, in the order the lanes take them (seconds of a clean-clone run: ci50
// and ci51). Longest first, but the two suites that keep both CPUs busy (chaos and demo-shop: many
// processes selling) never start side by side: the lock's, mostly waiting on leases, goes beside
// chaos, and demo-shop follows it. In ci51 chaos and demo-shop started together and demo-shop took
// 477 s against 248 s in ci50. Two lanes take them in this order, each the next one when it is free.
const SUITES = [
  ['@fencelock/chaos', 267],
  ['@fencelock/lock', 229],
  ['@fencelock/demo-shop', 248],
  ['@fencelock/dashboard', 179],
  ['@fencelock/pack-check', 150],
  ['@fencelock/fencing', 162],
  ['@fencelock/devkit', 120],
  ['@fencelock/metrics', 48],
]
const LANES = 2
// A workspace with tests that the list does not name would never run: that is a failure of this script.
for (const base of ['packages', 'apps']) {
  for (const dir of readdirSync(join(root, base))) {
    let pkg
    try {
      pkg = JSON.parse(readFileSync(join(root, base, dir, 'package.json'), 'utf8'))
    } catch {
      continue
    }
    if (pkg.scripts?.test && !SUITES.some(([name]) => name === pkg.name)) {
      process.stderr.write(`npm test: ${pkg.name} has tests but scripts/test-all.mjs does not list it in SUITES\n`)
      process.exit(1)
    }
  }
}
const queue = SUITES.map(([name]) => ({ turbo: ['run', 'test', '--only', '--continue', `--filter=${name}`] }))

// Built once first; then lint and typecheck (two tasks at a time: about one CPU) run beside the two
// test lanes. One package after another the tests left a CPU idle (a clean-clone run used 1.47 of
// the 2 CPUs over 21 minutes), and lint and typecheck are CPU only.
const STEPS = [
  { name: 'build', chains: [[{ turbo: ['run', 'build', '--output-logs=errors-only'] }]] },
  {
    name: 'lint, typecheck and tests',
    chains: [
      [
        {
          turbo: ['run', 'lint', 'typecheck', '--only', '--concurrency=2', '--continue', '--output-logs=errors-only'],
          quiet: true,
        },
        { label: 'lint of bench and scripts', npm: ['run', 'lint:root', '--silent'], quiet: true },
        { label: 'typecheck of bench and scripts', npm: ['run', 'typecheck:root', '--silent'], quiet: true },
      ],
      ...Array.from({ length: LANES }, () => ({ queue })),
    ],
  },
]

/** The run summaries turbo wrote since `since` (ms). */
function summariesSince(since) {
  const found = []
  try {
    for (const file of readdirSync(runs)) {
      const path = join(runs, file)
      if (!file.endsWith('.json') || statSync(path).mtimeMs < since) continue
      try {
        found.push(JSON.parse(readFileSync(path, 'utf8')))
      } catch {
        // A summary being written or not JSON: its tasks are not counted.
      }
    }
  } catch {
    // No runs folder: turbo failed before it wrote one.
  }
  return found
}

/** What the test lanes printed (turbo prefixes each line with `<package>:<task>: `), kept to name failing tests. */
const printed = []

function run(command, args, quiet) {
  return new Promise((resolve) => {
    // Lint and typecheck logs go to stderr (stdout stays the tests' report), as before. The tests'
    // output is passed on as it comes and kept: turbo keeps no log of a task that failed.
    const child = spawn(command, args, { cwd: root, stdio: ['ignore', quiet ? process.stderr : 'pipe', 'inherit'] })
    child.stdout?.on('data', (chunk) => {
      process.stdout.write(chunk)
      printed.push(chunk)
    })
    child.on('close', (code, signal) => resolve(code ?? (signal ? 1 : 0)))
    child.on('error', () => resolve(1))
  })
}

/**
 * The failing tests of a turbo task, from what it printed: each vitest `FAIL  file > suite > test`
 * line of the failure report and each unhandled error's header, with the line after it (the
 * error); at most 30 lines.
 */
function failedTests(taskId) {
  const prefix = `${taskId.slice(0, taskId.lastIndexOf('#'))}:${taskId.slice(taskId.lastIndexOf('#') + 1)}: `
  const plain = Buffer.concat(printed)
    .toString('utf8')
    // eslint-disable-next-line no-control-regex
    .replace(/\x1b\[[0-9;]*m/g, '')
    .split('\n')
    .filter((line) => line.startsWith(prefix))
    .map((line) => line.slice(prefix.length).trim())
  const found = []
  for (let i = 0; i < plain.length && found.length < 30; i++) {
    const line = plain[i]
    if (!/^FAIL\s+\S+.*>/.test(line) && !/Unhandled (Rejection|Error)/.test(line)) continue
    found.push(`    ${line.replace(/^[⎯\s]+|[⎯\s]+$/g, '').slice(0, 220)}`)
    const next = plain.slice(i + 1, i + 4).find((l) => l !== '' && !/^[⎯❯]/.test(l))
    if (next !== undefined) found.push(`      ${next.slice(0, 220)}`)
  }
  return found.length === 0 ? [] : [`${taskId}: failing tests`, ...found]
}

const seconds = (ms) => `${(ms / 1000).toFixed(0)} s`
const results = []
const tasks = []
const turbo = join(root, 'node_modules', '.bin', 'turbo')
for (const step of STEPS) {
  const start = Date.now()
  const failed = []
  let turboFailed = false
  // Each chain's commands one after another, the chains side by side; a failure stops nothing.
  await Promise.all(
    step.chains.map(async (chain) => {
      // A chain's own commands in order; a lane takes the shared queue's next until none is left.
      const own = Array.isArray(chain) ? [...chain] : chain.queue
      for (let command = own.shift(); command !== undefined; command = own.shift()) {
        const code = command.turbo
          ? await run(turbo, [...command.turbo, '--summarize'], command.quiet)
          : await run('npm', command.npm, command.quiet)
        if (code !== 0 && command.turbo) turboFailed = true
        if (code !== 0 && command.npm) failed.push(command.label)
      }
    }),
  )
  let turboTasksFailed = 0
  for (const summary of summariesSince(start - 1000)) {
    for (const task of summary?.tasks ?? []) {
      const exit = task.execution?.exitCode
      const ms = (task.execution?.endTime ?? 0) - (task.execution?.startTime ?? 0)
      tasks.push({ id: task.taskId, ms, failed: exit !== 0 && exit !== undefined })
      if (exit !== 0 && exit !== undefined) {
        failed.push(task.taskId)
        turboTasksFailed++
      }
    }
  }
  if (turboFailed && turboTasksFailed === 0) failed.push('(turbo failed before any task; see above)')
  results.push({ step: step.name, ms: Date.now() - start, failed })
}

const lines = ['', 'npm test: what each step took']
for (const r of results)
  lines.push(`  ${r.failed.length === 0 ? 'ok  ' : 'FAIL'} ${r.step.padEnd(32)} ${seconds(r.ms).padStart(6)}`)
const slow = tasks.filter((t) => t.ms >= 10_000).sort((a, b) => b.ms - a.ms)
if (slow.length > 0) {
  lines.push('  tasks of 10 s or more:')
  for (const t of slow) lines.push(`    ${t.failed ? 'FAIL' : 'ok  '} ${t.id.padEnd(40)} ${seconds(t.ms).padStart(6)}`)
}
const failures = results.flatMap((r) => r.failed.map((f) => (f === '' ? r.step : `${r.step}: ${f}`)))
lines.push(
  failures.length === 0
    ? 'npm test: everything passed'
    : `npm test: ${failures.length} failed:\n${failures.map((f) => `  - ${f}`).join('\n')}`,
)
// The failing tests by name, last: a CI record often keeps only the end of the output, and a failed
// package's name alone does not say which of its tests to look at.
for (const t of tasks.filter((task) => task.failed)) lines.push(...failedTests(t.id))
process.stderr.write(lines.join('\n') + '\n')
process.exit(failures.length === 0 ? 0 : 1)
