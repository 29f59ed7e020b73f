/** BucketHistogram is exposed exactly as prom-client's own Histogram would be. */
import { Histogram, Registry, type RegistryContentType } from 'prom-client'
import { describe, expect, it } from 'vitest'
import { BucketHistogram, WAIT_BUCKETS_SECONDS } from '../src/index.js'

const VALUES = [0, 0.0001, 0.0005, 0.0007, 0.001, 0.02, 0.1, 0.3, 1, 1.5, 9.99, 10, 29, 30, 31, 1_000]

function pair(contentType?: RegistryContentType) {
  const ours = new Registry<RegistryContentType>()
  const theirs = new Registry<RegistryContentType>()
  if (contentType) {
    ours.setContentType(contentType)
    theirs.setContentType(contentType)
  }
  const a = new BucketHistogram({ name: 'lock_wait_seconds', help: 'waits', labelName: 'group', buckets: WAIT_BUCKETS_SECONDS, registers: [ours] })
  const b = new Histogram({ name: 'lock_wait_seconds', help: 'waits', labelNames: ['group'], buckets: [...WAIT_BUCKETS_SECONDS], registers: [theirs] })
  const observe = (group: string, value: number) => {
    a.labels(group).observe(value)
    b.labels({ group }).observe(value)
  }
  return { ours, theirs, a, b, observe }
}

describe('BucketHistogram', () => {
  it('writes the same exposition as prom-client\'s Histogram, bounds inclusive, +Inf above the last', async () => {
    const { ours, theirs, observe } = pair()
    for (const v of VALUES) observe('order', v)
    observe('payment', 0.004)
    expect(await ours.metrics()).toBe(await theirs.metrics())
    expect(await ours.metrics()).toContain('lock_wait_seconds_bucket{le="0.0005",group="order"} 3\n')
    expect(await ours.metrics()).toContain('lock_wait_seconds_bucket{le="30",group="order"} 14\n')
    expect(await ours.metrics()).toContain('lock_wait_seconds_bucket{le="+Inf",group="order"} 16\n')
  })

  it('writes the same OpenMetrics', async () => {
    const { ours, theirs, observe } = pair(Registry.OPENMETRICS_CONTENT_TYPE)
    for (const v of VALUES) observe('order', v)
    expect(await ours.metrics()).toBe(await theirs.metrics())
  })

  it('gives the same JSON with default labels, and writes them on every sample', async () => {
    const { ours, theirs, observe } = pair()
    ours.setDefaultLabels({ service: 'shop' })
    theirs.setDefaultLabels({ service: 'shop' })
    for (const v of VALUES) observe('order', v)
    expect(await ours.getMetricsAsJSON()).toEqual(await theirs.getMetricsAsJSON())
    // prom-client puts default labels before `group`, we put them after: same series to Prometheus.
    const samples = (await ours.metrics()).split('\n').filter((l) => l.startsWith('lock_wait_seconds_'))
    expect(samples).toHaveLength(WAIT_BUCKETS_SECONDS.length + 3)
    for (const line of samples) expect(line).toMatch(/[{,]service="shop"[,}]/)
  })

  it('ignores NaN and infinities instead of throwing from the event path', async () => {
    const { ours, a } = pair()
    a.labels('order').observe(Number.NaN)
    a.labels('order').observe(Number.POSITIVE_INFINITY)
    expect(await ours.metrics()).toContain('lock_wait_seconds_count{group="order"} 0\n')
  })

  it('zeroes its series on registry.resetMetrics() and keeps them exposed', async () => {
    const { ours, a } = pair()
    const series = a.labels('order')
    series.observe(0.2)
    ours.resetMetrics()
    expect(await ours.metrics()).toContain('lock_wait_seconds_count{group="order"} 0\n')
    series.observe(0.2)
    expect(await ours.metrics()).toContain('lock_wait_seconds_count{group="order"} 1\n')
    expect(ours.getSingleMetric('lock_wait_seconds')).toBe(a)
  })
})
