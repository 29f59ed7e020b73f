// The dashboard's connection to the shop: the message when it is lost, and the reconnects (the
// browser's own, the hook's with backoff, and after a silent stream), with a stand-in EventSource.
import { act, cleanup, render, screen } from '@testing-library/react'
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import { ConnectionBanner } from '../../src/components/connection-banner'
import { backoffMs, useDashboardStream, type EventSourceLike } from '../../src/use-dashboard-stream'
import type { DashboardSnapshot } from '../../src/wire'

class FakeEventSource implements EventSourceLike {
  static made: FakeEventSource[] = []
  readyState = 0
  closed = false
  onerror: ((this: EventSourceLike, ev: Event) => unknown) | null = null
  readonly listeners = new Map<string, Array<(ev: MessageEvent<string>) => void>>()
  constructor(readonly url: string) {
    FakeEventSource.made.push(this)
  }
  addEventListener(type: string, listener: (ev: MessageEvent<string>) => void): void {
    this.listeners.set(type, [...(this.listeners.get(type) ?? []), listener])
  }
  close(): void {
    this.closed = true
    this.readyState = 2
  }
  emit(type: string, data: unknown): void {
    this.readyState = 1
    for (const l of this.listeners.get(type) ?? []) l(new MessageEvent(type, { data: JSON.stringify(data) }))
  }
  fail(readyState: 0 | 2): void {
    this.readyState = readyState
    this.onerror?.call(this, new Event('error'))
  }
}

const snapshot = (atMs: number) =>
  ({
    atMs,
    point: { atMs, acquireRate: 1, successRatio: 1, waitP50Ms: 1, waitP99Ms: 2, expiryRatio: 0, lostLocks: 0, fencingRejections: 0, instancesUp: 4, instancesWatched: 4 },
    invariants: [],
    locks: [],
    activeRun: null,
    runs: [],
    comparison: [],
    limits: { buyers: { min: 10, max: 2000, default: 300 }, stock: { min: 1, max: 500, default: 30 }, instances: 3, compare: { buyers: 1000, stock: 100 }, segments: [1, 2, 4, 8], redisRestart: true },
  }) satisfies DashboardSnapshot

function Harness() {
  const { connection, snapshot: latest, points } = useDashboardStream({ createEventSource: (url) => new FakeEventSource(url), staleAfterMs: 5_000 })
  return (
    <>
      <ConnectionBanner connection={connection} />
      <p data-testid="latest">{latest ? `${latest.atMs} (${points.length} points)` : 'none'}</p>
    </>
  )
}

const current = () => FakeEventSource.made[FakeEventSource.made.length - 1] as FakeEventSource
const lostMessage = () => screen.queryByRole('alert')

beforeEach(() => {
  FakeEventSource.made = []
  vi.useFakeTimers()
})
afterEach(() => {
  cleanup()
  vi.useRealTimers()
})

describe('connection to the shop', () => {
  it('says it is connecting, then shows the numbers', () => {
    render(<Harness />)
    expect(screen.getByRole('status').textContent).toContain('Connecting to the shop')
    expect(current().url).toBe('/api/dashboard/stream')
    act(() => current().emit('history', { points: [snapshot(1_000).point], intervalMs: 1000 }))
    act(() => current().emit('snapshot', snapshot(2_000)))
    expect(screen.queryByRole('status')).toBeNull()
    expect(lostMessage()).toBeNull()
    expect(screen.getByTestId('latest').textContent).toBe('2000 (2 points)')
  })

  it('says the connection is lost while the browser reconnects, and clears when numbers come back', () => {
    render(<Harness />)
    act(() => current().emit('snapshot', snapshot(1_000)))
    act(() => current().fail(0))
    expect(lostMessage()?.textContent).toContain('Connection to the shop lost')
    expect(lostMessage()?.textContent).toContain('Reconnecting')
    // The browser reconnects the same EventSource: no new one is made.
    expect(FakeEventSource.made).toHaveLength(1)
    expect(screen.getByTestId('latest').textContent).toBe('1000 (1 points)')
    act(() => current().emit('snapshot', snapshot(3_000)))
    expect(lostMessage()).toBeNull()
  })

  it('opens a new stream with backoff when the browser gives up on one', () => {
    render(<Harness />)
    act(() => current().emit('snapshot', snapshot(1_000)))
    const first = current()
    act(() => first.fail(2))
    expect(lostMessage()?.textContent).toContain('Reconnecting in 1 s')
    expect(first.closed).toBe(true)
    act(() => {
      vi.advanceTimersByTime(999)
    })
    expect(FakeEventSource.made).toHaveLength(1)
    act(() => {
      vi.advanceTimersByTime(1)
    })
    expect(FakeEventSource.made).toHaveLength(2)
    // It fails again at once: the wait doubles.
    act(() => current().fail(2))
    expect(lostMessage()?.textContent).toContain('Reconnecting in 2 s')
    expect(lostMessage()?.textContent).toContain('attempt 2')
    act(() => {
      vi.advanceTimersByTime(2_000)
    })
    expect(FakeEventSource.made).toHaveLength(3)
    act(() => current().emit('history', { points: [], intervalMs: 1000 }))
    act(() => current().emit('snapshot', snapshot(9_000)))
    expect(lostMessage()).toBeNull()
    expect(screen.getByTestId('latest').textContent).toBe('9000 (1 points)')
  })

  it('treats a stream that falls silent as lost and reopens it', () => {
    render(<Harness />)
    act(() => current().emit('snapshot', snapshot(1_000)))
    act(() => {
      vi.advanceTimersByTime(4_000)
    })
    expect(lostMessage()).toBeNull()
    act(() => {
      vi.advanceTimersByTime(2_000)
    })
    expect(lostMessage()?.textContent).toContain('Connection to the shop lost')
    expect(FakeEventSource.made[0]?.closed).toBe(true)
    act(() => {
      vi.advanceTimersByTime(1_000)
    })
    expect(FakeEventSource.made).toHaveLength(2)
  })

  it('backs off 1, 2, 4, 8 s, then every 15 s', () => {
    expect([1, 2, 3, 4, 5, 6, 20].map(backoffMs)).toEqual([1_000, 2_000, 4_000, 8_000, 15_000, 15_000, 15_000])
  })
})
