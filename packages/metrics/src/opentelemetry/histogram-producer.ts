/**
 * The wait and hold histograms counted here and handed to the SDK already aggregated, through a
 * `MetricProducer` the application registers with its reader. Why: the SDK's `Histogram.record()`
 * finds the series of its attributes by hashing them on every call (sorted keys, then
 * `JSON.stringify`), about 0.5-0.7 µs here, and the lock records twice per acquire + release; at
 * 50 workers on one connection that was most of the OpenTelemetry path's cost. Here a record is a
 * bucket search over the lock's bounds on a series looked up once per group, as on the
 * prom-client path (bucket-histogram.ts).
 *
 * The data goes out cumulative, under the same scope, names, units, descriptions, attributes and
 * bucket bounds as the SDK's histograms would have; a View does not apply to it (it never passes
 * through the SDK's aggregation), and the reader keeps the SDK's own Resource when it merges a
 * producer's output (`MetricReader.collect`).
 */
import { diag, ValueType, type Attributes, type HrTime } from '@opentelemetry/api'
import type { CollectionResult, HistogramMetricData, MetricData, MetricProducer } from '@opentelemetry/sdk-metrics'
import { InvalidMetricsOptionError } from '../errors.js'
import { bucketIndex } from '../measurements.js'
import { OTEL_INSTRUMENTS as I, SCOPE_NAME, SCOPE_VERSION } from './names.js'

/**
 * A `MetricProducer` of the lock's wait and hold histograms, made by
 * {@link lockHistogramProducer}: give it to your metric reader (`metricProducers: [producer]`)
 * and to `instrumentOpenTelemetry(locker, { histograms: producer })`.
 */
export interface LockHistogramProducer extends MetricProducer {
  /** The histograms' data as the reader merges it: cumulative, this package's scope. */
  collect(): Promise<CollectionResult>
}

/** What the two histograms say, for the SDK's descriptors and the producer's, in one place. */
export const HISTOGRAM_DESCRIPTIONS = Object.freeze({
  wait: 'Time an acquire waited until it got the lock, timed out, was aborted or failed.',
  hold: 'Time a lock was held, from the acquire that won it to its release or its loss.',
})

/** `DataPointType.HISTOGRAM` and `AggregationTemporality.CUMULATIVE` of the SDK (kept equal by a test): no run-time import of the SDK. */
const HISTOGRAM_POINT = 0 as HistogramMetricData['dataPointType']
const CUMULATIVE = 1 as MetricData['aggregationTemporality']

const hrTimeOf = (ms: number): HrTime => [Math.floor(ms / 1000), Math.round((ms % 1000) * 1e6)]

/** One group's histogram, cumulative since its first record: plain counts. */
export class CumulativeHistogram {
  readonly attributes: Attributes
  readonly #bounds: readonly number[]
  /** Observations per bucket, not cumulative; the last slot is above every bound. */
  readonly #counts: Float64Array
  #sum = 0
  #count = 0
  #min = Infinity
  #max = -Infinity
  /** Wall-clock ms of the first record (the point's start time); 0 until then. */
  #since = 0

  constructor(attributes: Attributes, bounds: readonly number[]) {
    this.attributes = attributes
    this.#bounds = bounds
    this.#counts = new Float64Array(bounds.length + 1)
  }

