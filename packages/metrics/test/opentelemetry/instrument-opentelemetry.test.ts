/**
 * The OpenTelemetry path on the real SDK (MeterProvider + InMemoryMetricExporter) against real
 * Lockers on the shared Redis: every measurement prom-client's `instrument()` exports, with the
 * same values after the same events, under names, units and attributes that follow OpenTelemetry's
 * conventions; attributes bounded; options checked before anything is created.
 */
import { resourceKeys, LockAbortedError, LockTimeoutError, LockUnavailableError, LockLostError } from '@fencelock/lock'
import { DataPointType, type HistogramMetricData, type SumMetricData } from '@opentelemetry/sdk-metrics'
import { Registry } from 'prom-client'
import { describe, expect, it } from 'vitest'
import { instrument } from '../../src/index.js'
import {
  HOLD_BUCKETS_SECONDS,
  instrumentOpenTelemetry,
  InvalidMetricsOptionError,
  OTEL_ATTRIBUTES as A,
  OTEL_INSTRUMENTS as I,
  OPENTELEMETRY_DEFAULTS,
  OTHER_LABEL,
  WAIT_BUCKETS_SECONDS,
  type OpenTelemetryOptions,
} from '../../src/opentelemetry/index.js'
import { histogramOf, labelValues, valueOf } from '../support/metric-values.js'
import { CORRESPONDENCES } from '../support/otel-mapping.js'
import { HISTOGRAM_PATHS, otelMetrics, type MetricsSnapshot } from '../support/otel.js'
import { connectShared, connectThroughProxy, makeLocker, resourceIn, sleep, uniqueGroup } from '../support/redis.js'

const redis = await connectShared()

async function until(condition: () => Promise<boolean> | boolean, ms = 5_000): Promise<void> {
  const end = performance.now() + ms
  while (!(await condition())) {
    if (performance.now() > end) throw new Error(`condition not met within ${ms} ms`)
    await sleep(10)
  }
}

/** Asserts that every series prom-client has for `labels` has its twin in `snapshot`, with the same value. */
async function expectSameMeasurements(
  registry: Registry,
  snapshot: MetricsSnapshot,
  label: 'group' | 'model',
  value: string,
): Promise<number> {
  let compared = 0
  for (const c of CORRESPONDENCES) {
    if (!(label in c.labels)) continue
    const otelLabel = { [c.labels[label]!]: value, ...c.extra }
    if (c.kind === 'histogram') {
      const prom = await histogramOf(registry, c.prom, { [label]: value })
      const otel = snapshot.histogram(c.otel, otelLabel)
      // prom-client makes a group's histogram series at zero; OpenTelemetry's appear at their first record.
      if (prom?.count === 0 && otel === undefined) continue
      expect(otel, c.otel).toBeDefined()
      expect(otel!.count, c.otel).toBe(prom!.count)
      expect(otel!.sum, c.otel).toBeCloseTo(prom!.sum, 9)
      expect(otel!.buckets, c.otel).toEqual(new Map([...prom!.buckets].map(([le, n]) => [le, n])))
      compared++
      continue
    }
    const outcomes = Object.keys(c.labels).filter((l) => l !== label)
    const promValues = outcomes.length === 0 ? [''] : [...(await labelValues(registry, c.prom, outcomes[0]!))]
    for (const outcome of promValues) {
      const promLabels = outcomes.length === 0 ? { [label]: value } : { [label]: value, [outcomes[0]!]: outcome }
      const otelLabels = outcomes.length === 0 ? otelLabel : { ...otelLabel, [c.labels[outcomes[0]!]!]: outcome }
      const expected = await valueOf(registry, c.prom, promLabels)
      if (expected === undefined) continue
      expect(snapshot.value(c.otel, otelLabels), `${c.otel} ${JSON.stringify(otelLabels)}`).toBe(expected)
      compared++
    }
  }
  return compared
}

