// Turns the children's results into the markdown of the bench:lock section: medians over rounds,
// ratios against the raw limit measured in the same run, and PASS/MISS against the issue's targets.
import type { EtcdReport } from './etcd-lock.js'
import type { ContendedResult, UncontendedResult } from './lock-child.js'
import type { LockContender } from './lock-contenders.js'
import type { QuorumReport } from './lock-quorum-plan.js'
import type { ScriptCost } from './lock-script-costs.js'
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
    /** Absent in reports saved before it existed. */
    fair?: { workers: number; holdMs: number; waitMs: number; warmupMs: number; durationMs: number; rounds: number }
  }
  ttlMs: number
  contenders: ContenderInfo[]
  uncontended: UncontendedResult[]
  contended: ContendedResult[]
  /** The fair-queue scenario (absent in reports saved before it existed). */
  fair?: ContendedResult[]
  /** The etcd rows (issue 36, bench/etcd-lock.ts); absent when no etcd scenario ran. */
  etcd?: EtcdReport
  /** What each script costs Redis per call (absent in older reports). */
  scriptCosts?: ScriptCost[]
  /** Quorum mode on N servers (issue 15; absent in older reports and runs without its scenarios). */
  quorum?: QuorumReport
  quick: boolean
}

/** The targets of issue 13 ("the uncontended path at peer parity", and the fair queue). */
export const TARGETS = {
  /** Uncontended ops/s, at 1 and at 50 workers: at least this × redis-semaphore's. */
  opsOfSemaphore: 0.95,
  /** Redis CPU per acquire + release: at most this × redis-semaphore's. */
  redisCpuOfSemaphore: 1.15,
  /** Contended (20 workers, one key): wait p99 and fewest/most grants per worker. */
  waitP99Ms: 60,
  fairness: 0.9,
  /** Fair queue (18 Lockers, 400 ms holds): no acquire gives up; longest wait ≤ this × the fair queue's. */
  longestWaitOfFair: 1.5,
}

/** The contender the uncontended targets compare with. */
const PEER = 'semaphore'

export const fmt = (x: number, digits = 0) =>
  Number.isFinite(x) ? x.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits }) : '—'
export const pct = (x: number) => (Number.isFinite(x) ? `${(x * 100).toFixed(1)} %` : '—')
export const verdict = (ok: boolean) => (ok ? '**PASS**' : '**MISS**')
/** A verdict on a ratio to a contender that may not have run (a run with `--contenders` or `--scenarios`): not judged then. */
export const ratioVerdict = (ratio: number, ok: boolean, other: string) =>
  Number.isFinite(ratio) ? verdict(ok) : `not judged (${other} not in this run)`

