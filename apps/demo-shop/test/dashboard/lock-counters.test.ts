// The dashboard's reading of /metrics, on the text the metrics package really writes, and its
// sliding window over several instances (restarts, instances that do not answer).
import type { LockEvent } from '@fencelock/lock'
import { instrument } from '@fencelock/metrics'
import { Registry } from 'prom-client'
import { describe, expect, it } from 'vitest'
import { MetricsWindow } from '../../src/dashboard/metrics-window.js'
import { bucketQuantile, parseLockCounters, type LockCounters } from '../../src/dashboard/prometheus-text.js'

/** A registry filled by the metrics package from lock events we emit. */
function instrumented() {
  let emit: (event: LockEvent) => void = () => {}
  const registry = new Registry()
  const metrics = instrument(
    {
      listen: (fn: (event: LockEvent) => void) => {
        emit = fn
        return () => {}
      },
    } as never,
    { registry, groups: ['product', 'order'] },
  )
  return { registry, metrics, emit: (event: LockEvent) => emit(event) }
}

const acquired = (resource: string, token: bigint, waitedMs: number): LockEvent => ({ type: 'acquired', resource, token, ttlMs: 1000, waitedMs, attempts: 1 })

describe('parseLockCounters', () => {
  it('sums the metrics package’s series over groups', async () => {
    const { registry, metrics, emit } = instrumented()
    emit(acquired('product:a', 1n, 0.2))
    emit(acquired('order:1', 2n, 30))
    emit(acquired('order:2', 3n, 700))
    emit({ type: 'timeout', resource: 'order:3', waitedMs: 10_000 })
    emit({ type: 'released', resource: 'product:a', token: 1n, heldMs: 5, outcome: 'released', wasLost: false })
    emit({ type: 'released', resource: 'order:1', token: 2n, heldMs: 1500, outcome: 'expired', wasLost: false })
    emit({ type: 'lost', resource: 'order:2', token: 3n, heldMs: 1200, reason: 'expired' } as LockEvent)
    metrics.onFencingRejection({ model: 'Product' } as never)
    metrics.onFencingRejection({ model: 'Order' } as never)
    const c = parseLockCounters(await registry.metrics())
    expect([c.acquired, c.acquires, c.released, c.expired, c.lost, c.fencingRejections]).toEqual([3, 4, 1, 1, 1, 2])
    // Cumulative buckets summed over both groups: 0.2 ms ≤ 0.5 ms, 30 ms ≤ 50 ms, 700 ms ≤ 1 s, 10 s ≤ 10 s.
    expect(c.waitBuckets.get(0.0005)).toBe(1)
    expect(c.waitBuckets.get(0.05)).toBe(2)
    expect(c.waitBuckets.get(1)).toBe(3)
    expect(c.waitBuckets.get(10)).toBe(4)
    expect(c.waitBuckets.get(Infinity)).toBe(4)
  })

  it('skips what it does not know and lines it cannot read', () => {
    const c = parseLockCounters('# HELP x\nprocess_cpu 3\nfencelock_lost_total{group="a"} 2\nfencelock_lost_total{group="b"} NaN\nfencelock_lost_total{oops 7\n')
    expect(c.lost).toBe(2)
  })
})

describe('bucketQuantile', () => {
  it('interpolates inside the bucket like histogram_quantile, and stops at the highest finite bound', () => {
    const b = new Map([
      [0.1, 50],
      [1, 100],
      [Infinity, 100],
    ])
    expect(bucketQuantile(0.5, b)).toBeCloseTo(0.1)
    expect(bucketQuantile(0.75, b)).toBeCloseTo(0.55)
    expect(bucketQuantile(0.99, new Map([[1, 10], [Infinity, 20]]))).toBe(1)
    expect(bucketQuantile(0.5, new Map([[Infinity, 0]]))).toBeNull()
  })
})

const counters = (over: Partial<LockCounters> = {}): LockCounters => ({
  acquired: 0,
  acquires: 0,
  released: 0,
  expired: 0,
  lost: 0,
  fencingRejections: 0,
  waitBuckets: new Map(),
  ...over,
})

describe('MetricsWindow', () => {
  it('sums each instance’s increase, as rates and ratios over the window', () => {
    const w = new MetricsWindow({ windowSamples: 2 })
    w.add(0, new Map([['a', counters({ acquired: 10, acquires: 10, released: 10 })], ['b', counters()]]))
    const p = w.add(1_000, new Map([['a', counters({ acquired: 20, acquires: 22, released: 18, expired: 1, lost: 1, fencingRejections: 1 })], ['b', counters({ acquires: 2 })]]))
    // Window: first sample (10 acquires, taken from zero) + second (12 from a, 2 from b), over 2 s.
    expect(p.acquireRate).toBe(12)
    expect(p.successRatio).toBeCloseTo(20 / 24)
    expect(p.expiryRatio).toBeCloseTo(2 / 20)
    expect([p.lostLocks, p.fencingRejections, p.instancesUp, p.instancesWatched]).toEqual([1, 1, 2, 2])
  })

  it('counts a restarted instance from zero, and a silent one when it answers again', () => {
    const w = new MetricsWindow({ windowSamples: 1 })
    w.add(0, new Map([['a', counters({ lost: 5 })]]))
    expect(w.add(1_000, new Map([['a', counters({ lost: 2 })]])).lostLocks).toBe(2)
    const silent = w.add(2_000, new Map([['a', undefined]]))
    expect([silent.lostLocks, silent.instancesUp, silent.instancesWatched]).toEqual([0, 0, 1])
    expect(w.add(3_000, new Map([['a', counters({ lost: 6 })]])).lostLocks).toBe(4)
  })

  it('gives wait quantiles in ms from the window’s buckets, none without waits', () => {
    const w = new MetricsWindow({ windowSamples: 5 })
    const empty = w.add(0, new Map([['a', counters()]]))
    expect([empty.waitP50Ms, empty.waitP99Ms, empty.successRatio, empty.expiryRatio]).toEqual([null, null, null, null])
    const p = w.add(1_000, new Map([['a', counters({ waitBuckets: new Map([[0.01, 98], [1, 100], [Infinity, 100]]) })]]))
    expect(p.waitP50Ms).toBeCloseTo(5.102, 2)
    expect(p.waitP99Ms).toBeCloseTo(505, 0)
  })
})