describe.each(HISTOGRAM_PATHS)('instrumentOpenTelemetry(locker): metrics, the histograms through %s', (path) => {
  it('exports every measurement of instrument() under its OpenTelemetry name, with the same values, over a mixed run of real locks', async () => {
    const registry = new Registry()
    const { meterProvider, histograms, collect } = otelMetrics(undefined, path)
    const group = uniqueGroup('same')
    const locker = makeLocker(redis)
    const other = makeLocker(redis)
    instrument(locker, { registry, models: ['Product'] })
    const otel = instrumentOpenTelemetry(locker, { meterProvider, histograms, models: ['Product'] })
    // A second locker through a proxy that the run blackholes: Redis errors on acquire and renew.
    const { proxy, client } = await connectThroughProxy({ maxRetriesPerRequest: null })
    await client.ping()
    const flaky = makeLocker(client, { commandTimeoutMs: 80 })
    instrument(flaky, { registry })
    instrumentOpenTelemetry(flaky, { meterProvider, histograms })

    // Free acquires and releases.
    for (let i = 0; i < 3; i++) await (await locker.acquire(resourceIn(group))).release()
    // Contention: a timeout, then a wait that the holder's release ends, then an abort.
    const contended = resourceIn(group)
    let holder = await other.acquire(contended)
    await expect(locker.acquire(contended, { waitMs: 120 })).rejects.toBeInstanceOf(LockTimeoutError)
    const waiting = locker.acquire(contended, { waitMs: 5_000 })
    await sleep(40)
    await holder.release()
    await (await waiting).release()
    holder = await other.acquire(contended)
    const controller = new AbortController()
    setTimeout(() => controller.abort(), 30)
    await expect(locker.acquire(contended, { waitMs: 5_000, signal: controller.signal })).rejects.toBeInstanceOf(
      LockAbortedError,
    )
    await holder.release()
    // A lease that runs out unreleased (lost), then its late release (not counted again).
    const expiring = await locker.acquire(resourceIn(group), { ttlMs: 50 })
    await until(() => expiring.signal.aborted)
    await expiring.release()
    // A key deleted from under a holder without a watchdog: its release finds it gone (expired).
    const taken = resourceIn(group)
    const unwatched = await locker.acquire(taken)
    await redis.del(resourceKeys(locker.options.prefix, taken).lock)
    expect(await unwatched.release()).toBe(false)
    // Watchdog renewals, then a DEL from outside: lost.
    const watched = resourceIn(group)
    const renewed = await locker.acquire(watched, { ttlMs: 300, autoExtend: true })
    await until(async () => ((await valueOf(registry, 'fencelock_renew_total', { group, outcome: 'ok' })) ?? 0) >= 2)
    await redis.del(resourceKeys(locker.options.prefix, watched).lock)
    await until(() => renewed.signal.aborted)
    expect(renewed.signal.reason).toBeInstanceOf(LockLostError)
    // An election won, then given up. Its lease is long enough that its watchdog renews nothing
    // while the two paths are read one after the other below (a renewal in between would differ).
    const election = locker.lead(resourceIn(group), { ttlMs: 30_000, onElected: () => {} })
    await until(() => election.isLeader)
    // One lock still held at the end.
    const kept = await locker.acquire(resourceIn(group))
    // Redis that does not answer: a renewal error and a loss, then an acquire that fails.
    const flakyLock = await flaky.acquire(resourceIn(group), { ttlMs: 600, autoExtend: true })
    proxy.blackhole()
    await until(() => flakyLock.signal.aborted, 3_000)
    await expect(flaky.acquire(resourceIn(group), { waitMs: 0 })).rejects.toBeInstanceOf(LockUnavailableError)
    // A refused fenced write, through each path's hook.
    const rejection = { model: 'Product', operation: 'update', token: 5n, storedToken: 9n }
    instrument(locker, { registry }).onFencingRejection(rejection)
    otel.onFencingRejection(rejection)

    const during = await collect()
    const compared = await expectSameMeasurements(registry, during, 'group', group)
    expect(await expectSameMeasurements(registry, during, 'model', 'Product')).toBe(1)
    // What the run did, as both paths count it.
    const v = (name: string, attributes: Record<string, string> = {}) =>
      during.value(name, { [A.group]: group, ...attributes })
    expect(compared).toBe(15)
    expect(v(I.acquires, { [A.acquireOutcome]: 'acquired' })).toBe(10)
    expect(v(I.acquires, { [A.acquireOutcome]: 'timeout' })).toBe(1)
    expect(v(I.acquires, { [A.acquireOutcome]: 'aborted' })).toBe(1)
    expect(v(I.acquires, { [A.acquireOutcome]: 'error' })).toBe(1)
    expect(v(I.releases, { [A.releaseOutcome]: 'released' })).toBe(4)
    expect(v(I.releases, { [A.releaseOutcome]: 'expired' })).toBe(1)
    expect(v(I.losses)).toBe(3)
    expect(v(I.renewals, { [A.renewalOutcome]: 'ok' })).toBeGreaterThanOrEqual(2)
    expect(v(I.renewals, { [A.renewalOutcome]: 'error' })).toBeGreaterThanOrEqual(1)
    expect(v(I.renewals, { [A.renewalOutcome]: 'lost' })).toBe(2)
    expect(v(I.held)).toBe(2) // `kept` and the election's lease
    expect(v(I.electionWins)).toBe(1)
    expect(v(I.activeTerms)).toBe(1)
    expect(during.histogram(I.waitTime, { [A.group]: group })?.count).toBe(13)
    expect(during.histogram(I.holdTime, { [A.group]: group })?.count).toBe(8)

    await election.stop()
    await kept.release()
    const after = await collect()
    expect(after.value(I.held, { [A.group]: group })).toBe(0)
    expect(after.value(I.activeTerms, { [A.group]: group })).toBe(0)
    expect(await expectSameMeasurements(registry, after, 'group', group)).toBe(compared)
    // Dropped commands never get a reply, so the proxied connection is out of step for good: the
    // proxy and client are closed in afterAll.
  })

  it('names its instruments by the conventions: fencelock.* namespaces, units in the metadata, plural counters, no total, the lock buckets', async () => {
    const { meterProvider, histograms, collect } = otelMetrics(undefined, path)
    const otel = instrumentOpenTelemetry(makeLocker(redis), {
      meterProvider,
      histograms,
      groups: ['order'],
      models: ['Product'],
    })
    const locker = makeLocker(redis)
    instrumentOpenTelemetry(locker, { meterProvider, histograms })
    await (await locker.acquire(resourceIn('order'))).release()
    otel.onFencedWrite({
      model: 'Product',
      operation: 'update',
      token: 2n,
      outcome: 'accepted',
      storedToken: undefined,
    })
    const snapshot = await collect()
    expect(snapshot.names.sort()).toEqual(Object.values(I).sort())
    const kinds: Record<string, { type: DataPointType; monotonic?: boolean; unit: string }> = {
      [I.acquires]: { type: DataPointType.SUM, monotonic: true, unit: '{acquire}' },
      [I.releases]: { type: DataPointType.SUM, monotonic: true, unit: '{release}' },
      [I.losses]: { type: DataPointType.SUM, monotonic: true, unit: '{loss}' },
      [I.renewals]: { type: DataPointType.SUM, monotonic: true, unit: '{renewal}' },
      [I.electionWins]: { type: DataPointType.SUM, monotonic: true, unit: '{win}' },
      [I.fencedWrites]: { type: DataPointType.SUM, monotonic: true, unit: '{write}' },
      [I.held]: { type: DataPointType.SUM, monotonic: false, unit: '{lock}' },
      [I.activeTerms]: { type: DataPointType.SUM, monotonic: false, unit: '{term}' },
      [I.waitTime]: { type: DataPointType.HISTOGRAM, unit: 's' },
      [I.holdTime]: { type: DataPointType.HISTOGRAM, unit: 's' },
    }
    for (const [name, expected] of Object.entries(kinds)) {
      const metric = snapshot.metric(name)!
      expect(metric.descriptor.unit, name).toBe(expected.unit)
      expect(metric.descriptor.description.length, name).toBeGreaterThan(20)
      expect(metric.dataPointType, name).toBe(expected.type)
      if (expected.type === DataPointType.SUM)
        expect((metric as SumMetricData).isMonotonic, name).toBe(expected.monotonic)
      // Lowercase, dot-namespaced under fencelock, snake_case inside a component, no unit or `total` in the name.
      expect(name).toMatch(/^fencelock(\.[a-z]+(_[a-z]+)*)+$/)
      expect(name).not.toMatch(/total|seconds|count$/)
      // Counters count things and say so in the plural; up-down counters and histograms do not.
      if (expected.monotonic === true) expect(name, name).toMatch(/s$/)
    }
    const boundaries = (name: string) =>
      (snapshot.metric(name) as HistogramMetricData).dataPoints[0]!.value.buckets.boundaries
    expect(boundaries(I.waitTime)).toEqual(WAIT_BUCKETS_SECONDS)
    expect(boundaries(I.holdTime)).toEqual(HOLD_BUCKETS_SECONDS)
    // Attribute keys: namespaced, lowercase, the documented ones only.
    const keys = new Set(snapshot.names.flatMap((n) => snapshot.points(n).flatMap((p) => Object.keys(p.attributes))))
    expect([...keys].sort()).toEqual(
      [A.acquireOutcome, A.model, A.writeOutcome, A.group, A.releaseOutcome, A.renewalOutcome].sort(),
    )
  })

  it('bounds its attributes: the group groupOf maps a resource to, capped by maxGroups, never the resource', async () => {
    const { meterProvider, histograms, collect } = otelMetrics(undefined, path)
    const locker = makeLocker(redis)
    const otel = instrumentOpenTelemetry(locker, { meterProvider, histograms, maxGroups: 3, maxModels: 2 })
    const resources = Array.from({ length: 12 }, (_, i) => `${uniqueGroup(`g${i}`)}:${crypto.randomUUID()}`)
    for (const resource of resources) await (await locker.acquire(resource)).release()
    for (const model of ['A', 'B', 'C', 'D'])
      otel.onFencingRejection({ model, operation: 'update', token: 1n, storedToken: 2n })
    const snapshot = await collect()
    const groups = snapshot.attributeValues(I.acquires, A.group)
    expect(groups.size).toBe(4)
    expect(groups.has(OTHER_LABEL)).toBe(true)
    expect([...otel.groups]).toEqual([...groups].filter((g) => g !== OTHER_LABEL))
    expect(snapshot.value(I.acquires, { [A.group]: OTHER_LABEL, [A.acquireOutcome]: 'acquired' })).toBe(9)
    expect(snapshot.attributeValues(I.fencedWrites, A.model)).toEqual(new Set(['A', 'B', OTHER_LABEL]))
    // No attribute value anywhere carries a resource's id.
    const values = snapshot.names.flatMap((n) =>
      snapshot.points(n).flatMap((p) => Object.values(p.attributes).map(String)),
    )
    for (const resource of resources) expect(values.some((v) => v.includes(resource.split(':')[1]!))).toBe(false)
  })

  it('reports the counters of the groups and models options at zero before any event, so rate() sees their first increase', async () => {
    const { meterProvider, histograms, collect } = otelMetrics(undefined, path)
    const group = uniqueGroup('zero')
    instrumentOpenTelemetry(makeLocker(redis), { meterProvider, histograms, groups: [group], models: ['Order'] })
    const snapshot = await collect()
    for (const outcome of ['acquired', 'timeout', 'aborted', 'error'])
      expect(snapshot.value(I.acquires, { [A.group]: group, [A.acquireOutcome]: outcome })).toBe(0)
    for (const outcome of ['released', 'expired'])
      expect(snapshot.value(I.releases, { [A.group]: group, [A.releaseOutcome]: outcome })).toBe(0)
    for (const outcome of ['ok', 'lost', 'error'])
      expect(snapshot.value(I.renewals, { [A.group]: group, [A.renewalOutcome]: outcome })).toBe(0)
    for (const name of [I.losses, I.held, I.electionWins, I.activeTerms])
      expect(snapshot.value(name, { [A.group]: group }), name).toBe(0)
    expect(snapshot.value(I.fencedWrites, { [A.model]: 'Order', [A.writeOutcome]: 'refused' })).toBe(0)
    // OpenTelemetry cannot make a histogram series without a record: none yet.
    expect(snapshot.histogram(I.waitTime, { [A.group]: group })).toBeUndefined()
    expect(snapshot.histogram(I.holdTime, { [A.group]: group })).toBeUndefined()
    // No accepted series until something reports an accepted write.
    expect(snapshot.value(I.fencedWrites, { [A.model]: 'Order', [A.writeOutcome]: 'accepted' })).toBeUndefined()
  })

  it('adds two lockers instrumented through one meter provider into the same points; stop() takes its own held locks off', async () => {
    const { meterProvider, histograms, collect } = otelMetrics(undefined, path)
    const a = makeLocker(redis)
    const b = makeLocker(redis)
    const ia = instrumentOpenTelemetry(a, { meterProvider, histograms })
    const ib = instrumentOpenTelemetry(b, { meterProvider, histograms })
    const group = uniqueGroup('two')
    const la = await a.acquire(resourceIn(group))
    const lb = await b.acquire(resourceIn(group))
    const held = async () => (await collect()).value(I.held, { [A.group]: group })
    expect(await held()).toBe(2)
    expect((await collect()).value(I.acquires, { [A.group]: group, [A.acquireOutcome]: 'acquired' })).toBe(2)
    ia.stop()
    ia.stop()
    expect(await held()).toBe(1)
    await la.release()
    expect((await collect()).value(I.releases, { [A.group]: group, [A.releaseOutcome]: 'released' })).toBe(0)
    await lb.release()
    expect(await held()).toBe(0)
    expect((await collect()).value(I.releases, { [A.group]: group, [A.releaseOutcome]: 'released' })).toBe(1)
    ib.stop()
  })
})

