/**
 * Runs scenarios fenced and lock-only, one run at a time (the runs measure races: two at once on
 * a small machine would measure the scheduler), and judges each pair.
 */
import type { ScenarioOutcome } from './reliability-report.js'
import { runScenario, SCENARIOS, verdict, type RunResult } from './scenarios.js'

/** Options of {@link runSuite}. */
export interface SuiteOptions {
  /** Faults per run, in ms. */
  readonly durationMs: number
  /** Scenario names to run; default all. */
  readonly only?: readonly string[]
  readonly verbose?: boolean
  /** Leave out the scenarios marked `slow` (the failovers), unless `only` names them. */
  readonly skipSlow?: boolean
  /** Called after each run. */
  readonly onRun?: (result: RunResult) => void
}

/** Runs the suite; each outcome carries its verdict. */
export async function runSuite(options: SuiteOptions): Promise<ScenarioOutcome[]> {
  const chosen =
    options.only === undefined ? SCENARIOS.filter((s) => !(options.skipSlow === true && s.slow === true)) : SCENARIOS.filter((s) => options.only?.includes(s.name))
  if (options.only !== undefined && chosen.length !== options.only.length) {
    throw new Error(`unknown scenario in ${options.only.join(',')}; known: ${SCENARIOS.map((s) => s.name).join(', ')}`)
  }
  const outcomes: ScenarioOutcome[] = []
  for (const scenario of chosen) {
    const run = async (mode: 'fenced' | 'lock') => {
      const durationMs = Math.max(options.durationMs, scenario.minDurationMs ?? 0)
      const result = await runScenario(scenario, { mode, durationMs, verbose: options.verbose ?? false })
      options.onRun?.(result)
      return result
    }
    const fenced = await run('fenced')
    const lock = await run('lock')
    outcomes.push({ scenario, fenced, lock, problems: verdict(scenario, fenced, lock) })
  }
  return outcomes
}
