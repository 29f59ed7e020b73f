/**
 * What `npm run demo -- --once` prints: each sale in a few lines, then the three side by side,
 * every line at most 80 columns (a terminal's default), money included — charges at the gateway
 * against payments the shop recorded, and the money overcharged.
 */
import { FLASH_SALE_DEFAULTS, type FlashSaleReport } from './flash-sale.js'

/** The widest line `--once` prints. */
export const ONCE_COLUMNS = 80

/** Mode names as the dashboard says them. */
export const ONCE_MODE_NAMES = Object.freeze({ unsafe: 'No lock', lock: 'Lock only', fenced: 'Lock + fencing' })

/** Cents as `$1,249.75`. */
export function dollars(cents: number): string {
  return (cents / 100).toLocaleString('en-US', { style: 'currency', currency: 'USD' })
}

/** Money charged beyond each order's first charge: extra charges × the price of the sale's one product. */
export function overchargedCents(report: Pick<FlashSaleReport, 'extraCharges'>): number {
  return report.extraCharges * FLASH_SALE_DEFAULTS.priceCents
}

const mark = (n: number) => (n > 0 ? `${n} ✗` : '0 ✓')

/** A count and its noun, agreeing: `1 pause`, `2 pauses`. */
export function countOf(n: number, one: string, many = `${one}s`): string {
  return `${n} ${n === 1 ? one : many}`
}

/** One sale, in lines of at most {@link ONCE_COLUMNS}. */
export function formatOnceReport(report: FlashSaleReport): string {
  const o = report.options
  const chaos =
    o.chaos === 'none'
      ? 'no chaos'
      : countOf(report.chaosEvents, o.chaos === 'pause' ? 'pause' : o.chaos === 'kill' ? 'kill' : 'Redis restart')
  const moneyBroken =
    report.chargedUnpaidOrders + report.paidUnchargedOrders + report.amountMismatchOrders + report.unmatchedCharges + report.unsettledOrders
  const lines = [
    `${ONCE_MODE_NAMES[o.mode]} · chaos ${o.chaos} · ${countOf(o.buyers, 'buyer')}, ${countOf(o.stock, 'unit')} · seed ${o.seed} · ${(report.durationMs / 1000).toFixed(1)} s`,
    `  database: sold ${report.sold} of ${report.initialStock} · oversold ${mark(report.oversoldUnits)} · lost updates ${mark(report.lostUpdates)}`,
    `  gateway:  charged twice ${mark(report.doubleChargedOrders)} · overcharged ${dollars(overchargedCents(report))}`,
    `  money:    charges ${report.gatewayCharges} (gateway) · payments ${report.payments} (shop) · paid ${report.paidOrders}`,
    `  ledger vs shop after reconciling: ${moneyBroken === 0 ? 'every charge a paid order ✓' : `${moneyBroken} mismatched ✗`}`,
    `  chaos:    ${chaos} · ${countOf(report.expiredLocks, 'lease')} expired · ${countOf(report.staleWritesRejected, 'stale write')} refused`,
  ]
  return lines.map((l) => (l.length > ONCE_COLUMNS ? `${l.slice(0, ONCE_COLUMNS - 1)}…` : l)).join('\n')
}

/** The three sales side by side. */
export function formatOnceSummary(reports: readonly FlashSaleReport[]): string {
  const head = ['', 'oversold', 'charged 2x', 'lost', 'charges/paid', 'overcharged', 'stale']
  const rows = reports.map((r) => [
    ONCE_MODE_NAMES[r.options.mode],
    String(r.oversoldUnits),
    String(r.doubleChargedOrders),
    String(r.lostUpdates),
    `${r.gatewayCharges}/${r.payments}`,
    dollars(overchargedCents(r)),
    String(r.staleWritesRejected),
  ])
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] as string).length)))
  // One space between the figures (right-aligned, so they stay apart): six-digit counts fit 80 columns.
  const line = (cells: readonly string[]) =>
    `  ${cells.map((c, i) => (i === 0 ? `${c.padEnd(widths[i] as number)} ` : c.padStart(widths[i] as number))).join(' ')}`.trimEnd()
  return [
    "Summary: the database's counts, and charges from the gateway's ledger",
    line(head),
    ...rows.map(line),
    '  lost: lost updates · charges/paid: charges (gateway) / payments (shop)',
    '  stale: stale writes refused (fencing)',
  ].join('\n')
}
