// The "Quorum mode" part of the bench:lock section: ours over N redis-servers against the Node
// anchors (redis-semaphore's RedlockMutex, redlock) measured in the same run, on the same
// servers, and PASS/MISS against issue 15's targets.
import type { UncontendedResult } from './lock-child.js'
import { STUCK_MS, type DegradedResult, type DegradedWindow, type MajorityDownResult } from './lock-quorum-faults.js'
import { errorList, fmt, summarizeContended, verdict, type ContenderInfo, type Report } from './lock-report.js'
import type { QuorumReport } from './lock-quorum-plan.js'
import { max, median, min, quantile } from './support/stats.js'

/** Issue 15's targets for quorum mode. */
export const QUORUM_TARGETS = {
  /** Uncontended ops/s at N = 3 and 5, 1 and 50 workers: at least this × the best anchor's. */
  opsOfBestAnchor: 0.9,
  /** Requests sent per acquire + release: at most this × N (the anchors send 2N). */
  requestsPerNode: 3,
  /** Contended, N = 5, 20 workers, one key, 1 ms holds: wait p99, and fewest/most per worker. */
  waitP99Ms: 100,
  fairness: 0.7,
  /** 2 of 5 down: acquire p99 at most this × the all-up figure, and RSS growth at most this. */
  degradedP99OfAllUp: 2,
  rssGrowthMb: 20,
  /** 3 of 5 down: every acquire fails with this class within waitMs + this. */
  failError: 'LockUnavailableError',
  failSlackMs: 100,
}

/** JSON has no NaN: a number saved as NaN comes back null. */
const num = (x: number | null | undefined): number => (typeof x === 'number' ? x : Number.NaN)
const s = (n: number) => (n === 1 ? '' : 's')
const rate = (r: UncontendedResult) => (r.ops / r.elapsedMs) * 1000

interface UncontendedRow {
  opsPerSec: number
  /** Median over rounds of (this / the best anchor of the same round), and the range. */
  ofBest: number
  ofBestMin: number
  ofBestMax: number
  /** The anchor with the most ops/s (median over rounds). */
  bestAnchor: string | undefined
  bestAnchorOpsPerSec: number
  sentPerOp: number
  executedPerOp: number
  clientCpuUsPerOp: number
  redisCpuUsPerOp: number
  errors: Record<string, number>
  rounds: number
}

function summarizeUncontended(results: UncontendedResult[], anchors: readonly string[], id: string, nodes: number, workers: number): UncontendedRow | undefined {
  const at = (c: string) => results.filter((r) => r.contender === c && r.nodes === nodes && r.workers === workers)
  const mine = at(id)
  if (mine.length === 0) return undefined
  const anchorRuns = anchors.map((a) => ({ id: a, runs: at(a) })).filter((a) => a.runs.length > 0)
  const best = [...anchorRuns].sort((a, b) => median(b.runs.map(rate)) - median(a.runs.map(rate)))[0]
  // Each round against the best anchor of that round: drift on a shared machine hits both alike.
  const ratios = mine.flatMap((r) => {
    const theirs = anchorRuns.flatMap((a) => a.runs.filter((x) => x.round === r.round).map(rate))
    return theirs.length > 0 ? [rate(r) / max(theirs)] : []
  })
  const per = (f: (r: UncontendedResult) => number) => median(mine.map((r) => f(r) / Math.max(1, r.ops)))
  return {
    opsPerSec: median(mine.map(rate)),
    ofBest: median(ratios),
    ofBestMin: min(ratios),
    ofBestMax: max(ratios),
    bestAnchor: best?.id,
    bestAnchorOpsPerSec: best ? median(best.runs.map(rate)) : Number.NaN,
    sentPerOp: per((r) => r.sentTotal),
    executedPerOp: per((r) => r.server.totalCalls),
    clientCpuUsPerOp: per((r) => r.clientCpuUsec),
    redisCpuUsPerOp: per((r) => r.server.cpuUsec),
    errors: sumErrors(mine),
    rounds: mine.length,
  }
}