describe('instrumentOpenTelemetry(locker): options', () => {
  /** A meter provider that counts getMeter() calls, and a locker that counts subscriptions. */
  function spies() {
    const { meterProvider } = otelMetrics()
    let meters = 0
    let subscribed = 0
    const locker = makeLocker(redis)
    return {
      meterProvider: {
        getMeter: (...args: Parameters<typeof meterProvider.getMeter>) => (meters++, meterProvider.getMeter(...args)),
      },
      locker: { listen: (l: Parameters<typeof locker.listen>[0]) => (subscribed++, locker.listen(l)) },
      created: () => meters + subscribed,
    }
  }
  const bad: [string, unknown][] = [
    ['options', 'yes'],
    ['options', null],
    ['meterProvider', {}],
    ['meterProvider', 'global'],
    ['tracerProvider', { getMeter() {} }],
    ['traces', 'yes'],
    ['spanResource', 1],
    ['maxGroups', 0],
    ['maxGroups', 1.5],
    ['maxModels', 5_000],
    ['groupOf', 'before-colon'],
    ['groups', ['order', '']],
    ['models', [42]],
    // Options of the prom-client path, and typos, are not options here.
    ['histograms', {}],
    ['histograms', 'producer'],
    // A MetricProducer, but not one of ours: it would not receive the lock's records.
    ['histograms', { collect: async () => ({ resourceMetrics: { scopeMetrics: [] }, errors: [] }) }],
    ['registry', new Registry()],
    ['prefix', 'fencelock_'],
    ['maxgroups', 5],
  ]
  for (const [field, value] of bad) {
    it(`rejects ${field} = ${JSON.stringify(value) ?? String(value)} with InvalidMetricsOptionError naming it, before any instrument or subscription`, () => {
      const spy = spies()
      const options = field === 'options' ? value : { meterProvider: spy.meterProvider, [field]: value }
      let caught: unknown
      try {
        instrumentOpenTelemetry(spy.locker, options as OpenTelemetryOptions)
      } catch (error) {
        caught = error
      }
      expect(caught).toBeInstanceOf(InvalidMetricsOptionError)
      expect((caught as InvalidMetricsOptionError).field).toBe(field)
      expect(spy.created()).toBe(0)
    })
  }

  it('exposes its defaults frozen', () => {
    expect(Object.isFrozen(OPENTELEMETRY_DEFAULTS)).toBe(true)
    expect(OPENTELEMETRY_DEFAULTS).toEqual({ traces: true, spanResource: false, maxGroups: 20, maxModels: 50 })
  })

  it('rejects something that is not a locker, and more groups than maxGroups', () => {
    for (const locker of [undefined, null, {}, redis])
      expect(() => instrumentOpenTelemetry(locker as never)).toThrow(InvalidMetricsOptionError)
    expect(() => instrumentOpenTelemetry(makeLocker(redis), { groups: ['a', 'b', 'c'], maxGroups: 2 })).toThrow(
      InvalidMetricsOptionError,
    )
  })
})
