// `npm run demo -- --once` fits an 80-column terminal and shows the money: charges at the gateway
// against payments the shop recorded, and the money overcharged.
import { describe, expect, it } from 'vitest'
import type { FlashSaleReport } from '../src/flash-sale.js'
import { formatOnceReport, formatOnceSummary, ONCE_COLUMNS } from '../src/once-format.js'

function report(mode: 'unsafe' | 'lock' | 'fenced', over: Partial<FlashSaleReport> = {}): FlashSaleReport {
  return {
    options: {
      instances: 4,
      buyers: 100_000,
      stock: 100_000,
      mode,
      chaos: mode === 'unsafe' ? 'none' : 'pause',
      seed: 7,
      ttlMs: 1_000,
      gatewayLatencyMs: '30-80',
      concurrency: 16,
    },
    durationMs: 123_456,
    initialStock: 100_000,
    remainingStock: 0,
    sold: 199_999,
    oversoldUnits: 99_999,
    doubleChargedOrders: 88_888,
    extraCharges: 99_999,
    lostUpdates: 77_777,
    gatewayCharges: 299_999,
    payments: 199_999,
    paidOrders: 199_999,
    chargedUnpaidOrders: 0,
    paidUnchargedOrders: 0,
    amountMismatchOrders: 0,
    unmatchedCharges: 0,
    staleWritesRejected: 12_345,
    expiredLocks: 23_456,
    chaosEvents: 999,
    ...over,
  } as FlashSaleReport
}

describe('--once output', () => {
  it('fits 80 columns with six-digit figures, and shows charges vs payments and the money overcharged', () => {
    const reports = [
      report('unsafe'),
      report('lock'),
      report('fenced', {
        oversoldUnits: 0,
        doubleChargedOrders: 0,
        extraCharges: 0,
        lostUpdates: 0,
        gatewayCharges: 100_000,
        payments: 100_000,
      }),
    ]
    const text = [...reports.map(formatOnceReport), formatOnceSummary(reports)].join('\n')
    const widest = Math.max(...text.split('\n').map((l) => [...l].length))
    expect(widest).toBeLessThanOrEqual(ONCE_COLUMNS)
    expect(text).not.toContain('…')
    expect(formatOnceReport(reports[0] as FlashSaleReport)).toContain(
      'charges 299999 (gateway) · payments 199999 (shop) · paid 199999',
    )
    expect(formatOnceReport(reports[1] as FlashSaleReport)).toMatch(/^Lock only · chaos pause/)
    // 99 999 extra charges of $49.99.
    expect(formatOnceReport(reports[0] as FlashSaleReport)).toContain('overcharged $4,998,950.01')
    const summary = formatOnceSummary(reports).split('\n')
    expect(summary[1]).toMatch(/oversold +charged 2x +lost +charges\/paid +overcharged +stale$/)
    expect(summary[4]).toMatch(/^ {2}Lock \+ fencing +0 +0 +0 +100000\/100000 +\$0\.00 +12345$/)
  })
})
