/**
 * How a run's report is shown: a table for people, JSON for machines (`--json`), and a progress
 * line on stderr while the sale runs.
 */
import type { FlashSaleProgress, FlashSaleReport } from './flash-sale.js'
import { countOf } from './once-format.js'

const n = (value: number | null) => (value === null ? 'n/a' : String(value))
const ms = (value: number | null) => (value === null ? 'n/a' : `${value.toFixed(1)} ms`)
const flag = (value: number) => (value > 0 ? `${value}  ✗` : '0  ✓')

/** The report as the terminal table. */
export function formatReport(report: FlashSaleReport): string {
  const o = report.options
  const rows: Array<[string, string, string]> = [
    ['sold (units in orders)', `${report.sold} of ${report.initialStock}`, 'database'],
    ['oversold units', flag(report.oversoldUnits), 'database'],
    [
      'orders charged twice',
      flag(report.doubleChargedOrders) +
        (report.extraCharges > report.doubleChargedOrders ? ` (${report.extraCharges} extra charges)` : ''),
      'gateway ledger',
    ],
    [
      'lost updates',
      flag(report.lostUpdates) +
        `  (remaining ${report.remainingStock} + sold ${report.sold} vs initial ${report.initialStock})`,
      'database',
    ],
    ['charged, order not paid', flag(report.chargedUnpaidOrders), 'gateway ledger vs database'],
    ['paid, no charge', flag(report.paidUnchargedOrders), 'gateway ledger vs database'],
    ['charged another amount', flag(report.amountMismatchOrders), 'gateway ledger vs database'],
    ['charges of no order', flag(report.unmatchedCharges), 'gateway ledger vs database'],
    ['ordered, never paid nor cancelled', flag(report.unsettledOrders), 'database (after the reconciler)'],
    ['charges at the gateway', String(report.gatewayCharges), 'gateway ledger'],
    [
      'orders / paid / payments recorded',
      `${report.orders} / ${report.paidOrders} / ${report.payments}` +
        (report.doublePaidOrders > 0
          ? ` (${report.doublePaidOrders} ${report.doublePaidOrders === 1 ? 'order' : 'orders'} with two)`
          : ''),
      'database',
    ],
    [
      'reconciled: paid / cancelled',
      `${report.reconciledPaid} / ${report.cancelledOrders}  (at the end: ${report.finalReconcile.paid} / ${report.finalReconcile.cancelled})`,
      'database (reconciler)',
    ],
    ['stale writes rejected', n(report.staleWritesRejected), 'instances (database and gateway refusals)'],
    [
      'acquire P99',
      `${ms(report.acquireP99Ms)}  (${report.acquires} acquires, ${report.acquireTimeouts} timed out)`,
      'instances (lock events)',
    ],
    ['expired locks', n(report.expiredLocks), 'instances (lock events)'],
    o.chaos === 'kill'
      ? ['instances killed (SIGKILL)', `${report.chaosEvents}${killDetail(report)}`, 'supervisor']
      : [
          o.chaos === 'redis-restart' ? 'Redis restarts' : 'pauses (SIGSTOP > TTL)',
          n(report.chaosEvents),
          'supervisor',
        ],
  ]
  const w0 = Math.max(...rows.map((r) => r[0].length))
  const w1 = Math.max(...rows.map((r) => r[1].length))
  const line = (a: string, b: string, c: string) => `  ${a.padEnd(w0)}  ${b.padEnd(w1)}  ${c}`
  const verdict =
    report.violations === 0
      ? 'no violation: every unit sold once, every order charged at most once, every charge one paid order of its amount, no update lost'
      : `${countOf(report.violations, 'violation')}: ${[
          report.oversoldUnits ? `${report.oversoldUnits} oversold` : '',
          report.doubleChargedOrders ? `${report.doubleChargedOrders} charged twice at the gateway` : '',
          report.lostUpdates ? countOf(report.lostUpdates, 'lost update') : '',
          report.chargedUnpaidOrders ? `${report.chargedUnpaidOrders} charged and not paid` : '',
          report.paidUnchargedOrders ? `${report.paidUnchargedOrders} paid and not charged` : '',
          report.amountMismatchOrders ? `${report.amountMismatchOrders} charged another amount` : '',
          report.unmatchedCharges ? `${countOf(report.unmatchedCharges, 'charge')} of no order` : '',
          report.unsettledOrders ? `${countOf(report.unsettledOrders, 'order')} left pending with no payment` : '',
        ]
          .filter(Boolean)
          .join(', ')}`
  return [
    `Flash sale: mode ${o.mode}, chaos ${o.chaos}, ${o.instances} instances, ${o.buyers} buyers, stock ${o.stock}${(o.segments ?? 1) > 1 ? ` in ${o.segments} segments` : ''}, seed ${o.seed}, TTL ${o.ttlMs} ms — ${(report.durationMs / 1000).toFixed(1)} s`,
    `Redis: ${report.services.redis}${report.services.etcd ? ` · locks on ${report.services.etcd}` : ''} · PostgreSQL: ${report.services.database}, schema ${report.services.schema}`,
    '',
    line('', 'value', 'counted from'),
    ...rows.map((r) => line(...r)),
    '',
    `  ${verdict}`,
    report.instancesReporting < o.instances
      ? `  (only ${report.instancesReporting} of ${o.instances} instances reported their counters)`
      : '',
  ]
    .filter((l, i, all) => l !== '' || i < all.length - 1)
    .join('\n')
}