  /** Records one value, in seconds. NaN and infinities are ignored. */
  record(value: number): void {
    if (!Number.isFinite(value)) return
    this.#counts[bucketIndex(this.#bounds, value)]!++
    this.#sum += value
    if (this.#count++ === 0) this.#since = Date.now()
    if (value < this.#min) this.#min = value
    if (value > this.#max) this.#max = value
  }

  /** The point to export at `endMs`; undefined before the first record (OpenTelemetry's series appear at their first record). */
  point(endMs: number): HistogramMetricData['dataPoints'][number] | undefined {
    if (this.#count === 0) return undefined
    return {
      attributes: this.attributes,
      startTime: hrTimeOf(this.#since),
      endTime: hrTimeOf(endMs),
      value: {
        buckets: { boundaries: [...this.#bounds], counts: Array.from(this.#counts) },
        sum: this.#sum,
        count: this.#count,
        min: this.#min,
        max: this.#max,
      },
    }
  }
}

/** The wait and hold histograms of one group, as the producer reads them. */
export interface HistogramPair {
  readonly wait: CumulativeHistogram
  readonly hold: CumulativeHistogram
}

/** What a producer reads at each collection: the pairs of every group of the meter it serves. */
export type HistogramSource = () => Iterable<HistogramPair>

class Producer implements LockHistogramProducer {
  #source: HistogramSource | undefined
  /** Collections of this producer, and of the SDK meter it serves (seen by its batch callback). */
  #collections = 0
  #meterCollections = 0
  #warned = false

  /** @internal Binds the one meter's groups this producer reports. */
  bind(source: HistogramSource): void {
    this.#source = source
  }

  get bound(): boolean {
    return this.#source !== undefined
  }

  /**
   * @internal Called at each collection of the meter whose histograms this producer reports: a
   * meter collected twice while this producer never was means no reader has it in its
   * `metricProducers`, and the histograms are exported nowhere. Said once, through `diag`.
   */
  meterCollected(): void {
    if (++this.#meterCollections < 2 || this.#collections > 0 || this.#warned) return
    this.#warned = true
    diag.warn(
      '@fencelock/metrics: the lock histograms (fencelock.lock.wait_time, hold_time) go to a lockHistogramProducer() that no reader collects: add it to the metricProducers of the reader of this meter provider',
    )
  }

  async collect(): Promise<CollectionResult> {
    this.#collections++
    const now = Date.now()
    const wait: HistogramMetricData['dataPoints'] = []
    const hold: HistogramMetricData['dataPoints'] = []
    for (const pair of this.#source?.() ?? []) {
      const w = pair.wait.point(now)
      if (w) wait.push(w)
      const h = pair.hold.point(now)
      if (h) hold.push(h)
    }
    const metrics: MetricData[] = []
    if (wait.length > 0) metrics.push(histogramData(I.waitTime, HISTOGRAM_DESCRIPTIONS.wait, wait))
    if (hold.length > 0) metrics.push(histogramData(I.holdTime, HISTOGRAM_DESCRIPTIONS.hold, hold))
    return {
      // The reader keeps the SDK's Resource and reads only `scopeMetrics` of a producer's result.
      resourceMetrics: {
        resource: NO_RESOURCE,
        scopeMetrics: metrics.length === 0 ? [] : [{ scope: { name: SCOPE_NAME, version: SCOPE_VERSION }, metrics }],
      },
      errors: [],
    }
  }
}

function histogramData(
  name: string,
  description: string,
  dataPoints: HistogramMetricData['dataPoints'],
): HistogramMetricData {
  return {
    descriptor: { name, description, unit: 's', valueType: ValueType.DOUBLE },
    aggregationTemporality: CUMULATIVE,
    dataPointType: HISTOGRAM_POINT,
    dataPoints,
  }
}

/** A Resource with nothing in it, for the result's shape: `MetricReader.collect()` replaces it by the SDK's. */
const NO_RESOURCE = Object.freeze({
  attributes: {},
  asyncAttributesPending: false,
  schemaUrl: undefined,
  waitForAsyncAttributes: async () => {},
  merge: (other: unknown) => other,
  getRawAttributes: () => [],
}) as unknown as CollectionResult['resourceMetrics']['resource']

const made = new WeakSet<object>()

/**
 * A `MetricProducer` for the lock's wait and hold histograms, counted by this package and handed
 * to the SDK aggregated at each collection: the cheap way to export them (see docs/METRICS.md,
 * "OpenTelemetry"). Register it with the reader that reads the meter provider, and pass it to
 * every `instrumentOpenTelemetry()` of that meter provider:
 *
 * @example
 * ```ts
 * const histograms = lockHistogramProducer()
 * const reader = new PeriodicExportingMetricReader({ exporter, metricProducers: [histograms] })
 * const meterProvider = new MeterProvider({ readers: [reader] })
 * instrumentOpenTelemetry(locker, { meterProvider, histograms })
 * ```
 */
export function lockHistogramProducer(): LockHistogramProducer {
  const producer = new Producer()
  made.add(producer)
  return producer
}

/** @internal The producer of the `histograms` option, or undefined; a typed error for anything else. */
export function checkHistogramProducer(value: unknown): Producer | undefined {
  if (value === undefined) return undefined
  if (value === null || typeof value !== 'object' || !made.has(value)) {
    throw new InvalidMetricsOptionError(
      'histograms',
      'must be a producer made by lockHistogramProducer() (and given to the reader as metricProducers), or left out to record the histograms through the SDK',
      value,
    )
  }
  return value as Producer
}

export type { Producer as BindableHistogramProducer }
