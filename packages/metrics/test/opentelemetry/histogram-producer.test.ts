/**
 * `lockHistogramProducer()`: the wait and hold histograms counted by this package and handed to
 * the real SDK's reader as a MetricProducer. The same real locks are instrumented through two
 * meter providers at once, one recording into the SDK's histograms and one into the producer:
 * what each reader exports must be the same data (names, descriptors, scope, attributes, bounds,
 * counts, sum, min, max). Then the rules around it: one choice per meter provider, one meter
 * provider per producer, nothing subscribed when refused, and a warning when no reader collects
 * the producer.
 */
import { diag, DiagLogLevel, type DiagLogger } from '@opentelemetry/api'
import { DataPointType, type HistogramMetricData } from '@opentelemetry/sdk-metrics'
import { afterEach, describe, expect, it } from 'vitest'
import {
  instrumentOpenTelemetry,
  InvalidMetricsOptionError,
  lockHistogramProducer,
  OTEL_ATTRIBUTES as A,
  OTEL_INSTRUMENTS as I,
  SCOPE_NAME,
  SCOPE_VERSION,
} from '../../src/opentelemetry/index.js'
import { otelMetrics } from '../support/otel.js'
import { connectShared, makeLocker, resourceIn, sleep, uniqueGroup } from '../support/redis.js'

const redis = await connectShared()

afterEach(() => diag.disable())

describe('lockHistogramProducer(): the histograms handed over aggregated', () => {
  it('exports the same wait and hold data as the SDK histograms over the same real locks', async () => {
    const sdk = otelMetrics()
    const produced = otelMetrics(undefined, 'a lockHistogramProducer()')
    const locker = makeLocker(redis)
    const other = makeLocker(redis)
    const group = uniqueGroup('prod')
    instrumentOpenTelemetry(locker, { meterProvider: sdk.meterProvider, traces: false })
    instrumentOpenTelemetry(locker, {
      meterProvider: produced.meterProvider,
      histograms: produced.histograms,
      traces: false,
    })
    // Free acquires, a wait behind a holder, a timeout, holds of several lengths.
    for (let i = 0; i < 5; i++) await (await locker.acquire(resourceIn(group))).release()
    const contended = resourceIn(group)
    const holder = await other.acquire(contended)
    const waiting = locker.acquire(contended, { waitMs: 5_000 })
    await sleep(30)
    await holder.release()
    const won = await waiting
    await sleep(20)
    await won.release()
    const blocker = await other.acquire(contended)
    await expect(locker.acquire(contended, { waitMs: 60 })).rejects.toThrow()
    await blocker.release()

    const [a, b] = await Promise.all([sdk.collect(), produced.collect()])
    for (const name of [I.waitTime, I.holdTime]) {
      const fromSdk = a.metric(name) as HistogramMetricData
      const fromProducer = b.metric(name) as HistogramMetricData
      expect(fromProducer, name).toBeDefined()
      expect(fromProducer.dataPointType).toBe(DataPointType.HISTOGRAM)
      expect(fromProducer.aggregationTemporality).toBe(fromSdk.aggregationTemporality)
      expect(fromProducer.descriptor).toEqual({
        name: fromSdk.descriptor.name,
        description: fromSdk.descriptor.description,
        unit: fromSdk.descriptor.unit,
        valueType: fromSdk.descriptor.valueType,
      })
      const pointOf = (data: HistogramMetricData) => {
        const points = data.dataPoints.filter((p) => p.attributes[A.group] === group)
        expect(points).toHaveLength(1)
        return points[0]!
      }
      const p = pointOf(fromProducer)
      const q = pointOf(fromSdk)
      expect(p.attributes).toEqual(q.attributes)
      expect(p.value.buckets).toEqual(q.value.buckets)
      expect(p.value.count).toBe(q.value.count)
      expect(p.value.sum).toBeCloseTo(q.value.sum!, 12)
      expect(p.value.min).toBe(q.value.min)
      expect(p.value.max).toBe(q.value.max)
      // Start at the first record, end at the collection.
      const ms = (t: readonly [number, number]) => t[0] * 1_000 + t[1] / 1e6
      expect(ms(p.startTime)).toBeLessThanOrEqual(ms(p.endTime))
      expect(Math.abs(ms(p.startTime) - ms(q.startTime))).toBeLessThan(1_000)
    }
    expect(
      (b.metric(I.waitTime) as HistogramMetricData).dataPoints.find((p) => p.attributes[A.group] === group)!.value
        .count,
    ).toBe(7)
    expect(
      (b.metric(I.holdTime) as HistogramMetricData).dataPoints.find((p) => p.attributes[A.group] === group)!.value
        .count,
    ).toBe(6)
    // Under this package's scope, once: the reader merged the producer's scope beside the SDK's.
    const scopes = (await produced.scopes()).filter((s) => s.name === SCOPE_NAME)
    expect(scopes.every((s) => s.version === SCOPE_VERSION)).toBe(true)
    const names = scopes.flatMap((s) => s.metrics)
    expect(names.filter((n) => n === I.waitTime)).toHaveLength(1)
    expect(names.filter((n) => n === I.holdTime)).toHaveLength(1)
  })

  it('reports nothing before the first record, and nothing when collected before any instrumentOpenTelemetry()', async () => {
    const producer = lockHistogramProducer()
    expect((await producer.collect()).resourceMetrics.scopeMetrics).toEqual([])
    const { meterProvider, histograms, collect } = otelMetrics(undefined, 'a lockHistogramProducer()')
    const group = uniqueGroup('none')
    instrumentOpenTelemetry(makeLocker(redis), { meterProvider, histograms, groups: [group] })
    const snapshot = await collect()
    expect(snapshot.value(I.acquires, { [A.group]: group, [A.acquireOutcome]: 'acquired' })).toBe(0)
    expect(snapshot.metric(I.waitTime)).toBeUndefined()
    expect(snapshot.metric(I.holdTime)).toBeUndefined()
  })
})

