// Snapshot pieces as the server sends them, for the component tests.
import type { InvariantsView, RunView } from '../../src/wire'

export function invariants(overrides: Partial<InvariantsView> = {}): InvariantsView {
  return {
    source: 'live',
    title: 'Live shop · fenced, drop after drop',
    kind: 'live',
    mode: 'fenced',
    initialStock: 60,
    stock: 12,
    sold: 48,
    oversold: 0,
    doubleCharges: 0,
    lostUpdates: 0,
    atMs: 1_700_000_000_000,
    ...overrides,
  }
}

export function run(overrides: Partial<RunView> = {}): RunView {
  return {
    id: 1,
    mode: 'fenced',
    chaos: 'pause',
    buyers: 200,
    stock: 20,
    instances: 3,
    seed: 1,
    status: 'done',
    startedAtMs: 1_700_000_000_000,
    phase: 'finished',
    buyersDone: 200,
    ordered: 20,
    soldOut: 180,
    paid: 20,
    chaosEvents: 3,
    durationMs: 21_400,
    result: { remainingStock: 0, sold: 20, oversold: 0, doubleCharges: 0, lostUpdates: 0, staleWritesRejected: 2, expiredLocks: 3, acquireP99Ms: 900 },
    error: null,
    ...overrides,
  }
}
