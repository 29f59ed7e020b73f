/** Fencing rejections, counted through the hook that `fencing({ onRejection })` calls. */
import type { FencingOptions } from '@fencelock/fencing'
import { Registry } from 'prom-client'
import { describe, expect, it } from 'vitest'
import { instrument, instrumentFencing, OTHER_LABEL, type FencingRejection } from '../src/index.js'
import { labelValues, valueOf } from './support/metric-values.js'
import { connectShared, makeLocker } from './support/redis.js'

const redis = await connectShared()

const rejection = (model: string, token = 5n): FencingRejection => ({ model, operation: 'update', token, storedToken: token + 1n })

describe('onFencingRejection', () => {
  it('fits the fencing extension\'s onRejection option (checked by the type checker)', () => {
    const onRejection: FencingOptions['onRejection'] = instrumentFencing().onFencingRejection
    expect(typeof onRejection).toBe('function')
  })

  it('counts rejections by model, as a bound function', async () => {
    const registry = new Registry()
    const { onFencingRejection } = instrument(makeLocker(redis), { registry })
    const hook: (r: FencingRejection) => void = onFencingRejection
    hook(rejection('Product'))
    hook(rejection('Product'))
    hook({ model: 'Payment', operation: 'create', token: 1n, storedToken: undefined })
    expect(await valueOf(registry, 'fencelock_fencing_rejections_total', { model: 'Product' })).toBe(2)
    expect(await valueOf(registry, 'fencelock_fencing_rejections_total', { model: 'Payment' })).toBe(1)
  })

  it('works without a locker (instrumentFencing), in a registry of its own or a given one', async () => {
    const own = instrumentFencing()
    own.onFencingRejection(rejection('Product'))
    expect(await valueOf(own.registry, 'fencelock_fencing_rejections_total', { model: 'Product' })).toBe(1)
    expect(own.registry.getMetricsAsArray().map((m) => m.name)).toEqual(['fencelock_fencing_rejections_total'])

    const registry = new Registry()
    const a = instrumentFencing({ registry })
    const b = instrument(makeLocker(redis), { registry })
    expect(b.metrics.fencingRejectionsTotal).toBe(a.metrics.fencingRejectionsTotal)
    a.onFencingRejection(rejection('Order'))
    b.onFencingRejection(rejection('Order'))
    expect(await valueOf(registry, 'fencelock_fencing_rejections_total', { model: 'Order' })).toBe(2)
  })

  it('creates the series of the models option at zero, so rate() sees the first rejection', async () => {
    const { registry, onFencingRejection } = instrumentFencing({ models: ['Product', 'Payment'] })
    expect(await valueOf(registry, 'fencelock_fencing_rejections_total', { model: 'Product' })).toBe(0)
    expect(await valueOf(registry, 'fencelock_fencing_rejections_total', { model: 'Payment' })).toBe(0)
    onFencingRejection(rejection('Product'))
    expect(await valueOf(registry, 'fencelock_fencing_rejections_total', { model: 'Product' })).toBe(1)
  })

  it('never throws, and bounds the model label', async () => {
    const { registry, onFencingRejection } = instrumentFencing({ maxModels: 2 })
    expect(() => onFencingRejection(undefined as never)).not.toThrow()
    expect(() => onFencingRejection({} as never)).not.toThrow()
    for (const model of ['A', 'B', 'C', 'D']) onFencingRejection(rejection(model))
    onFencingRejection(rejection('M'.repeat(500)))
    expect(await labelValues(registry, 'fencelock_fencing_rejections_total', 'model')).toEqual(new Set(['A', 'B', OTHER_LABEL]))
    expect(await valueOf(registry, 'fencelock_fencing_rejections_total', { model: OTHER_LABEL })).toBe(5)
  })
})
