/**
 * The CI version of `npm run chaos`: every scenario, fenced and lock-only, with short runs, held
 * to the same acceptance (see `verdict` in src/scenarios.ts), and no process left behind.
 */
import { execFileSync, spawn } from 'node:child_process'
import { randomUUID } from 'node:crypto'
import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'
import { formatQuorumTable, formatTable } from '../src/reliability-report.js'
import { runSuite } from '../src/suite.js'

/**
 * PIDs of processes whose command line contains `text`. pgrep exits 1 when there are none; any
 * other failure (pgrep missing, exit 2 or 3) throws, so it never passes for "no process left".
 */
function pgrep(text: string): number[] {
  try {
    return execFileSync('pgrep', ['-f', text], { encoding: 'utf8' }).trim().split('\n').filter(Boolean).map(Number)
  } catch (error) {
    if ((error as { status?: unknown }).status === 1) return []
    throw new Error(`pgrep -f could not run (${(error as Error).message}): install Debian's procps (npm test does: scripts/ensure-system.mjs)`, { cause: error })
  }
}

describe('pgrep, which the suite counts leftover processes with', () => {
  it('control: finds a process by its command line, and nothing for a text no process has', async () => {
    const marker = `chaos-pgrep-control-${randomUUID()}`
    const child = spawn(process.execPath, ['-e', 'setTimeout(() => {}, 30_000)', marker], { stdio: 'ignore' })
    try {
      await new Promise<void>((resolve, reject) => {
        child.once('spawn', () => resolve())
        child.once('error', reject)
      })
      expect(pgrep(marker)).toEqual([child.pid])
    } finally {
      child.kill('SIGKILL')
    }
    expect(pgrep(randomUUID())).toEqual([])
  })
})

describe('chaos suite (short)', () => {
  it('fenced: no stale write, oversell, order charged twice (gateway ledger) or lost update; lock-only bites under pauses and stalls; a quorum with a majority down refuses in time; no process left', async () => {
    const began = performance.now()
    const outcomes = await runSuite({ durationMs: Number(process.env.CHAOS_CI_DURATION_MS ?? 4_000), skipSlow: true })
    console.log(formatTable(outcomes))
    console.log(formatQuorumTable(outcomes))
    console.log(`chaos CI run: ${((performance.now() - began) / 1000).toFixed(0)} s`)
    expect(outcomes.map((o) => ({ scenario: o.scenario.name, problems: o.problems }))).toEqual(
      outcomes.map((o) => ({ scenario: o.scenario.name, problems: [] })),
    )
    // Every worker this suite forked is gone. By its absolute path: another checkout's suite
    // running at the same time on this machine has workers of its own.
    expect(pgrep(fileURLToPath(new URL('../src/worker.ts', import.meta.url)))).toEqual([])
    // 10 minutes: the run takes 4.5-6 minutes beside the lock tests; the 6 of vitest.config.ts timed
    // it out in a run at load 20. A hang is still cut, and npm test stays under its 20 minutes.
  }, 600_000)
})
