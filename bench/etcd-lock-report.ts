// Renders the etcd rows of `npm run bench:lock` (bench/etcd-lock.ts) as markdown: ours against the
// etcd3 package's Lock, as ratios, with the etcd requests per acquire+release, and ours on etcd
// against ours on Redis where the same run measured Redis too.
import type { ContendedResult, UncontendedResult } from './lock-child.js'
import { total, type EtcdContendedResult, type EtcdElectionResult, type EtcdReport, type RequestCounts } from './etcd-lock.js'
import { median, quantile } from './support/stats.js'

/** What the rest of the run measured on Redis (our Locker's rows), for the etcd/Redis ratio. */
export interface RedisRows {
  uncontended: readonly UncontendedResult[]
  contended: readonly ContendedResult[]
}

const fmt = (x: number, digits = 0) => (Number.isFinite(x) ? x.toFixed(digits) : '—')
const ratio = (a: number, b: number) => (b > 0 && Number.isFinite(a) ? `${(a / b).toFixed(2)}×` : '—')

/** Requests per operation, summed and by method (methods below 0.01 per op left out). */
function perOp(list: readonly RequestCounts[], ops: number): { total: number; by: string } {
  const sum: RequestCounts = {}
  for (const counts of list) for (const [m, n] of Object.entries(counts)) sum[m] = (sum[m] ?? 0) + n
  const by = Object.entries(sum)
    .map(([m, n]) => [m, n / Math.max(1, ops)] as const)
    .filter(([, x]) => x >= 0.01)
    .sort((a, b) => b[1] - a[1])
    .map(([m, x]) => `${m} ${x.toFixed(2)}`)
    .join(', ')
  return { total: total(sum) / Math.max(1, ops), by }
}

const opsPerSec = (r: { ops: number; elapsedMs: number }) => (r.ops / r.elapsedMs) * 1000
const acqPerSec = (r: { acquisitions: number; elapsedMs: number }) => (r.acquisitions / r.elapsedMs) * 1000

