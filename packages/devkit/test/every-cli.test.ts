/**
 * Every command of the root package.json that runs a TypeScript entry (`node --import tsx <file>`)
 * answers `--help` with its usage and exit 0, and refuses an unknown flag with exit 2 before it
 * starts anything (no Redis, no database, no child process: each answer comes within seconds).
 * Given a Redis, a PostgreSQL and a redis-server binary that are all missing, each says it could
 * not start and exits 2 (not 1, which means the run itself failed): the one convention of
 * EXIT_CODES, which every --help ends with. The list is read from package.json, so a new command is
 * checked without editing this file.
 */
import { spawn } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'
import { EXIT_CODES, exitCodesNote } from '../src/cli.js'

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../../..')
const scripts = (JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { scripts: Record<string, string> })
  .scripts
const commands = Object.entries(scripts)
  .map(([name, line]) => ({ name, entry: /node --import tsx (\S+\.ts)\b/.exec(line)?.[1] }))
  .filter((c): c is { name: string; entry: string } => c.entry !== undefined)

/** Flags that keep a command from writing docs, should it get further than it may. */
const HARMLESS_ARGS: Readonly<Record<string, string[]>> = {
  chaos: ['--short', '--no-write'],
  'bench:lock': ['--quick', '--no-write'],
  'bench:fencing': ['--no-docs'],
  'bench:shop': ['--no-docs', '--rounds', '1'],
  'bench:metrics': ['--quick', '--no-write'],
  'bench:lock:ha': ['--no-write', '--rounds', '1', '--seconds', '1'],
  'bench:lock-family': ['--quick', '--no-write'],
}

/**
 * Two commands at a time (each is a process start with tsx, mostly CPU; one after another the 37
 * took 85 s of a clean-clone npm test). A slot is taken before the clock starts, so a command's
 * `ms` is its own run, not its wait for a slot.
 */
const SLOTS = 2
let free = SLOTS
const queued: (() => void)[] = []
async function slot(): Promise<() => void> {
  if (free > 0) free--
  else await new Promise<void>((resolve) => queued.push(resolve))
  return () => {
    const next = queued.shift()
    if (next) next()
    else free++
  }
}

interface Outcome {
  readonly status: number | null
  readonly stdout: string
  readonly stderr: string
  readonly ms: number
}

async function run(entry: string, args: string[]): Promise<Outcome> {
  const done = await slot()
  try {
    const started = performance.now()
    // No Redis, database or redis-server binary: a command that tried to reach one before parsing
    // would hang or fail differently, and one that needs one cannot start.
    const env = {
      ...process.env,
      REDIS_URL: 'redis://127.0.0.1:1',
      DATABASE_URL: 'postgresql://nobody@127.0.0.1:1/none',
      REDIS_SERVER_BIN: '/nonexistent/redis-server',
    }
    const child = spawn(process.execPath, ['--import', 'tsx', entry, ...args], {
      cwd: root,
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    let stdout = ''
    let stderr = ''
    child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d))
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d))
    // A command that hangs is killed after 30 s (its status is then null, and the test says so).
    const timer = setTimeout(() => child.kill('SIGKILL'), 30_000)
    const status = await new Promise<number | null>((resolve) => child.once('close', (code) => resolve(code)))
    clearTimeout(timer)
    return { status, stdout, stderr, ms: performance.now() - started }
  } finally {
    done()
  }
}

describe.concurrent('every command line', () => {
  it('control: the commands are found in package.json', () => {
    expect(commands.map((c) => c.name)).toEqual(
      expect.arrayContaining([
        'demo',
        'demo:lock',
        'flash-sale',
        'chaos',
        'bench:lock',
        'bench:fencing',
        'bench:shop',
        'bench:metrics',
        'db:migrate',
        'db:seed',
      ]),
    )
  })

  it.for(commands)(
    '$name: --help prints the usage on stdout, ending with the exit codes, exit 0',
    async ({ name, entry }, { expect }) => {
      const result = await run(entry, ['--help'])
      expect(result.stderr).not.toMatch(/Error|at .*\.ts:\d+/)
      expect(result.status).toBe(0)
      expect(result.stdout).toMatch(new RegExp(`^Usage: npm run ${name} -- \\[options\\]`))
      expect(result.stdout).toMatch(/Exit codes?:/)
      // The closing block is the devkit's, generated from EXIT_CODES; only what 1 means is the command's.
      const usage = result.stdout.trimEnd()
      const failure = /^ {2}1 +(.*)$/m.exec(usage)?.[1] ?? '(no line for exit 1)'
      expect(usage.endsWith(exitCodesNote(failure))).toBe(true)
    },
  )

  it.for(commands)(
    '$name: with no Redis, no PostgreSQL and no redis-server to spawn, it could not start: the reason on stderr, exit 2',
    async ({ name, entry }, { expect }) => {
      const result = await run(entry, HARMLESS_ARGS[name] ?? [])
      expect(result.stderr).toContain(`${name}: could not start: `)
      expect(result.stderr).toMatch(/REDIS_URL|PostgreSQL at|redis-server cannot be run/)
      expect(result.stderr).not.toMatch(/^\s+at /m)
      expect(result.status).toBe(EXIT_CODES.cannotStart)
      expect(result.ms).toBeLessThan(20_000)
    },
  )

  it.for(commands)(
    '$name: an unknown flag is refused with exit 2, naming it, before anything starts',
    async ({ name, entry }, { expect }) => {
      const result = await run(entry, ['--shrot'])
      expect(result.status).toBe(2)
      expect(result.stderr).toContain(`${name}: unknown option --shrot`)
      expect(result.stdout).toBe('')
      expect(result.ms).toBeLessThan(20_000)
    },
  )
})
