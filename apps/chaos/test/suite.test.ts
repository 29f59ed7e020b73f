/**
 * The CI version of `npm run chaos`: every scenario, fenced and lock-only, with short runs, held
 * to the same acceptance (see `verdict` in src/scenarios.ts), and no process left behind.
 */
import { execFileSync } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'
import { formatTable } from '../src/reliability-report.js'
import { runSuite } from '../src/suite.js'

/** PIDs of processes whose command line contains `text` (pgrep exits 1 when there are none). */
function pgrep(text: string): number[] {
  try {
    return execFileSync('pgrep', ['-f', text], { encoding: 'utf8' }).trim().split('\n').filter(Boolean).map(Number)
  } catch {
    return []
  }
}

describe('chaos suite (short)', () => {
  it('fenced: no stale write, oversell, order charged twice (gateway ledger) or lost update; lock-only bites under pauses and stalls; no process left', async () => {
    const began = performance.now()
    const outcomes = await runSuite({ durationMs: Number(process.env.CHAOS_CI_DURATION_MS ?? 5_000) })
    console.log(formatTable(outcomes))
    console.log(`chaos CI run: ${((performance.now() - began) / 1000).toFixed(0)} s`)
    expect(outcomes.map((o) => ({ scenario: o.scenario.name, problems: o.problems }))).toEqual(
      outcomes.map((o) => ({ scenario: o.scenario.name, problems: [] })),
    )
    // Every worker this suite forked is gone. By its absolute path: another checkout's suite
    // running at the same time on this machine has workers of its own.
    expect(pgrep(fileURLToPath(new URL('../src/worker.ts', import.meta.url)))).toEqual([])
  })
})
