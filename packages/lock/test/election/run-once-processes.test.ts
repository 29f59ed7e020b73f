/**
 * runOnce across processes with a runner frozen past its lease (issue 33 item 3): SIGSTOP 900 ms
 * with `leaseMs` 300. Frozen after its job finished, the runner had reported `ran` and the next
 * instance took the tick and ran it again (3 of 3 runs); now the runner records the tick as done
 * (while it still holds the lease) before it reports `ran`, and a later holder that finds it done
 * does not run it. Frozen during its job, the runner reports `lost`, not `ran`. The runs are counted
 * where the job's effect lands: a Redis list it appends to.
 */
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process'
import { dirname, join } from 'node:path'
import { createInterface } from 'node:readline'
import { fileURLToPath } from 'node:url'
import type { Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { connect, ready, unique } from '../support/connections.js'
import { startRedisServer, type RedisServer } from '../support/redis-server.js'

const here = dirname(fileURLToPath(import.meta.url))
const EVERY_MS = 4_000
const LEASE_MS = 300
const FROZEN_MS = 900

interface Line {
  event: 'job' | 'report'
  tick: number
  outcome?: string
  /** The worker's Date.now() when it printed the line. */
  at: number
}

/**
 * How far into its 4 s window a tick may be for its runner to be frozen: the worker printed the
 * line within the first 1.5 s, and the test read it within the first 2.5 s — so the 300 ms lease
 * runs out while the window still has over a second for the other instance (on a loaded machine a
 * line can be read late: then the next tick is taken).
 */
const PRINTED_WITHIN_MS = 1_500
const READ_WITHIN_MS = 2_500
/** Ticks to wait for one to freeze before the test says why it found none. */
const TICKS_TO_FIND = 12

let server: RedisServer
let admin: Redis
const children: ChildProcessWithoutNullStreams[] = []
beforeAll(async () => {
  server = await startRedisServer()
  admin = connect({ port: server.port })
  await ready(admin, server.url)
})
afterAll(() => {
  for (const child of children) {
    child.kill('SIGCONT')
    child.kill('SIGKILL')
  }
})

/** A worker process; `lines` gets every line it prints after "ready". */
async function worker(
  key: string,
  listKey: string,
  mode: 'after' | 'during',
  lines: (line: Line, child: ChildProcessWithoutNullStreams) => void,
) {
  const child = spawn(
    process.execPath,
    [
      '--import',
      'tsx',
      join(here, '..', 'fixtures', 'tick-worker.ts'),
      server.url,
      key,
      `${EVERY_MS}`,
      `${LEASE_MS}`,
      listKey,
      mode,
    ],
    { stdio: ['pipe', 'pipe', 'pipe'] },
  )
  children.push(child)
  let errors = ''
  child.stderr.on('data', (chunk: Buffer) => (errors += chunk.toString()))
  const isReady = new Promise<void>((resolve, reject) => {
    child.once('exit', (code) => reject(new Error(`worker exited (${code}): ${errors}`)))
    createInterface({ input: child.stdout }).on('line', (text) => {
      if (text === 'ready') return resolve()
      // The child itself, not its pid to be looked up: the first lines may come in the same chunk
      // as "ready", before the caller has it (a clean-clone CI run: a job's `go` never written,
      // the worker stuck in that job for good, the frozen tick's second report never came).
      lines(JSON.parse(text) as Line, child)
    })
  })
  await isReady
  return child
}

/**
 * Two instances; the first to print `freezeOn` for a tick early enough in its window (see
 * {@link PRINTED_WITHIN_MS}) is frozen for 900 ms — in `during` mode while its job waits for the
 * test's `go`, sent after the freeze (every other job gets its `go` at once), so the freeze lands
 * inside the job however late the line is read. Resolves with every instance's outcome of that
 * tick and the runs its list holds.
 */
async function frozenTick(mode: 'after' | 'during'): Promise<{ frozen: string; other: string; runs: number }> {
  const key = unique('tick-job')
  const listKey = unique('tick-runs')
  const freezeOn = mode === 'after' ? 'report' : 'job'
  const outcomes = new Map<number, Map<number, string>>()
  let target: { tick: number; pid: number } | undefined
  let settle!: () => void
  let fail!: (error: Error) => void
  const both = new Promise<void>((resolve, reject) => {
    settle = resolve
    fail = reject
  })
  /** How late each candidate line was, printed and read (ms into its window), for the failure message. */
  const lateness: string[] = []
  let firstTick: number | undefined
  let bothReadyAt: number | undefined
  const onLine = (line: Line, child: ChildProcessWithoutNullStreams) => {
    const pid = child.pid!
    if (line.event === 'report') {
      const of = outcomes.get(line.tick) ?? new Map<number, string>()
      of.set(pid, line.outcome!)
      outcomes.set(line.tick, of)
      if (target && line.tick === target.tick && of.size === 2) settle()
    }
    const start = line.tick * EVERY_MS
    const ran = line.event === 'job' || line.outcome === 'ran'
    // Only a tick whose window began once both instances were running: both contend for it (on a
    // loaded machine the second can start seconds after the first, and a tick it never tried
    // would never get its second report).
    const contended = bothReadyAt !== undefined && start >= bothReadyAt
    if (!target && line.event === freezeOn && ran && contended) {
      const printed = line.at - start
      const read = Date.now() - start
      lateness.push(`${printed}/${read}`)
      firstTick ??= line.tick
      if (printed < PRINTED_WITHIN_MS && read < READ_WITHIN_MS) {
        target = { tick: line.tick, pid }
        child.kill('SIGSTOP')
        setTimeout(() => {
          child.kill('SIGCONT')
          if (mode === 'during') child.stdin.write(`go ${line.tick}\n`)
        }, FROZEN_MS)
        return
      }
      if (line.tick - firstTick >= TICKS_TO_FIND) {
        fail(
          new Error(
            `no tick early enough to freeze in ${TICKS_TO_FIND} ticks (ms into the window, printed/read: ${lateness.join(', ')})`,
          ),
        )
      }
    }
    if (line.event === 'job' && mode === 'during') child.stdin.write(`go ${line.tick}\n`)
  }
  const a = await worker(key, listKey, mode, onLine)
  const b = await worker(key, listKey, mode, onLine)
  bothReadyAt = Date.now()
  await both
  for (const child of [a, b]) child.stdin.write('quit\n')
  const { tick, pid } = target!
  const of = outcomes.get(tick)!
  const otherPid = [...of.keys()].find((p) => p !== pid)!
  const runs = (await admin.lrange(listKey, 0, -1)).filter((entry) => entry.startsWith(`${tick}:`)).length
  return { frozen: of.get(pid)!, other: of.get(otherPid)!, runs }
}

describe('runOnce with a runner frozen past its lease (real processes, SIGSTOP 900 ms, leaseMs 300)', () => {
  it('frozen after its job: the tick runs exactly once across the instances (the other finds it done)', async () => {
    const { frozen, other, runs } = await frozenTick('after')
    expect(frozen).toBe('ran')
    expect(other).toBe('skipped')
    expect(runs).toBe(1)
  }, 90_000)

  it('frozen during its job: the frozen runner reports lost, the other runs the tick; one ran', async () => {
    const { frozen, other, runs } = await frozenTick('during')
    expect(frozen).toBe('lost')
    expect(other).toBe('ran')
    expect(runs).toBe(2) // the frozen one's append landed before the freeze: fenced writes are for that
  }, 90_000)
})