describe('lockHistogramProducer(): one choice per meter provider', () => {
  /** A locker whose subscriptions are counted. */
  function countedLocker() {
    const locker = makeLocker(redis)
    let subscribed = 0
    return {
      locker: { listen: (l: Parameters<typeof locker.listen>[0]) => (subscribed++, locker.listen(l)) },
      subscribed: () => subscribed,
    }
  }

  function refusal(run: () => unknown): InvalidMetricsOptionError {
    let caught: unknown
    try {
      run()
    } catch (error) {
      caught = error
    }
    expect(caught).toBeInstanceOf(InvalidMetricsOptionError)
    expect((caught as InvalidMetricsOptionError).field).toBe('histograms')
    return caught as InvalidMetricsOptionError
  }

  it('refuses a producer for a meter provider whose histograms already go through the SDK, and the reverse, before subscribing', () => {
    const viaSdk = otelMetrics()
    instrumentOpenTelemetry(makeLocker(redis), { meterProvider: viaSdk.meterProvider })
    const late = countedLocker()
    const error = refusal(() =>
      instrumentOpenTelemetry(late.locker, {
        meterProvider: viaSdk.meterProvider,
        histograms: lockHistogramProducer(),
      }),
    )
    expect(error.rule).toMatch(/same for every instrumentOpenTelemetry\(\) of one meter provider.*through the SDK/)
    expect(late.subscribed()).toBe(0)

    const viaProducer = otelMetrics(undefined, 'a lockHistogramProducer()')
    instrumentOpenTelemetry(makeLocker(redis), {
      meterProvider: viaProducer.meterProvider,
      histograms: viaProducer.histograms,
    })
    const forgot = countedLocker()
    expect(
      refusal(() => instrumentOpenTelemetry(forgot.locker, { meterProvider: viaProducer.meterProvider })).rule,
    ).toMatch(/pass that producer/)
    expect(
      refusal(() =>
        instrumentOpenTelemetry(forgot.locker, {
          meterProvider: viaProducer.meterProvider,
          histograms: lockHistogramProducer(),
        }),
      ).rule,
    ).toMatch(/pass that producer/)
    expect(forgot.subscribed()).toBe(0)
  })

  it('refuses one producer for two meter providers', () => {
    const first = otelMetrics(undefined, 'a lockHistogramProducer()')
    instrumentOpenTelemetry(makeLocker(redis), { meterProvider: first.meterProvider, histograms: first.histograms })
    const second = otelMetrics()
    const late = countedLocker()
    expect(
      refusal(() =>
        instrumentOpenTelemetry(late.locker, { meterProvider: second.meterProvider, histograms: first.histograms }),
      ).rule,
    ).toMatch(/another meter provider/)
    expect(late.subscribed()).toBe(0)
  })

  it('warns once through diag when the meter is collected but no reader collects its producer', async () => {
    const warnings: string[] = []
    const logger: DiagLogger = {
      error: () => {},
      warn: (message: string) => void warnings.push(message),
      info: () => {},
      debug: () => {},
      verbose: () => {},
    }
    diag.setLogger(logger, DiagLogLevel.WARN)
    // The reader has no metricProducers: the producer is never collected.
    const { meterProvider, collect } = otelMetrics()
    const locker = makeLocker(redis)
    instrumentOpenTelemetry(locker, { meterProvider, histograms: lockHistogramProducer(), traces: false })
    await (await locker.acquire(resourceIn(uniqueGroup('lost')))).release()
    const ours = () => warnings.filter((w) => w.includes('lockHistogramProducer'))
    await collect()
    expect(ours()).toHaveLength(0)
    for (let i = 0; i < 3; i++) await collect()
    expect(ours()).toHaveLength(1)
    expect(ours()[0]).toMatch(/metricProducers/)

    // Registered: never a warning.
    warnings.length = 0
    const fine = otelMetrics(undefined, 'a lockHistogramProducer()')
    instrumentOpenTelemetry(makeLocker(redis), { meterProvider: fine.meterProvider, histograms: fine.histograms })
    for (let i = 0; i < 4; i++) await fine.collect()
    expect(ours()).toHaveLength(0)
  })
})
