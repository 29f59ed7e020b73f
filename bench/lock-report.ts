// Turns the children's results into the markdown of the bench:lock section: medians over rounds,
// ratios against the raw limit measured in the same run, and PASS/MISS against the issue's targets.
import type { ContendedResult, UncontendedResult } from './lock-child.js'
import type { LockContender } from './lock-contenders.js'
import type { MachineInfo } from './support/machine.js'
import { max, median, min, quantile } from './support/stats.js'

/** What the tables need to know about a contender (serializable, unlike the registry entry). */
export type ContenderInfo = Pick<LockContender, 'id' | 'label' | 'notes' | 'targets'>

/** Everything a report is rendered from; saved as JSON so it can be re-rendered (`--render`). */
export interface Report {
  command: string
  /** ISO 8601. */
  startedAt: string
  finishedAt: string
  machine: MachineInfo
  loadAtStart: string
  loadAtEnd: string
  /** 1-minute load average at the start of each measurement. */
  loads: number[]
  /** Share of all CPUs used by other processes in the second before each measurement. */
  othersBusy: number[]
  /** Time spent waiting for other processes to quieten down, in ms; and the threshold (0: off). */
  quietWaitMs: number
  quietBelow: number
  /** Measurements that produced no result. */
  failures: string[]
  plan: {
    uncontended: { workers: number[]; warmupMs: number; durationMs: number; rounds: number }
    contended: { workers: number; holdMs: number; warmupMs: number; durationMs: number; rounds: number }
  }
  ttlMs: number
  contenders: ContenderInfo[]
  uncontended: UncontendedResult[]
  contended: ContendedResult[]
  quick: boolean
}

/** The issue's targets (issue 2, "Benchmark"). */
export const TARGETS = {
  uncontended1: 0.92,
  uncontended50: 0.85,
  waitP99Ms: 60,
  fairness: 0.7,
  commandsPerAcquisition: 4,
}

const fmt = (x: number, digits = 0) =>
  Number.isFinite(x) ? x.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits }) : '—'
const pct = (x: number) => (Number.isFinite(x) ? `${(x * 100).toFixed(1)} %` : '—')
const verdict = (ok: boolean) => (ok ? '**PASS**' : '**MISS**')

interface UncontendedRow {
  opsPerSec: number
  /** Median over rounds of (this / raw in the same round), and the range of that ratio. */
  ofRaw: number
  ofRawMin: number
  ofRawMax: number
  clientCpuUsPerOp: number
  redisCpuUsPerOp: number
  redisCmdUsPerOp: number
  sentPerOp: number
  executedPerOp: number
  errors: number
  rounds: number
  /** Median round (by ops/s): calls per op and µs per call, by command, as Redis counts them. */
  byCommand: Array<{ name: string; perOp: number; usPerCall: number }>
}

function summarizeUncontended(results: UncontendedResult[], id: string, workers: number): UncontendedRow | undefined {
  const mine = results.filter((r) => r.contender === id && r.workers === workers)
  if (mine.length === 0) return undefined
  const raws = results.filter((r) => r.contender === 'raw' && r.workers === workers)
  const rate = (r: UncontendedResult) => (r.ops / r.elapsedMs) * 1000
  // Pair the i-th run of each with the i-th raw run: they belong to the same round.
  const ratios = mine.flatMap((r, i) => (raws[i] ? [rate(r) / rate(raws[i])] : []))
  const per = (f: (r: UncontendedResult) => number) => median(mine.map((r) => f(r) / Math.max(1, r.ops)))
  return {
    opsPerSec: median(mine.map(rate)),
    ofRaw: median(ratios),
    ofRawMin: min(ratios),
    ofRawMax: max(ratios),
    clientCpuUsPerOp: per((r) => r.clientCpuUsec),
    redisCpuUsPerOp: per((r) => r.server.cpuUsec),
    redisCmdUsPerOp: per((r) => Object.values(r.server.usec).reduce((a, b) => a + b, 0)),
    sentPerOp: per((r) => r.sentTotal),
    executedPerOp: per((r) => r.server.totalCalls),
    errors: mine.reduce((a, r) => a + Object.values(r.errors).reduce((x, y) => x + y, 0), 0),
    rounds: mine.length,
    byCommand: ((m) => byCommand(m, m.ops))(medianBy(mine, rate)),
  }
}

