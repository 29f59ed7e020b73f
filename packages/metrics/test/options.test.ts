/** Options are validated before anything is registered or subscribed; prom-client's global registry is never touched. */
import { Counter, register as globalRegistry, Registry } from 'prom-client'
import { describe, expect, it } from 'vitest'
import {
  instrument,
  instrumentFencing,
  InvalidMetricsOptionError,
  METRICS_DEFAULTS,
  MetricConflictError,
  MetricsError,
  metricsHandler,
  type InstrumentOptions,
} from '../src/index.js'
import { connectShared, makeLocker } from './support/redis.js'

const redis = await connectShared()

/** A locker whose listen() records whether anything subscribed. */
function spyLocker() {
  const locker = makeLocker(redis)
  let subscribed = 0
  const listen = locker.listen.bind(locker)
  return {
    locker: { listen: (l: Parameters<typeof listen>[0]) => (subscribed++, listen(l)) },
    subscribed: () => subscribed,
  }
}

describe('options', () => {
  const bad: [string, unknown][] = [
    ['options', 'yes'],
    ['options', null],
    ['registry', {}],
    ['registry', 'global'],
    ['prefix', 'fence lock_'],
    ['prefix', '9lives_'],
    ['prefix', 42],
    ['maxGroups', 0],
    ['maxGroups', 1.5],
    ['maxGroups', 5_000],
    ['maxModels', -1],
    ['groupOf', 'before-colon'],
    ['groups', 'order'],
    ['groups', ['order', '']],
    ['models', [42]],
    // A typo, and an option of the OpenTelemetry path: refused by name, not ignored.
    ['maxgroups', 5],
    ['meterProvider', {}],
  ]
  for (const [field, value] of bad) {
    it(`rejects ${field} = ${JSON.stringify(value) ?? String(value)} with InvalidMetricsOptionError before any registration`, () => {
      const registry = new Registry()
      const spy = spyLocker()
      const options = field === 'options' ? value : { registry, [field]: value }
      let caught: unknown
      try {
        instrument(spy.locker, options as InstrumentOptions)
      } catch (error) {
        caught = error
      }
      expect(caught).toBeInstanceOf(InvalidMetricsOptionError)
      expect(caught).toBeInstanceOf(MetricsError)
      expect((caught as InvalidMetricsOptionError).name).toBe('InvalidMetricsOptionError')
      expect((caught as InvalidMetricsOptionError).field).toBe(field)
      expect(registry.getMetricsAsArray()).toHaveLength(0)
      expect(spy.subscribed()).toBe(0)
    })
  }

  it('rejects more groups than maxGroups', () => {
    expect(() => instrument(makeLocker(redis), { groups: ['a', 'b', 'c'], maxGroups: 2 })).toThrow(InvalidMetricsOptionError)
  })

  it('rejects something that is not a locker', () => {
    for (const locker of [undefined, null, {}, redis]) {
      expect(() => instrument(locker as never)).toThrow(InvalidMetricsOptionError)
    }
  })

  it('rejects bad fencing options and a bad handler registry the same way', () => {
    expect(() => instrumentFencing({ maxModels: 0 })).toThrow(InvalidMetricsOptionError)
    // groupOf is an option of instrument(), not of instrumentFencing().
    expect(() => instrumentFencing({ groupOf: () => 'x' } as never)).toThrow(expect.objectContaining({ name: 'InvalidMetricsOptionError', field: 'groupOf' }))
    expect(() => instrumentFencing({ models: ['A', 'B'], maxModels: 1 })).toThrow(InvalidMetricsOptionError)
    expect(() => instrumentFencing({ registry: {} as Registry })).toThrow(InvalidMetricsOptionError)
    expect(() => metricsHandler(undefined as never)).toThrow(InvalidMetricsOptionError)
  })

  it('throws MetricConflictError, registering nothing, when a name is taken by a metric it did not make', () => {
    const registry = new Registry()
    new Counter({ name: 'fencelock_fencing_rejections_total', help: 'someone else', registers: [registry] })
    const spy = spyLocker()
    let caught: unknown
    try {
      instrument(spy.locker, { registry })
    } catch (error) {
      caught = error
    }
    expect(caught).toBeInstanceOf(MetricConflictError)
    expect((caught as MetricConflictError).metricName).toBe('fencelock_fencing_rejections_total')
    expect(registry.getMetricsAsArray().map((m) => m.name)).toEqual(['fencelock_fencing_rejections_total'])
    expect(spy.subscribed()).toBe(0)
  })

  it('registers afresh after registry.clear(), and under another prefix side by side', () => {
    const registry = new Registry()
    instrument(makeLocker(redis), { registry })
    registry.clear()
    expect(() => instrument(makeLocker(redis), { registry })).not.toThrow()
    instrument(makeLocker(redis), { registry, prefix: 'canary_fencelock_' })
    const names = registry.getMetricsAsArray().map((m) => m.name)
    expect(names).toContain('fencelock_acquire_total')
    expect(names).toContain('canary_fencelock_acquire_total')
  })

  it('exposes its defaults frozen', () => {
    expect(Object.isFrozen(METRICS_DEFAULTS)).toBe(true)
    expect(METRICS_DEFAULTS.prefix).toBe('fencelock_')
  })
})

describe('registries', () => {
  it('never touches prom-client\'s global registry, and makes a registry of its own when given none', async () => {
    const before = globalRegistry.getMetricsAsArray().length
    const metrics = instrument(makeLocker(redis))
    const fencing = instrumentFencing()
    expect(metrics.registry).not.toBe(globalRegistry)
    expect(fencing.registry).not.toBe(globalRegistry)
    expect(fencing.registry).not.toBe(metrics.registry)
    expect(globalRegistry.getMetricsAsArray().length).toBe(before)
    expect(await globalRegistry.metrics()).not.toContain('fencelock_')
    expect(metrics.registry.getMetricsAsArray().map((m) => m.name).sort()).toEqual([
      'fencelock_acquire_total',
      'fencelock_fencing_rejections_total',
      'fencelock_held',
      'fencelock_hold_seconds',
      'fencelock_is_leader',
      'fencelock_leader_changes_total',
      'fencelock_lost_total',
      'fencelock_release_total',
      'fencelock_renew_total',
      'fencelock_wait_seconds',
    ])
  })
})