export function renderEtcdReport(etcd: EtcdReport, redis: RedisRows | undefined): string {
  const out: string[] = []
  const p = etcd.plan
  out.push(
    `etcd ${etcd.etcdVersion} spawned by the run (${p.members.join(' and ')} member(s) on loopback), **members' data directories on tmpfs (${p.dataDir})**: no disk fsync per Raft commit, which a real deployment pays — benchmarks only. Leases of ${p.ttlSeconds} s for both. Every measurement in the harness's own process, on a fresh \`etcd3\` client (one gRPC channel), contenders in rotated order per round; medians over rounds. Requests are what the members counted (\`grpc_server_msg_received_total\` deltas from /metrics, summed over members: every unary call and every stream message), per acquire+release — firm under load, unlike the times.`,
    '',
    `Uncontended: ${p.uncontended.rounds} round(s) of ${p.uncontended.durationMs / 1000} s (after ${p.uncontended.warmupMs} ms warm-up), each worker its own key; ours one Locker shared by the workers. Contended: ${p.contended.workers} workers on one key, ${p.contended.holdMs} ms holds, ${p.contended.rounds} round(s) of ${p.contended.durationMs / 1000} s; ours one Locker per worker (its own lease, queued by revision, watching its predecessor). The anchor does not queue: \`lock.acquire()\` on a held key revokes its lease and throws \`EtcdLockFailedError\`, so its workers try again after ${p.contended.anchorRetryMs} ms (a poll).`,
    '',
  )
  for (const members of p.members) {
    const un = etcd.uncontended.filter((r) => r.members === members)
    if (un.length > 0) {
      out.push(`**Uncontended, ${members} member(s)** (acquire+release per second)`, '')
      out.push('| workers | ours ops/s | etcd3 Lock ops/s | ours/anchor | ours requests/op | etcd3 Lock requests/op |', '|---|---|---|---|---|---|')
      for (const w of p.uncontended.workers) {
        const rows = (id: string) => un.filter((r) => r.workers === w && r.contender === id)
        const ours = rows('ours')
        const anchor = rows('etcd3-lock')
        const o = median(ours.map(opsPerSec))
        const a = median(anchor.map(opsPerSec))
        const ro = perOp(ours.map((r) => r.requests), sumOf(ours, 'ops'))
        const ra = perOp(anchor.map((r) => r.requests), sumOf(anchor, 'ops'))
        out.push(`| ${w} | ${fmt(o)} | ${fmt(a)} | ${ratio(o, a)} | ${fmt(ro.total, 2)} (${ro.by}) | ${fmt(ra.total, 2)} (${ra.by}) |`)
      }
      out.push('')
    }
    const co = etcd.contended.filter((r) => r.members === members)
    if (co.length > 0) {
      out.push(`**Contended, ${members} member(s)** (${p.contended.workers} workers, one key)`, '')
      out.push('| contender | grants/s | wait p50 ms | wait p99 ms | fewest/most grants per worker | overlaps | failed tries per grant | requests per grant |', '|---|---|---|---|---|---|---|---|')
      const line = (label: string, rows: EtcdContendedResult[]) => {
        const req = perOp(rows.map((r) => r.requests), sumOf(rows, 'acquisitions'))
        out.push(
          `| ${label} | ${fmt(median(rows.map(acqPerSec)))} | ${fmt(median(rows.map((r) => r.waitP50Ms)), 1)} | ${fmt(median(rows.map((r) => r.waitP99Ms)), 1)} | ${rows.map((r) => `${r.fewest}/${r.most}`).join(', ')} | ${sumOf(rows, 'overlaps')} | ${fmt(sumOf(rows, 'retries') / Math.max(1, sumOf(rows, 'acquisitions')), 2)} | ${fmt(req.total, 2)} (${req.by}) |`,
        )
        return { p99: median(rows.map((r) => r.waitP99Ms)), rate: median(rows.map(acqPerSec)), req: req.total }
      }
      const o = line('ours', co.filter((r) => r.contender === 'ours'))
      const a = line('etcd3 Lock (polls)', co.filter((r) => r.contender === 'etcd3-lock'))
      out.push('', `Ours/anchor: grants/s ${ratio(o.rate, a.rate)}, wait p99 ${ratio(o.p99, a.p99)} (below 1 is better), requests per grant ${ratio(o.req, a.req)}.`, '')
    }
  }
  const el = etcd.election ?? []
  if (el.length > 0) {
    const e = p.election
    out.push(
      `**Leader handovers** (\`lead()\` against etcd3's \`Election\`): ${e.candidates} candidates campaign for one election; the leader holds its term ${e.holdMs} ms, resigns (ours \`leadership.stop()\`, etcd3 \`campaign.resign()\`) and campaigns again at the back of the line; ${e.rounds} round(s) of ${e.durationMs / 1000} s. A handover is the time from the resignation call to the next leader's \`elected\`. Ours: one Locker per candidate (its own lease, kept across terms), a new \`lead()\` per campaign; etcd3: a new \`campaign()\` per campaign (a lease of its own each time, revoked by \`resign()\`). Overlaps: an \`elected\` while another candidate still led; out of order: a term not above the one before (ours the term, etcd3 the campaign key's revision).`,
      '',
    )
    for (const members of p.members) {
      const rows = el.filter((r) => r.members === members)
      if (rows.length === 0) continue
      out.push(`**Handovers, ${members} member(s)**`, '')
      out.push('| contender | terms/s | handover p50 ms | handover p99 ms | fewest/most terms per candidate | overlaps | out of order | requests per term |', '|---|---|---|---|---|---|---|---|')
      const line = (label: string, list: EtcdElectionResult[]) => {
        const req = perOp(list.map((r) => r.requests), sumOf(list, 'terms'))
        const rate = median(list.map((r) => (r.terms / r.elapsedMs) * 1000))
        const p99 = median(list.map((r) => r.handoverP99Ms))
        out.push(
          `| ${label} | ${fmt(rate)} | ${fmt(median(list.map((r) => r.handoverP50Ms)), 1)} | ${fmt(p99, 1)} | ${list.map((r) => `${r.fewest}/${r.most}`).join(', ')} | ${sumOf(list, 'overlaps')} | ${sumOf(list, 'termsOutOfOrder')} | ${fmt(req.total, 2)} (${req.by}) |`,
        )
        return { rate, p99, req: req.total }
      }
      const o = line('ours `lead()`', rows.filter((r) => r.contender === 'ours'))
      const a = line('etcd3 `Election`', rows.filter((r) => r.contender === 'etcd3-election'))
      out.push('', `Ours/anchor: terms/s ${ratio(o.rate, a.rate)}, handover p99 ${ratio(o.p99, a.p99)} (below 1 is better), requests per term ${ratio(o.req, a.req)}.`, '')
    }
  }
  if (redis) {
    const rows: string[] = []
    for (const w of p.uncontended.workers) {
      const r = median(redis.uncontended.filter((x) => x.contender === 'ours' && x.workers === w && (x.nodes ?? 1) === 1).map(opsPerSec))
      const e = median(etcd.uncontended.filter((x) => x.contender === 'ours' && x.workers === w && x.members === 1).map(opsPerSec))
      if (Number.isFinite(r) && Number.isFinite(e)) rows.push(`| uncontended ${w} worker(s), ops/s | ${fmt(r)} | ${fmt(e)} | ${ratio(e, r)} |`)
    }
    const rc = redis.contended.filter((x) => x.contender === 'ours' && x.scenario === 'contended')
    const ec = etcd.contended.filter((x) => x.contender === 'ours' && x.members === 1)
    if (rc.length > 0 && ec.length > 0) {
      const rRate = median(rc.map(acqPerSec))
      const eRate = median(ec.map(acqPerSec))
      const rP99 = median(rc.map((x) => quantile(x.waitsMs, 0.99)))
      const eP99 = median(ec.map((x) => x.waitP99Ms))
      rows.push(`| contended ${p.contended.workers} workers, grants/s | ${fmt(rRate)} | ${fmt(eRate)} | ${ratio(eRate, rRate)} |`)
      rows.push(`| contended, wait p99 ms | ${fmt(rP99, 1)} | ${fmt(eP99, 1)} | ${ratio(eP99, rP99)} |`)
    }
    if (rows.length > 0) {
      out.push('**Ours on etcd (1 member) against ours on Redis, same run** (no target is set for this ratio)', '')
      out.push('| measure | Redis (one redis-server) | etcd (1 member, tmpfs) | etcd/Redis |', '|---|---|---|---|', ...rows, '')
    }
  }
  if (etcd.failures.length > 0) out.push(`Failed measurements (no result): ${etcd.failures.map((f) => `\`${f}\``).join('; ')}.`, '')
  return out.join('\n')
}

function sumOf<T>(rows: readonly T[], field: keyof T): number {
  return rows.reduce((a, r) => a + Number(r[field]), 0)
}
