// Snapshot pieces as the server sends them, for the component tests.
import type { InvariantsView, RunView } from '../../src/wire'

const MONEY = {
  chargedUnpaidOrders: 0,
  paidUnchargedOrders: 0,
  amountMismatchOrders: 0,
  unmatchedCharges: 0,
  reconciledPaid: 0,
  cancelledOrders: 0,
}

/** The shop's own total when a test does not give one: each count of a broken invariant. */
function withViolations<
  T extends {
    oversold: number
    doubleChargedOrders: number
    lostUpdates: number
    chargedUnpaidOrders: number
    paidUnchargedOrders: number
    amountMismatchOrders: number
    unmatchedCharges: number
  },
>(view: T, given: number | undefined): T & { violations: number } {
  const total =
    Math.max(view.oversold, view.lostUpdates) +
    view.doubleChargedOrders +
    view.chargedUnpaidOrders +
    view.paidUnchargedOrders +
    view.amountMismatchOrders +
    view.unmatchedCharges
  return { ...view, violations: given ?? total }
}

export function invariants(overrides: Partial<InvariantsView> = {}): InvariantsView {
  return withViolations(
    {
      source: 'live',
      title: 'Live shop · fenced, drop after drop',
      kind: 'live',
      mode: 'fenced',
      initialStock: 60,
      stock: 12,
      sold: 48,
      oversold: 0,
      doubleChargedOrders: 0,
      extraCharges: 0,
      lostUpdates: 0,
      gatewayCharges: 45,
      payments: 45,
      paidOrders: 45,
      ...MONEY,
      atMs: 1_700_000_000_000,
      ...overrides,
    },
    overrides.violations,
  )
}

/** A finished run's figures: a fenced sale of 20 units, each charged once and recorded once. */
export function result(overrides: Partial<NonNullable<RunView['result']>> = {}): NonNullable<RunView['result']> {
  return withViolations(
    {
      remainingStock: 0,
      sold: 20,
      oversold: 0,
      doubleChargedOrders: 0,
      extraCharges: 0,
      lostUpdates: 0,
      gatewayCharges: 20,
      payments: 20,
      paidOrders: 20,
      staleWritesRejected: 2,
      expiredLocks: 3,
      overchargedCents: 0,
      acquireP99Ms: 900,
      ...MONEY,
      ...overrides,
    },
    overrides.violations,
  )
}

export function run(overrides: Partial<RunView> = {}): RunView {
  return {
    id: 1,
    mode: 'fenced',
    chaos: 'pause',
    buyers: 200,
    stock: 20,
    instances: 4,
    segments: 1,
    seed: 1,
    comparison: null,
    gatewayLatencyMs: '30-80',
    status: 'done',
    startedAtMs: 1_700_000_000_000,
    phase: 'finished',
    buyersDone: 200,
    ordered: 20,
    soldOut: 180,
    paid: 20,
    chaosEvents: 3,
    durationMs: 21_400,
    result: result(),
    error: null,
    ...overrides,
  }
}
