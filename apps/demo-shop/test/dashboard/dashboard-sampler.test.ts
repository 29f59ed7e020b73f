// What the sampler makes of an instance's `/api/state` for the invariants card: the charges in
// flight when the shop gives them apart (`inFlight.chargedUnpaidOrders`), nothing when it does
// not — the dashboard then does not call a live charged-not-paid order a violation.
import { describe, expect, it } from 'vitest'
import type { ShopState } from '../../src/app.js'
import { chargesInFlightOf, invariantsOf } from '../../src/dashboard/dashboard-sampler.js'

const state = (over: Record<string, unknown> = {}): ShopState =>
  ({
    instance: 'shop-1',
    mode: 'fenced',
    at: '2026-11-28T07:00:00.000Z',
    products: [{ sku: 'drop-1', name: 'Drop', initialStock: 30, stock: 10, unitsSold: 20, orders: 20, oversoldUnits: 0, lostUpdates: 0, segments: 0 }],
    orders: 20,
    paidOrders: 19,
    payments: 19,
    gatewayCharges: 20,
    reconciled: { paid: 0, cancelled: 0 },
    violations: { oversoldUnits: 0, doubleChargedOrders: 0, extraCharges: 0, doublePaidOrders: 0, lostUpdates: 0, chargedUnpaidOrders: 0, paidUnchargedOrders: 0, amountMismatchOrders: 0, unmatchedCharges: 0, unsettledOrders: 0, total: 0 },
    locks: [],
    ...over,
  }) as unknown as ShopState

describe('the sampler’s reading of /api/state', () => {
  it('passes on the charges in flight a shop gives apart from its violations', () => {
    const view = invariantsOf(state({ inFlight: { chargedUnpaidOrders: 1 } }), 'live', 'Live shop', 1)
    expect(view).toMatchObject({ chargesInFlight: 1, chargedUnpaidOrders: 0, gatewayCharges: 20, payments: 19, violations: 0 })
  })

  it('says nothing of charges in flight for a shop that does not, and leaves its charged-not-paid count as it is', () => {
    const counted = state({ violations: { ...state().violations, chargedUnpaidOrders: 1, total: 1 } })
    const view = invariantsOf(counted, 'live', 'Live shop', 1)
    expect('chargesInFlight' in view).toBe(false)
    expect(view).toMatchObject({ chargedUnpaidOrders: 1, violations: 1 })
  })

  it.each([[{ chargedUnpaidOrders: -1 }], [{ chargedUnpaidOrders: '1' }], [{ chargedUnpaidOrders: 1.5 }], [{ charges: 1 }], [null]])('ignores an in-flight figure that is not a count: %j', (inFlight) => {
    expect(chargesInFlightOf(state({ inFlight }))).toBeUndefined()
  })
})
