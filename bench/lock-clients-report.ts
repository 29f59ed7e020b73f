// The per-client rows of `npm run bench:lock` (issue 37): ours and the raw floor on node-redis and
// on iovalkey beside the same two on ioredis, in the same run. What is compared is a share: ours'
// ops/s over the raw floor's on the same client, in the same round; on client X that share must
// reach 0.95× the share ours reaches on ioredis.
import type { UncontendedResult } from './lock-child.js'
import { OTHER_CLIENTS } from './lock-contenders.js'
import { fmt, summarizeContended, verdict, type Report } from './lock-report.js'
import { max, median, min } from './support/stats.js'

/** Issue 37: ours on a client reaches at least this × the floor's share ours reaches on ioredis. */
export const CLIENT_SHARE_TARGET = 0.95

const rate = (r: UncontendedResult) => (r.ops / r.elapsedMs) * 1000

/**
 * Per round in which all four ran: (ours-X / raw-X) / (ours / raw), and the shares themselves;
 * `reference` is the contender on ioredis that stands for ours there (`ours`, or `ours-uncoalesced`).
 */
function relativeShares(
  results: readonly UncontendedResult[],
  library: string,
  workers: number,
  reference = 'ours',
): { relative: number[]; share: number[]; ioShare: number[] } {
  const find = (id: string, round: number | undefined) => results.find((r) => r.contender === id && r.workers === workers && r.round === round)
  const out = { relative: [] as number[], share: [] as number[], ioShare: [] as number[] }
  for (const mine of results.filter((r) => r.contender === `ours-${library}` && r.workers === workers)) {
    const raw = find(`raw-${library}`, mine.round)
    const ours = find(reference, mine.round)
    const ioRaw = find('raw', mine.round)
    if (!raw || !ours || !ioRaw) continue
    const share = rate(mine) / rate(raw)
    const ioShare = rate(ours) / rate(ioRaw)
    out.relative.push(share / ioShare)
    out.share.push(share)
    out.ioShare.push(ioShare)
  }
  return out
}

/** The section's tables, or '' when no per-client contender ran. */
export function renderClientReport(report: Report): string {
  const libraries = OTHER_CLIENTS.filter((library) => [...report.uncontended, ...report.contended].some((r) => r.contender === `ours-${library}`))
  if (libraries.length === 0) return ''
  const like = report.uncontended.some((r) => r.contender === 'ours-uncoalesced')
  const out: string[] = [
    '### Per client (issue 37): ours and the raw floor on node-redis, iovalkey and GLIDE, beside ioredis',
    '',
    `Each client library runs the raw floor (\`SET NX PX\` + \`EVALSHA\` compare-and-delete) and ours (one Locker, defaults but the lease) in the same rounds as \`raw\` and \`ours\` on ioredis, each in its own child process with one connection of that library (default options). The share is ours' ops/s over its own client's floor in the same round; the target is share on X ≥ ${CLIENT_SHARE_TARGET} × the share on ioredis (median over rounds of the per-round quotient, with its range).`,
    ...(like
      ? [
          '',
          "On ioredis, iovalkey and GLIDE ours sends the acquires and releases of a tick together (`coalesceWrites`, on by default: docs/LOCK.md; socket writes on the first two, one GLIDE `Batch` on the third), which their raw floor does not; node-redis writes a tick's commands together for the floor and ours alike. So the quotient is given twice: against ours on ioredis as it runs by default (for iovalkey and GLIDE, ours coalescing on both sides), and against ours on ioredis with `coalesceWrites: false` (the Locker's own cost against a floor that writes each command as the client sends it); the target is judged on the second, as since it was set, and the first is said beside it.",
        ]
      : []),
    '',
    like
      ? '| client | workers | ours ops/s | raw ops/s | ours/raw on it | ours/raw on ioredis (default; coalesceWrites: false) | quotient, default | quotient, against coalesceWrites: false (rounds) | target | result |'
      : '| client | workers | ours ops/s | raw ops/s | ours/raw on it | ours/raw on ioredis | quotient (rounds) | target | result |',
    like ? '| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |' : '| --- | --- | --- | --- | --- | --- | --- | --- | --- |',
  ]
  for (const library of libraries) {
    for (const workers of report.plan.uncontended.workers) {
      const s = relativeShares(report.uncontended, library, workers)
      if (s.relative.length === 0) continue
      const ops = (id: string) => median(report.uncontended.filter((r) => r.contender === id && r.workers === workers).map(rate))
      const q = median(s.relative)
      if (like) {
        const l = relativeShares(report.uncontended, library, workers, 'ours-uncoalesced')
        const ql = median(l.relative)
        out.push(
          `| ${library} | ${workers} | ${fmt(ops(`ours-${library}`))} | ${fmt(ops(`raw-${library}`))} | ${fmt(median(s.share), 3)} | ${fmt(median(s.ioShare), 3)}; ${fmt(median(l.ioShare), 3)} | ${fmt(q, 3)} | ${fmt(ql, 3)} (${fmt(min(l.relative), 2)}–${fmt(max(l.relative), 2)}, ${l.relative.length}) | ≥ ${CLIENT_SHARE_TARGET} | ${verdict(ql >= CLIENT_SHARE_TARGET)} |`,
        )
        continue
      }
      out.push(
        `| ${library} | ${workers} | ${fmt(ops(`ours-${library}`))} | ${fmt(ops(`raw-${library}`))} | ${fmt(median(s.share), 3)} | ${fmt(median(s.ioShare), 3)} | ${fmt(q, 3)} (${fmt(min(s.relative), 2)}–${fmt(max(s.relative), 2)}, ${s.relative.length}) | ≥ ${CLIENT_SHARE_TARGET} | ${verdict(q >= CLIENT_SHARE_TARGET)} |`,
      )
    }
  }
  const contended = ['ours', ...libraries.map((l) => `ours-${l}`)].flatMap((id) => {
    const row = summarizeContended(report.contended, id)
    return row ? [{ id, row }] : []
  })
  if (contended.length > 1) {
    out.push('', `Contended (${report.plan.contended.workers} workers, one key, ${report.plan.contended.holdMs} ms holds), ours on each client:`, '')
    out.push('| client | grants/s | wait p50 ms | wait p99 ms | fewest–most per worker | overlaps | Redis commands per grant |', '| --- | --- | --- | --- | --- | --- | --- |')
    for (const { id, row } of contended) {
      out.push(
        `| ${id === 'ours' ? 'ioredis' : id.slice('ours-'.length)} | ${fmt(row.acqPerSec)} | ${fmt(row.waitP50, 1)} | ${fmt(row.waitP99, 1)} | ${row.perWorkerMin}–${row.perWorkerMax} | ${row.overlaps} | ${fmt(row.executedPerAcq, 2)} |`,
      )
    }
  }
  out.push('')
  return out.join('\n')
}
