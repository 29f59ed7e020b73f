// The whole page on one stream (a stand-in EventSource): the incident panel and the charged-twice
// orders always show one and the same sale — opening a run's orders draws that run's incident,
// and another run's timeline closes the orders of the first.
import { act, cleanup, fireEvent, render } from '@testing-library/react'
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import { App } from '../../src/app'
import type { EventSourceLike } from '../../src/use-dashboard-stream'
import type { DashboardSnapshot } from '../../src/wire'
import { result, run } from './fixtures'

class FakeEventSource implements EventSourceLike {
  static last: FakeEventSource | undefined
  readyState = 0
  onerror: ((this: EventSourceLike, ev: Event) => unknown) | null = null
  readonly listeners = new Map<string, Array<(ev: MessageEvent<string>) => void>>()
  constructor() {
    FakeEventSource.last = this
  }
  addEventListener(type: string, listener: (ev: MessageEvent<string>) => void): void {
    this.listeners.set(type, [...(this.listeners.get(type) ?? []), listener])
  }
  close(): void {
    this.readyState = 2
  }
  emit(type: string, data: unknown): void {
    this.readyState = 1
    for (const l of this.listeners.get(type) ?? []) l(new MessageEvent(type, { data: JSON.stringify(data) }))
  }
}

const point = {
  atMs: 1_000,
  acquireRate: 1,
  successRatio: 1,
  waitP50Ms: 1,
  waitP99Ms: 2,
  expiryRatio: 0,
  lostLocks: 0,
  fencingRejections: 0,
  instancesUp: 4,
  instancesWatched: 4,
}
// A comparison's three runs and a newer fenced sale (#4): the newest with a lock is #4.
const runs = [
  run({ id: 4 }),
  run({ id: 3, comparison: 1 }),
  run({ id: 2, mode: 'lock', comparison: 1, result: result({ oversold: 1, doubleChargedOrders: 2, extraCharges: 2 }) }),
  run({
    id: 1,
    mode: 'unsafe',
    comparison: 1,
    result: result({ oversold: 30, doubleChargedOrders: 5, extraCharges: 5 }),
  }),
]
const snapshot: DashboardSnapshot = {
  atMs: 1_000,
  point,
  invariants: [],
  locks: [],
  activeRun: null,
  runs,
  comparison: [runs[3], runs[2], runs[1]].filter((r) => r !== undefined),
  limits: {
    buyers: { min: 10, max: 2000, default: 300 },
    stock: { min: 1, max: 500, default: 30 },
    instances: 4,
    compare: { buyers: 1000, stock: 100 },
    segments: [1, 2, 4, 8],
    redisRestart: false,
  },
}

const incidentOf = () => document.querySelector('section.incident')?.getAttribute('data-run-id')
const drillOf = () => document.querySelector('section.drill')?.getAttribute('data-run-id') ?? null
const row = (id: number) => document.querySelector(`tr[data-run-id="${id}"]`) as HTMLElement

beforeEach(() => {
  // happy-dom has no canvas: uPlot draws into a context that takes every call (the charts are not
  // what this test reads).
  const context = new Proxy(
    {},
    { get: (_t, key) => (key === 'measureText' ? () => ({ width: 0 }) : () => undefined), set: () => true },
  )
  vi.spyOn(HTMLCanvasElement.prototype, 'getContext').mockReturnValue(context as CanvasRenderingContext2D)
  vi.stubGlobal(
    'Path2D',
    class {
      moveTo() {}
      lineTo() {}
      rect() {}
      arc() {}
      closePath() {}
      bezierCurveTo() {}
      addPath() {}
    },
  )
  // The panels' loaders fetch their run's detail: answered here, as the server would, with nothing to draw.
  vi.stubGlobal(
    'fetch',
    vi.fn(
      async (url: string) =>
        new Response(
          JSON.stringify(
            url.endsWith('/incident') ? { incident: null, reason: 'none here' } : { runId: 0, orders: [], total: 0 },
          ),
          { headers: { 'content-type': 'application/json' } },
        ),
    ),
  )
})
afterEach(() => {
  cleanup()
  vi.unstubAllGlobals()
  vi.restoreAllMocks()
})

describe('App', () => {
  it('draws the incident of the run whose charged-twice orders are open, and closes them for another run’s timeline', () => {
    render(<App stream={{ createEventSource: () => new FakeEventSource() }} />)
    act(() => {
      FakeEventSource.last?.emit('history', { points: [point], intervalMs: 1000 })
      FakeEventSource.last?.emit('snapshot', snapshot)
    })
    // Unasked: the newest finished sale with a lock.
    expect([incidentOf(), drillOf()]).toEqual(['4', null])
    // Run 1's orders charged twice: the incident panel shows run 1 too (it said #4 before).
    fireEvent.click(row(1).querySelector('[data-col="charged-twice"] button') as HTMLElement)
    expect([incidentOf(), drillOf()]).toEqual(['1', '1'])
    // Run 2's orders: both follow.
    fireEvent.click(row(2).querySelector('[data-col="charged-twice"] button') as HTMLElement)
    expect([incidentOf(), drillOf()]).toEqual(['2', '2'])
    // The same run's timeline keeps its orders open; another run's closes them.
    fireEvent.click(row(2).querySelector('.timeline-button') as HTMLElement)
    expect([incidentOf(), drillOf()]).toEqual(['2', '2'])
    fireEvent.click(row(3).querySelector('.timeline-button') as HTMLElement)
    expect([incidentOf(), drillOf()]).toEqual(['3', null])
  })
})