function killDetail(report: FlashSaleReport): string {
  const restarts = report.kills.map((k) => k.restartMs).filter((v): v is number => v !== null)
  const exact = report.kills.filter((k) => k.how === 'died-after-charge').length
  if (report.kills.length === 0) return ''
  return `  (${exact} right after a charge; back in ${restarts.length > 0 ? `${Math.min(...restarts)}-${Math.max(...restarts)} ms` : 'n/a'})`
}

/** The report as JSON (what `--json` prints). */
export function reportJson(report: FlashSaleReport): string {
  return JSON.stringify(report, (_k, v: unknown) => (typeof v === 'bigint' ? v.toString() : v), 2)
}

/**
 * A progress writer: rewrites one stderr line on a terminal, or prints a line every 10 % when
 * stderr is a file or a pipe (CI logs).
 */
export function progressWriter(stream: NodeJS.WriteStream = process.stderr): {
  update(p: FlashSaleProgress): void
  end(): void
} {
  const tty = stream.isTTY === true
  let lastDecile = -1
  let lastDraw = 0
  let shown = false
  const render = (p: FlashSaleProgress) => {
    const width = 30
    const filled = Math.round((p.done / Math.max(1, p.buyers)) * width)
    const t = p.totals
    const extra = t
      ? ` · ordered ${t.ordered} · sold out ${t.soldOut} · paid ${t.paid} · retries ${t.paymentRetries}`
      : ''
    return `[${'#'.repeat(filled)}${'-'.repeat(width - filled)}] ${p.done}/${p.buyers} buyers${extra} · chaos ${p.chaosCount}${p.message ? ` · ${p.message}` : ''}`
  }
  return {
    update(p) {
      if (tty) {
        const now = performance.now()
        if (p.phase === 'selling' && p.done < p.buyers && now - lastDraw < 100) return
        lastDraw = now
        // Cut to the terminal's width: a wrapped line would not be rewritten in place.
        const line = render(p)
        const width = stream.columns ?? 0
        stream.write(`\r\x1b[2K${width > 1 && line.length > width - 1 ? `${line.slice(0, width - 2)}…` : line}`)
        shown = true
        return
      }
      const decile = p.phase === 'selling' ? Math.floor((p.done / Math.max(1, p.buyers)) * 10) : -1
      if (p.phase !== 'selling' || decile > lastDecile) {
        if (p.phase === 'selling') lastDecile = decile
        stream.write(`${render(p)}\n`)
      }
    },
    end() {
      if (tty && shown) stream.write('\r\x1b[2K')
    },
  }
}