function medianBy<T>(items: readonly T[], key: (t: T) => number): T {
  const sorted = [...items].sort((a, b) => key(a) - key(b))
  return sorted[Math.floor((sorted.length - 1) / 2)]!
}

/** Calls per unit (op or acquisition) and µs per call, by command, most called first. */
function byCommand(r: UncontendedResult | ContendedResult, units: number): Array<{ name: string; perOp: number; usPerCall: number }> {
  const n = Math.max(1, units)
  return Object.entries(r.server.calls)
    .sort((a, b) => b[1] - a[1])
    .map(([name, calls]) => ({ name, perOp: calls / n, usPerCall: (r.server.usec[name] ?? 0) / calls }))
}

const commandList = (list: Array<{ name: string; perOp: number; usPerCall: number }>) =>
  list.map((c) => `${c.name} ${c.perOp.toFixed(2)} × ${c.usPerCall.toFixed(1)} µs`).join(', ')

interface ContendedRow {
  acqPerSec: number
  /** Over granted, failed and still-pending acquires alike (they all waited). */
  waitP50: number
  waitP99: number
  waitMax: number
  failedAcquires: number
  gapP50: number
  gapP99: number
  perWorkerMin: number
  perWorkerMax: number
  /** min / max of acquisitions per worker: the median round's, and the worst round's. */
  fairness: number
  fairnessWorst: number
  sentPerAcq: number
  executedPerAcq: number
  /** Median round (by executed calls per acquisition): calls per acquisition and µs per call, by command. */
  byCommand: Array<{ name: string; perOp: number; usPerCall: number }>
  redisCpuUsPerAcq: number
  clientCpuUsPerAcq: number
  overlaps: number
  errors: Record<string, number>
  rounds: number
}

function summarizeContended(results: ContendedResult[], id: string): ContendedRow | undefined {
  const mine = results.filter((r) => r.contender === id)
  if (mine.length === 0) return undefined
  // Percentiles over every acquisition of every round (pooled), rates as the median round.
  const waits = mine.flatMap((r) => [...r.waitsMs, ...r.failedWaitsMs, ...r.pendingWaitsMs])
  const gaps = mine.flatMap((r) => r.gapsMs)
  const fairnessOf = (r: ContendedResult) => min(r.perWorker) / Math.max(1, max(r.perWorker))
  const byFairness = [...mine].sort((a, b) => fairnessOf(a) - fairnessOf(b))
  const mid = byFairness[Math.floor((byFairness.length - 1) / 2)]!
  const per = (f: (r: ContendedResult) => number) => median(mine.map((r) => f(r) / Math.max(1, r.acquisitions)))
  const errors: Record<string, number> = {}
  for (const r of mine) for (const [k, v] of Object.entries(r.errors)) errors[k] = (errors[k] ?? 0) + v
  return {
    acqPerSec: median(mine.map((r) => (r.acquisitions / r.elapsedMs) * 1000)),
    waitP50: quantile(waits, 0.5),
    waitP99: quantile(waits, 0.99),
    waitMax: max(waits),
    failedAcquires: mine.reduce((a, r) => a + r.failedWaitsMs.length, 0),
    gapP50: quantile(gaps, 0.5),
    gapP99: quantile(gaps, 0.99),
    perWorkerMin: min(mid.perWorker),
    perWorkerMax: max(mid.perWorker),
    fairness: fairnessOf(mid),
    fairnessWorst: fairnessOf(byFairness[0]!),
    sentPerAcq: per((r) => r.sentTotal),
    executedPerAcq: per((r) => r.server.totalCalls),
    byCommand: ((m) => byCommand(m, m.acquisitions))(medianBy(mine, (r) => r.server.totalCalls / Math.max(1, r.acquisitions))),
    redisCpuUsPerAcq: per((r) => r.server.cpuUsec),
    clientCpuUsPerAcq: per((r) => r.clientCpuUsec),
    overlaps: mine.reduce((a, r) => a + r.overlaps, 0),
    errors,
    rounds: mine.length,
  }
}