function sumErrors(runs: ReadonlyArray<{ errors: Record<string, number> }>): Record<string, number> {
  const sum: Record<string, number> = {}
  for (const r of runs) for (const [k, v] of Object.entries(r.errors)) sum[k] = (sum[k] ?? 0) + v
  return sum
}

/** A degraded run that did not finish, or stopped early: said next to its figures. */
function degradedCaveat(r: DegradedResult): string {
  if (r.unfinished) return ` — **${r.unfinished.why}**; figures from its last progress report, ${fmt(r.degraded.elapsedMs / 1000, 1)} s after the kill`
  if (r.stoppedEarly) return ` — **stopped early: ${r.stoppedEarly}**`
  return ''
}

const windowCell = (w: DegradedWindow) => `${fmt(num(w.acquireMs.p50), 1)} / ${fmt(num(w.acquireMs.p99), 1)} / ${fmt(num(w.acquireMs.max))}`
const opsPerSec = (w: DegradedWindow) => (w.elapsedMs > 0 ? (w.ops / w.elapsedMs) * 1000 : Number.NaN)

interface DownSummary {
  tries: number
  rejected: number
  granted: number
  unsettled: number
  /** Time to fail over the rejected tries, ms. */
  p50: number
  max: number
  /** Error classes of the rejected tries, with counts. */
  classes: Record<string, number>
  /** Every rejected try failed with `want` within `limitMs`. */
  allTyped: boolean
}

function summarizeDown(r: MajorityDownResult, want: string, limitMs: number): DownSummary {
  const rejected = r.tries.filter((t) => t.outcome === 'rejected')
  const classes: Record<string, number> = {}
  for (const t of rejected) classes[t.error ?? '?'] = (classes[t.error ?? '?'] ?? 0) + 1
  const ms = rejected.map((t) => t.ms)
  return {
    tries: r.tries.length,
    rejected: rejected.length,
    granted: r.tries.filter((t) => t.outcome === 'granted').length,
    unsettled: r.tries.filter((t) => t.outcome === 'unsettled').length,
    p50: quantile(ms, 0.5),
    max: max(ms),
    classes,
    allTyped: r.tries.length > 0 && r.tries.every((t) => t.outcome === 'rejected' && t.error === want && t.ms <= limitMs),
  }
}

function downOutcome(d: DownSummary, r: MajorityDownResult): string {
  const parts: string[] = []
  if (d.rejected > 0) parts.push(`${d.rejected} failed (${Object.entries(d.classes).map(([k, v]) => `${v} ${k}`).join(', ')})`)
  if (d.unsettled > 0) parts.push(`**${d.unsettled} did not settle in ${fmt(r.tryDeadlineMs / 1000)} s**`)
  if (d.granted > 0) parts.push(`**${d.granted} granted**`)
  return `${parts.join(', ') || 'none tried'} of ${d.tries} tried${d.tries < r.planned ? ` (${r.planned} planned)` : ''}`
}

