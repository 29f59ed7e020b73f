/**
 * The table of `docs/RELIABILITY.md`: one row per scenario, fenced vs lock-only side by side.
 */
import { execFileSync } from 'node:child_process'
import { cpus, release, totalmem } from 'node:os'
import type { Scenario, RunResult } from './scenarios.js'

/** One scenario's pair of runs and its verdict. */
export interface ScenarioOutcome {
  readonly scenario: Scenario
  readonly fenced: RunResult
  readonly lock: RunResult
  /** Empty when the scenario passes. */
  readonly problems: string[]
}

const pair = (f: number, l: number) => `${f} / ${l}`

function recovery(r: RunResult): string {
  const ms = r.check.recoveryMs.filter((x): x is number => x !== null).sort((a, b) => a - b)
  if (ms.length === 0) return '—'
  const median = ms[Math.floor((ms.length - 1) / 2)] as number
  return `${Math.round(median)} / ${Math.round(ms[ms.length - 1] as number)}`
}

function faultCount(r: RunResult): string {
  return Object.entries(r.faultKinds)
    .map(([kind, n]) => `${n} ${kind}`)
    .join(', ')
}

/** The markdown table of `outcomes`. */
export function formatTable(outcomes: readonly ScenarioOutcome[]): string {
  const head = [
    'scenario',
    'faults injected (fenced run; lock-only run)',
    'operations',
    'overlapping sections',
    'stale writes accepted',
    'oversold',
    'orders charged twice (gateway ledger)',
    'lost updates',
    'tokens not increasing',
    'stale writes rejected',
    'charges (gateway ledger)',
    'payments recorded (shop)',
    'recovery ms, median / max (fenced; lock-only)',
    'result',
  ]
  const rows = outcomes.map(({ scenario, fenced: f, lock: l, problems }) => [
    `\`${scenario.name}\``,
    `${scenario.faults}: ${faultCount(f) || 'none'}; ${faultCount(l) || 'none'}`,
    pair(f.check.operations, l.check.operations),
    pair(f.check.overlaps.length, l.check.overlaps.length),
    pair(f.check.staleWritesAccepted.length, l.check.staleWritesAccepted.length),
    pair(f.check.oversoldUnits, l.check.oversoldUnits),
    pair(f.check.doubleChargedOrders, l.check.doubleChargedOrders),
    pair(f.check.lostUpdates, l.check.lostUpdates),
    pair(f.check.nonIncreasingTokens.length, l.check.nonIncreasingTokens.length),
    pair(f.check.rejectedWrites, l.check.rejectedWrites),
    pair(f.check.gatewayCharges, l.check.gatewayCharges),
    pair(f.check.payments, l.check.payments),
    `${recovery(f)}; ${recovery(l)}`,
    problems.length === 0 ? `pass (${scenario.lockOnly === 'bite' ? 'lock-only bites' : scenario.lockOnly === 'quiet' ? 'changes nothing' : 'lock-only shown'})` : `**FAIL**: ${problems.join('; ')}`,
  ])
  return [head, head.map(() => '---'), ...rows].map((cells) => `| ${cells.join(' | ')} |`).join('\n')
}

function versionOf(cmd: string, args: string[]): string {
  try {
    return execFileSync(cmd, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim().split('\n')[0] ?? '?'
  } catch {
    return '?'
  }
}

/** The machine, for the report's header. */
export function describeMachine(): string {
  const cpu = cpus()
  return [
    `${cpu.length} × ${cpu[0]?.model.trim() ?? '?'}`,
    `${Math.round(totalmem() / 2 ** 30)} GiB`,
    `Linux ${release()}`,
    `Node ${process.version}`,
    versionOf('redis-server', ['--version']).replace(/ sha=.*$/, ''),
    versionOf('psql', ['--version']),
  ].join(' · ')
}