interface UncontendedRow {
  opsPerSec: number
  /** Median over rounds of (this / raw in the same round), and the range of that ratio. */
  ofRaw: number
  ofRawMin: number
  ofRawMax: number
  /** Median over rounds of (this / redis-semaphore in the same round): ops/s, and Redis CPU per op. */
  ofPeer: number
  ofPeerMin: number
  ofPeerMax: number
  redisCpuOfPeer: number
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
  const rate = (r: UncontendedResult) => (r.ops / r.elapsedMs) * 1000
  const redisCpu = (r: UncontendedResult) => r.server.cpuUsec / Math.max(1, r.ops)
  const ratios = pairedRatios(results, mine, 'raw', workers, rate)
  const peerRatios = pairedRatios(results, mine, PEER, workers, rate)
  const per = (f: (r: UncontendedResult) => number) => median(mine.map((r) => f(r) / Math.max(1, r.ops)))
  return {
    opsPerSec: median(mine.map(rate)),
    ofRaw: median(ratios),
    ofRawMin: min(ratios),
    ofRawMax: max(ratios),
    ofPeer: median(peerRatios),
    ofPeerMin: min(peerRatios),
    ofPeerMax: max(peerRatios),
    redisCpuOfPeer: median(pairedRatios(results, mine, PEER, workers, redisCpu)),
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

/**
 * f(run) / f(other's run of the same round), for each of `mine`. Runs carry their round; runs
 * saved before they did are paired by order (the i-th with the i-th).
 */
function pairedRatios(results: UncontendedResult[], mine: UncontendedResult[], other: string, workers: number, f: (r: UncontendedResult) => number): number[] {
  const theirs = results.filter((r) => r.contender === other && r.workers === workers)
  return mine.flatMap((r, i) => {
    const t = r.round === undefined ? theirs[i] : theirs.find((x) => x.round === r.round)
    return t ? [f(r) / f(t)] : []
  })
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

export const errorList = (errors: Record<string, number>) =>
  Object.entries(errors)
    .map(([k, v]) => `${v} ${k}`)
    .join(', ') || '0'

const commandList = (list: Array<{ name: string; perOp: number; usPerCall: number }>) =>
  list.map((c) => `${c.name} ${c.perOp.toFixed(2)} × ${c.usPerCall.toFixed(1)} µs`).join(', ')

export interface ContendedRow {
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

export function summarizeContended(results: ContendedResult[], id: string): ContendedRow | undefined {
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
  const single = report.uncontended.length + report.contended.length + (report.fair?.length ?? 0) + (report.scriptCosts?.length ?? 0) > 0
  if (single) {
    out.push(
      `- Layout: a redis-server of the run's own on a free loopback port (\`--save "" --appendonly no\`); each measurement a fresh Node child process with one ioredis 6 connection (defaults) shared by its workers; lease ${report.ttlMs / 1000} s for every library. Rounds interleave the contenders and rotate their order.`,
    )
  }
  if (report.failures.length > 0) out.push(`- **Failed measurements (left out):** ${report.failures.join('; ')}`)
  out.push('')

  const ids = report.contenders.map((x) => x.id)
  const label = (id: string) => report.contenders.find((x) => x.id === id)?.label ?? id
  const rows1 = new Map(ids.map((id) => [id, summarizeUncontended(report.uncontended, id, 1)]))
  const rows50 = new Map(ids.map((id) => [id, summarizeUncontended(report.uncontended, id, 50)]))
  const crow = new Map(ids.map((id) => [id, summarizeContended(report.contended, id)]))
  const fairResults = report.fair ?? []
  const frow = new Map(ids.map((id) => [id, summarizeContended(fairResults, id)]))
  const fp = plan.fair
  const fairIdealMs = fp ? (fp.workers - 1) * fp.holdMs : Number.NaN
  const peer = label(PEER)

  // Targets first: that is what a reader of this file looks for.
  const ranSingle = (id: string) => [...report.uncontended, ...report.contended, ...fairResults].some((r) => r.contender === id)
  const judged = report.contenders.filter((x) => x.targets && ranSingle(x.id))
  if (judged.length > 0) {
    out.push('### Targets (issue 13)')
    out.push('')
    out.push('| contender | target | measured | result |')
    out.push('| --- | --- | --- | --- |')
    for (const x of judged) {
      for (const [workers, r] of [
        [1, rows1.get(x.id)],
        [50, rows50.get(x.id)],
      ] as const) {
        if (!r) continue
        const theirs = (workers === 1 ? rows1 : rows50).get(PEER)
        out.push(
          `| ${x.label} | uncontended ops/s, ${workers} worker${workers > 1 ? 's' : ''} ≥ ${TARGETS.opsOfSemaphore} × ${peer} | ${fmt(r.ofPeer, 3)} × (rounds ${fmt(r.ofPeerMin, 2)}–${fmt(r.ofPeerMax, 2)}; ${fmt(r.opsPerSec)} against ${fmt(theirs?.opsPerSec ?? NaN)} ops/s) | ${ratioVerdict(r.ofPeer, r.ofPeer >= TARGETS.opsOfSemaphore, peer)} |`,
        )
        out.push(
          `| ${x.label} | Redis CPU per acquire + release, ${workers} worker${workers > 1 ? 's' : ''} ≤ ${TARGETS.redisCpuOfSemaphore} × ${peer} | ${fmt(r.redisCpuOfPeer, 3)} × (${fmt(r.redisCpuUsPerOp, 1)} against ${fmt(theirs?.redisCpuUsPerOp ?? NaN, 1)} µs) | ${ratioVerdict(r.redisCpuOfPeer, r.redisCpuOfPeer <= TARGETS.redisCpuOfSemaphore, peer)} |`,
        )
      }
      const cr = crow.get(x.id)
      if (cr) {
        const failed = cr.failedAcquires > 0 ? ` (incl. ${cr.failedAcquires} acquires that gave up)` : ''
        out.push(`| ${x.label} | contended wait p99 ≤ ${TARGETS.waitP99Ms} ms | ${fmt(cr.waitP99, 1)} ms (max ${fmt(cr.waitMax)} ms)${failed} | ${verdict(cr.waitP99 <= TARGETS.waitP99Ms)} |`)
        out.push(
          `| ${x.label} | contended: fewest per worker ≥ ${TARGETS.fairness} × most | ${cr.fairness.toFixed(2)} (${cr.perWorkerMin}–${cr.perWorkerMax}; worst round ${cr.fairnessWorst.toFixed(2)}) | ${verdict(cr.fairness >= TARGETS.fairness)} |`,
        )
      }
      const fr = frow.get(x.id)
      if (fr) {
        out.push(`| ${x.label} | fair queue: no acquire gives up (waitMs ${fmt((fp?.waitMs ?? NaN) / 1000)} s) | ${fr.failedAcquires} gave up (${fr.rounds} rounds) | ${verdict(fr.failedAcquires === 0)} |`)
        out.push(
          `| ${x.label} | fair queue: longest wait ≤ ${TARGETS.longestWaitOfFair} × the fair queue's (${fmt(fairIdealMs)} ms) | ${fmt(fr.waitMax)} ms = ${fmt(fr.waitMax / fairIdealMs, 2)} × | ${verdict(fr.waitMax <= TARGETS.longestWaitOfFair * fairIdealMs)} |`,
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
    out.push(`| contender | 1 worker ops/s | % of raw | × ${peer} | 50 workers ops/s | % of raw | × ${peer} | commands sent / executed per op |`)
    out.push('| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |')
    for (const id of ids) {
      const a = rows1.get(id)
      const b = rows50.get(id)
      if (!a && !b) continue
      const errs = (a?.errors ?? 0) + (b?.errors ?? 0)
      out.push(
        `| ${label(id)}${errs ? ` (${errs} errors)` : ''} | ${fmt(a?.opsPerSec ?? NaN)} | ${pct(a?.ofRaw ?? NaN)} | ${fmt(a?.ofPeer ?? NaN, 3)} | ${fmt(b?.opsPerSec ?? NaN)} | ${pct(b?.ofRaw ?? NaN)} | ${fmt(b?.ofPeer ?? NaN, 3)} | ${fmt(b?.sentPerOp ?? NaN, 2)} / ${fmt(b?.executedPerOp ?? NaN, 2)} |`,
      )
    }
    out.push('')
    out.push('Where the time of one op goes (medians over rounds): CPU of the client process and of redis-server per op, and the time Redis itself accounts to the commands (`INFO commandstats` usec).')
    out.push('')
    out.push('| contender | client CPU µs/op, 1 worker | client CPU µs/op, 50 workers | Redis CPU µs/op, 1 worker | Redis CPU µs/op, 50 workers | Redis command µs/op, 50 workers |')
    out.push('| --- | ---: | ---: | ---: | ---: | ---: |')
    for (const id of ids) {
      const a = rows1.get(id)
      const b = rows50.get(id)
      if (!a && !b) continue
      out.push(
        `| ${label(id)} | ${fmt(a?.clientCpuUsPerOp ?? NaN, 1)} | ${fmt(b?.clientCpuUsPerOp ?? NaN, 1)} | ${fmt(a?.redisCpuUsPerOp ?? NaN, 1)} | ${fmt(b?.redisCpuUsPerOp ?? NaN, 1)} | ${fmt(b?.redisCmdUsPerOp ?? NaN, 1)} |`,
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
      `% of raw and × ${peer} are medians over rounds of the ratio to the run of the same round (so is the Redis CPU ratio in the targets). The raw loop itself ranged over ${rawRange(1)} ops/s (1 worker) and ${rawRange(50)} ops/s (50 workers) from round to round: on this VM throughput swings in spells of 0.5–5 s even for one process alone, hence many short interleaved rounds, and the round ranges next to each ratio above.`,
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
      const errs = errorList(r.errors)
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

  if (fairResults.length > 0 && fp) {
    out.push(`### Fair queue: ${fp.workers} processes, one key, hold ${fp.holdMs} ms, waitMs ${fp.waitMs / 1000} s (${fp.rounds} rounds × ${fp.durationMs / 1000} s, no warm-up)`)
    out.push('')
    out.push(
      `Each worker its own connection (and Locker), like ${fp.workers} processes, looping acquire → hold ${fp.holdMs} ms → release. Served first come, first served, the one at the back of the queue waits for ${fp.workers - 1} holds: ${fmt(fairIdealMs)} ms.`,
    )
    out.push('')
    out.push('| contender | grants | gave up | wait p50 / p99 / max (ms) | max ÷ fair | per worker min–max (median round) | round trips / executed per grant | errors |')
    out.push('| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |')
    for (const id of ids) {
      const r = frow.get(id)
      if (!r) continue
      const errs = errorList(r.errors)
      const grants = fairResults.filter((x) => x.contender === id).reduce((a, x) => a + x.acquisitions, 0)
      out.push(
        `| ${label(id)} | ${grants} | ${r.failedAcquires} | ${fmt(r.waitP50)} / ${fmt(r.waitP99)} / ${fmt(r.waitMax)} | ${fmt(r.waitMax / fairIdealMs, 2)} | ${r.perWorkerMin}–${r.perWorkerMax} | ${fmt(r.sentPerAcq, 2)} / ${fmt(r.executedPerAcq, 2)} | ${errs} |`,
      )
    }
    out.push('')
    out.push('Waits as in the contended table: granted, failed (at the time they gave up) and still-waiting acquires alike, over all rounds.')
    out.push('')
  }

  const costs = report.scriptCosts ?? []
  if (costs.length > 0) {
    out.push('### What each script costs Redis (`INFO commandstats`, µs per call)')
    out.push('')
    out.push(
      'Measured after the runs, on the same redis-server: each case alone, 20,000 calls, 50 in flight, keys set up beforehand; µs per call of the script (`evalsha`, the calls it makes inside included) or of the bare command. The uncontended acquire + release is the first "acquire (lean): granted" plus "release (lean)"; the bare pair is what redis-semaphore and the raw loop run.',
    )
    out.push('')
    out.push('| case | µs per call | calls inside, per call |')
    out.push('| --- | ---: | --- |')
    for (const cost of costs) {
      const inner = Object.entries(cost.inner).map(([name, n]) => `${name} ${fmt(n, 2)}`).join(', ') || '—'
      out.push(`| ${cost.label} | ${fmt(cost.usPerCall, 2)} | ${inner} |`)
    }
    out.push('')
  }

  // Only the notes of scenarios the contender ran in this report (the quorum part has its own).
  const ran = (id: string, scenario: string) =>
    (scenario === 'uncontended' ? report.uncontended : scenario === 'contended' ? report.contended : scenario === 'fair' ? fairResults : []).some((r) => r.contender === id)
  const notes = report.contenders.flatMap((x) =>
    Object.entries(x.notes ?? {})
      .filter(([scenario]) => ran(x.id, scenario))
      .map(([scenario, note]) => `- ${x.label}, ${scenario}: ${note}`),
  )
  if (notes.length > 0) {
    out.push('Settings that differ from the defaults:')
    out.push('')
    out.push(...notes)
    out.push('')
  }
  return out.join('\n')
}