/** The quorum part of the section, or nothing when the report has no quorum results. */
export function renderQuorumReport(report: Report): string {
  const q = report.quorum
  if (!q) return ''
  const p = q.plan
  const out: string[] = []
  const label = (id: string) => report.contenders.find((x) => x.id === id)?.label ?? id
  const ran = (id: string) => [...q.uncontended, ...q.contended, ...q.degraded, ...q.majorityDown].some((r) => r.contender === id)
  const contenders = report.contenders.filter((x) => ran(x.id))
  const ours = contenders.filter((x) => x.targets)
  const anchors = contenders.filter((x) => !x.targets)
  const anchorIds = anchors.map((x) => x.id)
  const T = QUORUM_TARGETS
  const quorumFailures = report.failures.filter((f) => / N=\d+/.test(f) || f.includes(' quorum-'))

  out.push('### Quorum mode (issue 15): ours over N redis-servers against redis-semaphore and redlock')
  out.push('')
  out.push(
    `- Layout: N redis-servers of the run's own, each on a free loopback port (\`--save "" --appendonly no\`); killed ones are started again, empty, and the next measurement starts once they have been up for a lease (a node restarted without persistence sits out a TTL: Redlock's rule, which ours enforces by default). Each measurement a fresh Node child process with one ioredis 6 connection per server (default options: offline queue on, 20 retries per request, no command timeout; an \`'error'\` listener and nothing else) shared by its workers; lease ${report.ttlMs / 1000} s for every library. ${anchors.map((x) => x.label).join(' and ')} ${anchors.length === 1 ? 'is' : 'are'} the anchor${s(anchors.length)}: none of them mints a fencing token; ours does, and makes it known to a majority before it returns the lock.`,
  )
  out.push('- "Requests sent" are the commands the contender\'s connections sent, counted on the client (each is a round trip to one server; one queued while its server is down counts too); "executed" is the sum of the servers\' `INFO commandstats` deltas (calls inside Lua included).')
  if (quorumFailures.length > 0) out.push(`- **Failed measurements (left out):** ${quorumFailures.join('; ')}`)
  out.push('')

  const uRows = (id: string, nodes: number, workers: number) => summarizeUncontended(q.uncontended, anchorIds, id, nodes, workers)
  const cRows = new Map(contenders.map((x) => [x.id, summarizeContended(q.contended, x.id)]))
  const dp = p.degraded
  const mp = p.majorityDown
  const degradedS = fmt(dp.windowMs / 1000)
  const failLimitMs = mp.waitMs + T.failSlackMs

  // --- targets ---
  const targetRows: string[] = []
  for (const x of ours) {
    for (const nodes of p.uncontended.nodes) {
      const sent: string[] = []
      let worstSent = Number.NEGATIVE_INFINITY
      for (const workers of p.uncontended.workers) {
        const r = uRows(x.id, nodes, workers)
        if (!r) continue
        targetRows.push(
          `| ${x.label} | uncontended ops/s, N=${nodes}, ${workers} worker${s(workers)} ≥ ${T.opsOfBestAnchor} × the best anchor | ${fmt(r.ofBest, 3)} × (rounds ${fmt(r.ofBestMin, 2)}–${fmt(r.ofBestMax, 2)}; ${fmt(r.opsPerSec)} against ${fmt(r.bestAnchorOpsPerSec)} ops/s of ${r.bestAnchor ? label(r.bestAnchor) : '—'}) | ${verdict(r.ofBest >= T.opsOfBestAnchor)} |`,
        )
        sent.push(`${fmt(r.sentPerOp, 2)} (${workers} worker${s(workers)})`)
        worstSent = Math.max(worstSent, r.sentPerOp)
      }
      if (sent.length > 0) {
        const limit = T.requestsPerNode * nodes
        targetRows.push(`| ${x.label} | requests sent per acquire + release, N=${nodes} ≤ ${T.requestsPerNode}N = ${limit} | ${sent.join(', ')} | ${verdict(worstSent <= limit)} |`)
      }
    }
    const cr = cRows.get(x.id)
    if (cr) {
      const failed = cr.failedAcquires > 0 ? ` (incl. ${cr.failedAcquires} acquires that gave up)` : ''
      targetRows.push(`| ${x.label} | contended (N=${p.contended.nodes}) wait p99 ≤ ${T.waitP99Ms} ms | ${fmt(cr.waitP99, 1)} ms (max ${fmt(cr.waitMax)} ms)${failed} | ${verdict(cr.waitP99 <= T.waitP99Ms)} |`)
      targetRows.push(
        `| ${x.label} | contended (N=${p.contended.nodes}): fewest per worker ≥ ${T.fairness} × most | ${cr.fairness.toFixed(2)} (${cr.perWorkerMin}–${cr.perWorkerMax}; worst round ${cr.fairnessWorst.toFixed(2)}) | ${verdict(cr.fairness >= T.fairness)} |`,
      )
    }
    for (const r of q.degraded.filter((d) => d.contender === x.id)) {
      const d = r.degraded
      const a = r.allUp
      const whole = !r.unfinished && !r.stoppedEarly
      const stuck = d.stuckAcquires + d.stuckReleases
      const slowest = num(d.acquireMs.max)
      const works = whole && d.ops > 0 && d.failed === 0 && stuck === 0 && slowest <= STUCK_MS && Object.keys(d.errors).length === 0
      targetRows.push(
        `| ${x.label} | ${r.killed} of ${r.nodes} down: keeps working (no acquire or release fails; none takes > ${fmt(STUCK_MS / 1000)} s) | ${fmt(d.ops)} acquire + release in ${fmt(d.elapsedMs / 1000, 1)} s (${fmt(opsPerSec(d))} ops/s; all up ${fmt(opsPerSec(a))}); ${d.failed} failed; slowest acquire ${fmt(slowest)} ms; ${stuck} waiting > ${fmt(STUCK_MS / 1000)} s at the end; errors ${errorList(d.errors)}${degradedCaveat(r)} | ${verdict(works)} |`,
      )
      const ratio = num(d.acquireMs.p99) / num(a.acquireMs.p99)
      targetRows.push(
        `| ${x.label} | ${r.killed} of ${r.nodes} down: acquire p99 ≤ ${T.degradedP99OfAllUp} × all up | ${fmt(num(d.acquireMs.p99), 2)} against ${fmt(num(a.acquireMs.p99), 2)} ms = ${fmt(ratio, 2)} × | ${verdict(whole && ratio <= T.degradedP99OfAllUp)} |`,
      )
      const growth = r.rssMb.end - r.rssMb.atKill
      targetRows.push(
        `| ${x.label} | ${r.killed} of ${r.nodes} down: RSS growth over ${degradedS} s ≤ ${T.rssGrowthMb} MB | ${growth >= 0 ? '+' : ''}${fmt(growth, 1)} MB (${fmt(r.rssMb.atKill)} → ${fmt(r.rssMb.end)} MB; peak +${fmt(r.rssMb.peak - r.rssMb.atKill, 1)} MB) | ${verdict(whole && growth <= T.rssGrowthMb)} |`,
      )
    }
    for (const r of q.majorityDown.filter((m) => m.contender === x.id)) {
      const d = summarizeDown(r, T.failError, failLimitMs)
      targetRows.push(
        `| ${x.label} | ${r.killed} of ${r.nodes} down: every acquire fails with ${T.failError} within waitMs + ${T.failSlackMs} ms = ${fmt(failLimitMs)} ms | ${downOutcome(d, r)}; time to fail p50 ${fmt(d.p50)} / max ${fmt(d.max)} ms${r.unfinished ? ` — **${r.unfinished.why}**` : ''} | ${verdict(!r.unfinished && d.allTyped)} |`,
      )
    }
  }
  if (targetRows.length > 0) {
    out.push('#### Targets (issue 15)')
    out.push('')
    out.push('| contender | target | measured | result |')
    out.push('| --- | --- | --- | --- |')
    out.push(...targetRows)
    out.push('')
  }

  // --- uncontended ---
  if (q.uncontended.length > 0) {
    const u = p.uncontended
    out.push(`#### Uncontended acquire + release, N = ${u.nodes.join(' and ')} (${u.rounds} round${s(u.rounds)} × ${u.durationMs / 1000} s after ${u.warmupMs / 1000} s warm-up; median)`)
    out.push('')
    out.push(
      'Each worker loops acquire → release on a key of its own; all workers of a run share one instance (one connection per server). × best anchor: the median over rounds of the ratio to the faster anchor of the same round. Errors: failed acquires and releases in the window, by class.',
    )
    out.push('')
    const ws = u.workers
    out.push(
      `| contender | N | ${ws.map((w) => `${w} worker${s(w)} ops/s | × best anchor`).join(' | ')} | requests sent / executed per op (${ws.map((w) => `${w} w`).join(', ')}) | client CPU µs/op (${ws.map((w) => `${w} w`).join(', ')}) | Redis CPU µs/op, all servers (${ws.map((w) => `${w} w`).join(', ')}) |`,
    )
    out.push(`| --- | ---: | ${ws.map(() => '---: | ---:').join(' | ')} | ---: | ---: | ---: |`)
    for (const nodes of u.nodes) {
      for (const x of contenders) {
        const rows = ws.map((w) => uRows(x.id, nodes, w))
        if (rows.every((r) => r === undefined)) continue
        const errs = sumErrors(rows.flatMap((r) => (r ? [r] : [])))
        const cells = rows.map((r) => `${fmt(r?.opsPerSec ?? Number.NaN)} | ${x.targets ? fmt(r?.ofBest ?? Number.NaN, 3) : '—'}`)
        out.push(
          `| ${x.label}${Object.keys(errs).length > 0 ? ` (errors: ${errorList(errs)})` : ''} | ${nodes} | ${cells.join(' | ')} | ${rows.map((r) => `${fmt(r?.sentPerOp ?? Number.NaN, 2)} / ${fmt(r?.executedPerOp ?? Number.NaN, 2)}`).join(', ')} | ${rows.map((r) => fmt(r?.clientCpuUsPerOp ?? Number.NaN, 1)).join(', ')} | ${rows.map((r) => fmt(r?.redisCpuUsPerOp ?? Number.NaN, 1)).join(', ')} |`,
        )
      }
    }
    out.push('')
  }

  // --- contended ---
  if (q.contended.length > 0) {
    const c = p.contended
    out.push(`#### Contended, N = ${c.nodes}: ${c.workers} workers, one key, hold ${c.holdMs} ms (${c.rounds} round${s(c.rounds)} × ${c.durationMs / 1000} s after ${c.warmupMs / 1000} s warm-up)`)
    out.push('')
    out.push('| contender | acquisitions/s | wait p50 / p99 / max (ms) | release→next acquire p50 / p99 (ms) | per worker min–max | requests sent / executed per acquisition | Redis CPU µs/acq, all servers | errors |')
    out.push('| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |')
    for (const x of contenders) {
      const r = cRows.get(x.id)
      if (!r) continue
      const overlap = r.overlaps > 0 ? ` **${r.overlaps} overlaps**` : ''
      out.push(
        `| ${x.label}${overlap} | ${fmt(r.acqPerSec)} | ${fmt(r.waitP50, 1)} / ${fmt(r.waitP99, 1)} / ${fmt(r.waitMax)} | ${fmt(r.gapP50, 2)} / ${fmt(r.gapP99, 2)} | ${r.perWorkerMin}–${r.perWorkerMax} | ${fmt(r.sentPerAcq, 2)} / ${fmt(r.executedPerAcq, 2)} | ${fmt(r.redisCpuUsPerAcq, 1)} | ${errorList(r.errors)} |`,
      )
    }
    out.push('')
    out.push('Waits, gaps and per worker as in the single-server contended table (acquires that gave up and those still waiting at the window\'s end count as waits).')
    out.push('')
  }

  // --- 2 of 5 down ---
  if (q.degraded.length > 0) {
    out.push(`#### ${dp.kill} of ${dp.nodes} servers killed under load`)
    out.push('')
    out.push(
      `${dp.workers} workers loop acquire → release, each on a key of its own: ${dp.allUpMs / 1000} s with every server up (after ${dp.warmupMs / 1000} s warm-up), then ${dp.kill} servers are SIGKILLed and stay down for ${degradedS} s. Acquire latency counts granted, failed and still-waiting acquires (at the time waited so far); memory is the child process's RSS (the whole process: the library, ioredis's queues, the harness). A run that does not end in time is killed and reported from its last progress report; the window also ends early if RSS grows by more than ${fmt(dp.rssCapMb)} MB.`,
    )
    out.push('')
    out.push(
      `| contender | ops/s all up → ${dp.kill} down | acquire p50 / p99 / max, all up (ms) | acquire p50 / p99 / max, ${dp.kill} down (ms) | ${dp.kill} down: granted / failed / waiting > ${fmt(STUCK_MS / 1000)} s at the end | RSS at the kill → end (peak), MB | offline queue at the end | requests sent per op, ${dp.kill} down | errors, ${dp.kill} down |`,
    )
    out.push('| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |')
    for (const r of q.degraded) {
      const d = r.degraded
      const waiting = `${d.stuckAcquires}${d.stuckReleases > 0 ? ` + ${d.stuckReleases} releases` : ''}`
      out.push(
        `| ${label(r.contender)}${degradedCaveat(r)} | ${fmt(opsPerSec(r.allUp))} → ${fmt(opsPerSec(d))} | ${windowCell(r.allUp)} | ${windowCell(d)} | ${fmt(d.granted)} / ${fmt(d.failed)} / ${waiting} | ${fmt(r.rssMb.atKill)} → ${fmt(r.rssMb.end)} (${fmt(r.rssMb.peak)}) | ${fmt(r.offlineQueue)} | ${d.ops > 0 ? fmt(d.sentTotal / d.ops, 1) : `${fmt(d.sentTotal)} sent, no op`} | ${errorList(d.errors)} |`,
      )
    }
    out.push('')
    const trails = q.degraded.filter((r) => r.rssTrailMb.length > 0)
    if (trails.length > 0) {
      out.push('RSS after the kill, MB, every 10 s (every second in the saved JSON):')
      out.push('')
      for (const r of trails) out.push(`- ${label(r.contender)}: ${r.rssTrailMb.filter((_, i) => (i + 1) % 10 === 0 || i === 0).map((m) => fmt(m)).join(', ')}`)
      out.push('')
    }
  }

  // --- 3 of 5 down ---
  if (q.majorityDown.length > 0) {
    out.push(`#### ${mp.kill} of ${mp.nodes} servers killed: acquires that cannot succeed`)
    out.push('')
    out.push(
      `After ${mp.warmupMs / 1000} s of acquire → release with every server up, ${mp.kill} servers are SIGKILLed and stay down; then up to ${mp.tries} acquires, one after another, each on a fresh key, with waitMs ${fmt(mp.waitMs)} ms where the library has a wait (see the notes). A try unsettled after ${fmt(mp.tryDeadlineMs / 1000)} s is given up on (and counted so; \`--down-try-seconds\` sets this), and no try starts after ${fmt(mp.windowMs / 1000)} s. With ioredis 6's default reconnection backoff (doubling from 50 ms to 5 s) a command queued for a dead server is failed only when its offline queue is flushed, after 20 retries: about 78 s after the kill, then about every 107 s; a library that waits for every server waits that long.`,
    )
    out.push('')
    out.push('| contender | outcome | time to fail p50 / max (ms) | RSS at the kill → end, MB | offline queue at the end | first error |')
    out.push('| --- | --- | ---: | ---: | ---: | --- |')
    for (const r of q.majorityDown) {
      const d = summarizeDown(r, T.failError, failLimitMs)
      const first = r.tries.find((t) => t.outcome === 'rejected')
      const firstError = first ? `${first.error}: ${(first.message ?? '').replaceAll('|', '\\|').slice(0, 140)}` : '—'
      out.push(
        `| ${label(r.contender)}${r.unfinished ? ` — **${r.unfinished.why}**` : ''} | ${downOutcome(d, r)} | ${fmt(d.p50)} / ${fmt(d.max)} | ${fmt(r.rssMb.atKill)} → ${fmt(r.rssMb.end)} | ${fmt(r.offlineQueue)} | ${firstError} |`,
      )
    }
    out.push('')
  }

  const notes = contenders.flatMap((x: ContenderInfo) =>
    Object.entries(x.notes ?? {})
      .filter(([scenario]) => ranIn(q, x.id, scenario))
      .map(([scenario, note]) => `- ${x.label}, ${scenario}: ${note}`),
  )
  if (notes.length > 0) {
    out.push('Settings that differ from the defaults (everything else at each library\'s defaults; ours: waitMs 10 s, commandTimeoutMs 2 s):')
    out.push('')
    out.push(...notes)
    out.push('')
  }
  return out.join('\n')
}

function ranIn(q: QuorumReport, id: string, scenario: string): boolean {
  const runs: Record<string, ReadonlyArray<{ contender: string }>> = {
    'quorum-uncontended': q.uncontended,
    'quorum-contended': q.contended,
    'quorum-degraded': q.degraded,
    'quorum-majority-down': q.majorityDown,
  }
  return (runs[scenario] ?? []).some((r) => r.contender === id)
}
