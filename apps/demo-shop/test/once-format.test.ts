// `npm run demo -- --once` fits an 80-column terminal and shows the money: charges at the gateway
// against payments the shop recorded, and the money overcharged.
import { describe, expect, it } from 'vitest'
import type { FlashSaleReport } from '../src/flash-sale.js'
import { formatOnceReport, formatOnceSummary, ONCE_COLUMNS } from '../src/once-format.js'
import { formatReport } from '../src/report-format.js'

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
    unsettledOrders: 0,
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

  it('makes every count agree with its noun: 1 pause, 1 lease, 1 stale write, 1 buyer, 1 unit', () => {
    const ones = report('fenced', { options: { ...report('fenced').options, buyers: 1, stock: 1 }, sold: 1, initialStock: 1, oversoldUnits: 0, doubleChargedOrders: 0, extraCharges: 0, lostUpdates: 0, gatewayCharges: 1, payments: 1, paidOrders: 1, chaosEvents: 1, expiredLocks: 1, staleWritesRejected: 1, chargedUnpaidOrders: 1 })
    const text = formatOnceReport(ones)
    expect(text).toContain('1 buyer, 1 unit ·')
    expect(text).toContain('chaos:    1 pause · 1 lease expired · 1 stale write refused')
    expect(text).toContain('1 mismatched ✗')
    expect(text).not.toMatch(/\b1 (pauses|leases|buyers|units|writes|kills|restarts)\b/)
    const twos = formatOnceReport(report('lock', { chaosEvents: 2, expiredLocks: 2, staleWritesRejected: 2, options: { ...report('lock').options, chaos: 'kill' } }))
    expect(twos).toContain('chaos:    2 kills · 2 leases expired · 2 stale writes refused')
    const restart = formatOnceReport(report('lock', { chaosEvents: 1, options: { ...report('lock').options, chaos: 'redis-restart' } }))
    expect(restart).toContain('chaos:    1 Redis restart ·')
    expect(formatOnceReport(report('unsafe', { expiredLocks: 0 }))).toContain('chaos:    no chaos · 0 leases expired')
  })

  it("the full report's verdict agrees with its nouns too: 1 violation, 1 lost update, 1 order left pending", () => {
    // What the full report reads besides the figures of --once.
    const rest = { services: { redis: 'r', database: 'd', schema: 's' }, orders: 1, doublePaidOrders: 0, reconciledPaid: 0, cancelledOrders: 0, finalReconcile: { paid: 0, cancelled: 0 }, acquireP99Ms: 1, acquires: 1, acquireTimeouts: 0 }
    const one = { ...rest, oversoldUnits: 0, doubleChargedOrders: 0, extraCharges: 0, lostUpdates: 1, unmatchedCharges: 1, unsettledOrders: 1, violations: 1 } as Partial<FlashSaleReport>
    const text = formatReport(report('lock', { ...one, violations: 3 }))
    expect(text).toContain('3 violations: 1 lost update, 1 charge of no order, 1 order left pending with no payment')
    expect(formatReport(report('lock', { ...one, unmatchedCharges: 0, unsettledOrders: 0 }))).toContain('1 violation: 1 lost update')
    expect(formatReport(report('lock', { ...one, lostUpdates: 2, unmatchedCharges: 0, unsettledOrders: 0, violations: 2 }))).toContain('2 violations: 2 lost updates')
  })
})