export function renderReport(report: Report): string {
  const { plan, machine } = report
  const u = plan.uncontended
  const c = plan.contended
  const out: string[] = []
  const date = report.startedAt.replace('T', ' ').replace(/\.\d+Z$/, ' UTC')
  const minutes = ((Date.parse(report.finishedAt) - Date.parse(report.startedAt)) / 60_000).toFixed(1)
  out.push('## Lock: `@fencelock/lock` against the raw limit, redis-semaphore and redlock')
  out.push('')
  if (report.quick) out.push('> **Smoke run (`--quick`)**: short windows, one round. Not a result; run without `--quick`.\n')
  out.push(`- Command: \`${report.command}\` (builds the packages, then runs \`node --import tsx bench/lock.bench.ts\`)`)
  out.push(`- Date: ${date}, ${minutes} min`)
  out.push(
    `- Machine: ${machine.nproc} × ${machine.cpuModel}, ${machine.totalMemGiB} GiB RAM, ${machine.os}; Node ${machine.node}; redis-server ${machine.redisServer}`,
  )
  out.push(
    `- Load average (1, 5, 15 min): ${report.loadAtStart} at start, ${report.loadAtEnd} at the end; 1-min load at the start of each measurement ${fmt(min(report.loads), 2)}–${fmt(max(report.loads), 2)}, median ${fmt(median(report.loads), 2)} (it counts the benchmark's own processes)`,
  )
  const busy = (report.othersBusy ?? []).filter(Number.isFinite)
  if (busy.length > 0) {
    const gate = report.quietBelow > 0 ? `; each measurement waited (up to 3 min) for it to fall below ${pct(report.quietBelow)}, ${fmt(report.quietWaitMs / 1000)} s of waiting in all` : ''
    out.push(
      `- Other processes (a shared machine: other engineers' test suites run) used ${pct(median(busy))} of the CPUs in the second before a measurement (median; max ${pct(max(busy))})${gate}`,
    )
  }
  out.push(
    `- Layout: a redis-server of the run's own on a free loopback port (\`--save "" --appendonly no\`); each measurement a fresh Node child process with one ioredis 6 connection (defaults) shared by its workers; lease ${report.ttlMs / 1000} s for every library. Rounds interleave the contenders and rotate their order.`,
  )
  if (report.failures.length > 0) out.push(`- **Failed measurements (left out):** ${report.failures.join('; ')}`)
  out.push('')

  const ids = report.contenders.map((x) => x.id)
  const label = (id: string) => report.contenders.find((x) => x.id === id)?.label ?? id
  const rows1 = new Map(ids.map((id) => [id, summarizeUncontended(report.uncontended, id, 1)]))
  const rows50 = new Map(ids.map((id) => [id, summarizeUncontended(report.uncontended, id, 50)]))
  const crow = new Map(ids.map((id) => [id, summarizeContended(report.contended, id)]))

  // Targets first: that is what a reader of this file looks for.
  const judged = report.contenders.filter((x) => x.targets)
  if (judged.length > 0) {
    out.push('### Targets (issue 2)')
    out.push('')
    out.push('| contender | target | measured | result |')
    out.push('| --- | --- | --- | --- |')
    for (const x of judged) {
      const r1 = rows1.get(x.id)
      const r50 = rows50.get(x.id)
      const cr = crow.get(x.id)
      if (r1) out.push(`| ${x.label} | uncontended, 1 worker ≥ ${TARGETS.uncontended1 * 100} % of raw | ${pct(r1.ofRaw)} (rounds ${pct(r1.ofRawMin)}–${pct(r1.ofRawMax)}) | ${verdict(r1.ofRaw >= TARGETS.uncontended1)} |`)
      if (r50) out.push(`| ${x.label} | uncontended, 50 workers ≥ ${TARGETS.uncontended50 * 100} % of raw | ${pct(r50.ofRaw)} (rounds ${pct(r50.ofRawMin)}–${pct(r50.ofRawMax)}) | ${verdict(r50.ofRaw >= TARGETS.uncontended50)} |`)
      if (cr) {
        const failed = cr.failedAcquires > 0 ? ` (incl. ${cr.failedAcquires} acquires that gave up)` : ''
        out.push(`| ${x.label} | contended wait p99 ≤ ${TARGETS.waitP99Ms} ms | ${fmt(cr.waitP99, 1)} ms (max ${fmt(cr.waitMax)} ms)${failed} | ${verdict(cr.waitP99 <= TARGETS.waitP99Ms)} |`)
        out.push(
          `| ${x.label} | fewest per worker ≥ ${TARGETS.fairness} × most | ${cr.fairness.toFixed(2)} (${cr.perWorkerMin}–${cr.perWorkerMax}; worst round ${cr.fairnessWorst.toFixed(2)}) | ${verdict(cr.fairness >= TARGETS.fairness)} |`,
        )
        out.push(`| ${x.label} | ≤ ${TARGETS.commandsPerAcquisition} commands sent per acquisition (round trips) | ${cr.sentPerAcq.toFixed(2)} | ${verdict(cr.sentPerAcq <= TARGETS.commandsPerAcquisition)} |`)
        out.push(
          `| ${x.label} | ≤ ${TARGETS.commandsPerAcquisition} commands executed per acquisition (\`INFO commandstats\`, counts calls inside Lua) | ${cr.executedPerAcq.toFixed(2)} | ${verdict(cr.executedPerAcq <= TARGETS.commandsPerAcquisition)} |`,
        )
      }
    }
    out.push('')
  }

  if (report.uncontended.length > 0) {
    out.push(`### Uncontended acquire + release (${u.rounds} rounds × ${u.durationMs / 1000} s after ${u.warmupMs / 1000} s warm-up; median)`)
    out.push('')
    out.push('Each worker loops acquire → release on a key of its own; all workers of a run share one connection.')
    out.push('')
    out.push('| contender | 1 worker ops/s | % of raw | 50 workers ops/s | % of raw | commands sent / executed per op |')
    out.push('| --- | ---: | ---: | ---: | ---: | ---: |')
    for (const id of ids) {
      const a = rows1.get(id)
      const b = rows50.get(id)
      if (!a && !b) continue
      const errs = (a?.errors ?? 0) + (b?.errors ?? 0)
      out.push(
        `| ${label(id)}${errs ? ` (${errs} errors)` : ''} | ${fmt(a?.opsPerSec ?? NaN)} | ${pct(a?.ofRaw ?? NaN)} | ${fmt(b?.opsPerSec ?? NaN)} | ${pct(b?.ofRaw ?? NaN)} | ${fmt(b?.sentPerOp ?? NaN, 2)} / ${fmt(b?.executedPerOp ?? NaN, 2)} |`,
      )
    }
    out.push('')
    out.push('Where the time of one op goes (medians over rounds): CPU of the client process and of redis-server per op, and the time Redis itself accounts to the commands (`INFO commandstats` usec).')
    out.push('')
    out.push('| contender | client CPU µs/op, 1 worker | client CPU µs/op, 50 workers | Redis CPU µs/op, 50 workers | Redis command µs/op, 50 workers |')
    out.push('| --- | ---: | ---: | ---: | ---: |')
    for (const id of ids) {
      const a = rows1.get(id)
      const b = rows50.get(id)
      if (!a && !b) continue
      out.push(
        `| ${label(id)} | ${fmt(a?.clientCpuUsPerOp ?? NaN, 1)} | ${fmt(b?.clientCpuUsPerOp ?? NaN, 1)} | ${fmt(b?.redisCpuUsPerOp ?? NaN, 1)} | ${fmt(b?.redisCmdUsPerOp ?? NaN, 1)} |`,
      )
    }
    out.push('')
    out.push('Executed per op at 50 workers, by command: calls × Redis µs per call (median round):')
    out.push('')
    for (const id of ids) {
      const b = rows50.get(id)
      if (b) out.push(`- ${label(id)}: ${commandList(b.byCommand)}`)
    }
    out.push('')
    const rawRange = (w: number) => {
      const rates = report.uncontended.filter((r) => r.contender === 'raw' && r.workers === w).map((r) => (r.ops / r.elapsedMs) * 1000)
      return rates.length > 0 ? `${fmt(min(rates))}–${fmt(max(rates))}` : '—'
    }
    out.push(
      `% of raw is the median over rounds of the ratio to the raw run of the same round. The raw loop itself ranged over ${rawRange(1)} ops/s (1 worker) and ${rawRange(50)} ops/s (50 workers) from round to round: on this VM throughput swings in spells of 0.5–5 s even for one process alone, hence many short interleaved rounds, and the round ranges next to each ratio above.`,
    )
    out.push('')
  }

  if (report.contended.length > 0) {
    out.push(`### Contended: ${c.workers} workers, one key, hold ${c.holdMs} ms (${c.rounds} rounds × ${c.durationMs / 1000} s after ${c.warmupMs / 1000} s warm-up)`)
    out.push('')
    out.push('| contender | acquisitions/s | wait p50 / p99 / max (ms) | release→next acquire p50 / p99 (ms) | per worker min–max | commands sent / executed per acquisition | Redis CPU µs/acq | errors |')
    out.push('| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |')
    for (const id of ids) {
      const r = crow.get(id)
      if (!r) continue
      const errs = Object.entries(r.errors).map(([k, v]) => `${v} ${k}`).join(', ') || '0'
      const overlap = r.overlaps > 0 ? ` **${r.overlaps} overlaps**` : ''
      out.push(
        `| ${label(id)}${overlap} | ${fmt(r.acqPerSec)} | ${fmt(r.waitP50, 1)} / ${fmt(r.waitP99, 1)} / ${fmt(r.waitMax, 0)} | ${fmt(r.gapP50, 2)} / ${fmt(r.gapP99, 2)} | ${r.perWorkerMin}–${r.perWorkerMax} | ${fmt(r.sentPerAcq, 2)} / ${fmt(r.executedPerAcq, 2)} | ${fmt(r.redisCpuUsPerAcq, 1)} | ${errs} |`,
      )
    }
    out.push('')
    out.push(
      'Waits and gaps: percentiles over all acquisitions of all rounds (waits include acquires that failed, at the time they gave up, and those still waiting when the window closed, at the time waited so far); rates and per-acquisition counts: median round; per worker: the round with the median min/max ratio. ' +
        '"Commands sent" are counted on the client (each is a round trip); "executed" is the `INFO commandstats` delta (all calls, PUBLISH/SUBSCRIBE included, and the calls made inside Lua scripts, the harness\'s INFO excluded).',
    )
    out.push('')
    out.push('Executed per acquisition, by command: calls × Redis µs per call (median round):')
    out.push('')
    for (const id of ids) {
      const r = crow.get(id)
      if (r) out.push(`- ${label(id)}: ${commandList(r.byCommand)}`)
    }
    out.push('')
  }

  const notes = report.contenders.flatMap((x) => Object.entries(x.notes ?? {}).map(([s, note]) => `- ${x.label}, ${s}: ${note}`))
  if (notes.length > 0) {
    out.push('Settings that differ from the defaults:')
    out.push('')
    out.push(...notes)
    out.push('')
  }
  return out.join('\n')
}
