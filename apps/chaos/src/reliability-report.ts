/**
 * The tables of `docs/RELIABILITY.md`: one row per scenario, fenced vs lock-only side by side;
 * and for the quorum scenarios, how the acquires asked while nodes were down ended.
 */
import { execFileSync } from 'node:child_process'
import { cpus, release, totalmem } from 'node:os'
import type { WindowAcquires } from './checker.js'
import type { Scenario, RunResult } from './scenarios.js'

/** One scenario's pair of runs and its verdict. */
export interface ScenarioOutcome {
  readonly scenario: Scenario
  readonly fenced: RunResult
  readonly lock: RunResult
  /** Empty when the scenario passes. */
  readonly problems: string[]
}

const pair = (f: number | string, l: number | string) => `${f} / ${l}`

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
    'overlaps unwarned',
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
    pair(f.check.unwarnedOverlaps, l.check.unwarnedOverlaps),
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

/** `3 LockUnavailableError, 1 LockTimeoutError`, or `0`. */
function failures(failed: Readonly<Record<string, number>>): string {
  const entries = Object.entries(failed).sort(([, a], [, b]) => b - a)
  return entries.length === 0 ? '0' : entries.map(([error, n]) => `${n} ${error}`).join(', ')
}

/** `not-owner / expired / not told` counts of a run's overlaps. */
function lossReasons(r: RunResult): string {
  const count = (reason: string | null) => r.check.overlaps.filter((o) => o.firstLostReason === reason).length
  return `${count('not-owner')} / ${count('expired')} / ${count(null)}`
}

function slowest(w: WindowAcquires): string {
  return w.slowest === null ? '—' : `${Math.round(w.slowest.ms)} (${Math.round(w.slowest.ms - w.slowest.stalledMs)})`
}

/**
 * The quorum table: for each scenario run over several Redis masters, the acquires asked while a
 * majority was down (none may be granted, each must end with a typed error within its wait) and,
 * for comparison, while a minority was down. Empty when no scenario ran in quorum mode.
 */
export function formatQuorumTable(outcomes: readonly ScenarioOutcome[]): string {
  const quorum = outcomes.filter((o) => (o.scenario.redisNodes ?? 1) > 1)
  if (quorum.length === 0) return ''
  const head = [
    'scenario',
    'nodes',
    'majority-down windows',
    'acquires asked, majority down',
    'ended with an error (by class)',
    'granted while the majority was down',
    'granted after it came back',
    'never ended',
    'slowest acquire, ms from ask to end (less its process\'s stalls)',
    'acquires asked, minority down: granted / failed (by class)',
    'overlaps by how the first holder lost its lock: not-owner / expired / not told',
    'result',
  ]
  const rows = quorum.map(({ scenario, fenced, lock, problems }) => {
    const side = (pick: (r: RunResult) => string) => `${pick(fenced)}; ${pick(lock)}`
    return [
      `\`${scenario.name}\``,
      String(scenario.redisNodes),
      pair(fenced.check.majorityDown.windows, lock.check.majorityDown.windows),
      pair(fenced.check.majorityDown.asked, lock.check.majorityDown.asked),
      side((r) => failures(r.check.majorityDown.failed)),
      pair(fenced.check.majorityDown.grantedDuring.length, lock.check.majorityDown.grantedDuring.length),
      pair(fenced.check.majorityDown.grantedAfter, lock.check.majorityDown.grantedAfter),
      pair(fenced.check.majorityDown.unresolved.length, lock.check.majorityDown.unresolved.length),
      pair(slowest(fenced.check.majorityDown), slowest(lock.check.majorityDown)),
      side((r) => `${r.check.minorityDown.asked}: ${r.check.minorityDown.grantedDuring.length + r.check.minorityDown.grantedAfter} / ${failures(r.check.minorityDown.failed)}`),
      side(lossReasons),
      problems.length === 0 ? 'pass' : '**FAIL**',
    ]
  })
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

/**
 * The failover table: for each scenario on a Sentinel set or a Cluster, every failover's recovery
 * (from the kill, or the CLUSTER FAILOVER, to the next grant of a resource of that shard: a grant
 * on the new primary), and what the lock alone let through. Empty when none ran.
 */
export function formatFailoverTable(outcomes: readonly ScenarioOutcome[]): string {
  const failovers = outcomes.filter((o) => o.scenario.topology !== undefined)
  if (failovers.length === 0) return ''
  const each = (r: RunResult) => r.check.recoveryMs.map((ms) => (ms === null ? 'none' : String(Math.round(ms)))).join(', ') || '—'
  const head = [
    'scenario',
    'failovers (fenced / lock-only)',
    'recovery ms, each failover: fenced (replicas 1)',
    'recovery ms, each failover: lock-only (replicas 0)',
    'tokens not increasing (fenced / lock-only)',
    'overlaps, unwarned (fenced / lock-only)',
    'violations (fenced / lock-only)',
    'result',
  ]
  const rows = failovers.map(({ scenario, fenced, lock, problems }) => [
    `\`${scenario.name}\``,
    pair(fenced.check.faults, lock.check.faults),
    each(fenced),
    each(lock),
    pair(fenced.check.nonIncreasingTokens.length, lock.check.nonIncreasingTokens.length),
    `${fenced.check.overlaps.length} (${fenced.check.unwarnedOverlaps}) / ${lock.check.overlaps.length} (${lock.check.unwarnedOverlaps})`,
    pair(fenced.check.safetyViolations, lock.check.safetyViolations),
    problems.length === 0 ? 'pass' : '**FAIL**',
  ])
  return [head, head.map(() => '---'), ...rows].map((cells) => `| ${cells.join(' | ')} |`).join('\n')
}
