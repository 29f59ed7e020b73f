/**
 * The real OpenTelemetry SDK for the tests: a MeterProvider whose reader exports to an
 * InMemoryMetricExporter on demand, and a tracer provider whose spans end up in an
 * InMemorySpanExporter. Shut down in `afterAll` of the test file that made them.
 */
import type { Attributes } from '@opentelemetry/api'
import {
  AggregationTemporality,
  DataPointType,
  InMemoryMetricExporter,
  MeterProvider,
  PeriodicExportingMetricReader,
  type Histogram,
  type MetricData,
} from '@opentelemetry/sdk-metrics'
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  SimpleSpanProcessor,
  type ReadableSpan,
} from '@opentelemetry/sdk-trace-base'
import { afterAll } from 'vitest'
import { lockHistogramProducer, type LockHistogramProducer } from '../../src/opentelemetry/index.js'

const shutdowns: (() => Promise<void>)[] = []
afterAll(async () => {
  await Promise.allSettled(shutdowns.map((s) => s()))
  shutdowns.length = 0
})

/** What one collection exported: the metrics of this package's scope, by instrument name. */
export class MetricsSnapshot {
  readonly #metrics: Map<string, MetricData>

  constructor(metrics: readonly MetricData[]) {
    this.#metrics = new Map(metrics.map((m) => [m.descriptor.name, m]))
  }

  get names(): string[] {
    return [...this.#metrics.keys()]
  }

  metric(name: string): MetricData | undefined {
    return this.#metrics.get(name)
  }

  /** Every data point of `name` whose attributes include `attributes`. */
  points(name: string, attributes: Attributes = {}) {
    const metric = this.#metrics.get(name)
    if (!metric) return []
    const points = metric.dataPoints as { attributes: Attributes; value: unknown }[]
    return points.filter((p) => Object.entries(attributes).every(([k, v]) => p.attributes[k] === v))
  }

  /** The value of the one counter or up-down counter point matching `attributes`; `undefined` when there is none. */
  value(name: string, attributes: Attributes = {}): number | undefined {
    const found = this.points(name, attributes)
    if (found.length > 1) throw new Error(`${name} ${JSON.stringify(attributes)} matches ${found.length} points`)
    if (found.length === 0) return undefined
    const metric = this.#metrics.get(name)!
    if (metric.dataPointType === DataPointType.HISTOGRAM) throw new Error(`${name} is a histogram`)
    return found[0]!.value as number
  }

  /** The one histogram point matching `attributes`, with its cumulative buckets keyed like Prometheus' `le`. */
  histogram(
    name: string,
    attributes: Attributes,
  ): { count: number; sum: number; buckets: Map<string, number> } | undefined {
    const found = this.points(name, attributes)
    if (found.length > 1) throw new Error(`${name} ${JSON.stringify(attributes)} matches ${found.length} points`)
    if (found.length === 0) return undefined
    const value = found[0]!.value as Histogram
    const buckets = new Map<string, number>()
    let cumulative = 0
    value.buckets.counts.forEach((count, i) => {
      cumulative += count
      const le = value.buckets.boundaries[i]
      buckets.set(le === undefined ? '+Inf' : String(le), cumulative)
    })
    return { count: value.count, sum: value.sum ?? Number.NaN, buckets }
  }

  /** Every distinct value of attribute `key` over the points of `name`. */
  attributeValues(name: string, key: string): Set<string> {
    return new Set(this.points(name).map((p) => String(p.attributes[key])))
  }
}

/**
 * Where the tests send the wait and hold histograms: the SDK's own histograms, or a
 * `lockHistogramProducer()` registered with the reader (the `histograms` option). Tests that
 * read the histograms run on both.
 */
export const HISTOGRAM_PATHS = ['the SDK', 'a lockHistogramProducer()'] as const
export type HistogramPath = (typeof HISTOGRAM_PATHS)[number]

/**
 * A MeterProvider on the real SDK, and `collect()`: export now, read what was exported. With
 * `histograms` 'a lockHistogramProducer()', a producer is registered with the reader and returned
 * as `histograms`, to pass to every `instrumentOpenTelemetry()` of this meter provider.
 */
export function otelMetrics(scope = '@fencelock/metrics', path: HistogramPath = 'the SDK') {
  const exporter = new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE)
  const histograms: LockHistogramProducer | undefined = path === 'the SDK' ? undefined : lockHistogramProducer()
  // Exports only when asked (forceFlush): the interval is longer than any test.
  const reader = new PeriodicExportingMetricReader({
    exporter,
    exportIntervalMillis: 3_600_000,
    metricProducers: histograms ? [histograms] : [],
  })
  const meterProvider = new MeterProvider({ readers: [reader] })
  shutdowns.push(() => meterProvider.shutdown())
  return {
    meterProvider,
    histograms,
    async collect(): Promise<MetricsSnapshot> {
      exporter.reset()
      await reader.forceFlush()
      const exported = exporter.getMetrics().at(-1)
      const metrics = exported?.scopeMetrics.filter((s) => s.scope.name === scope).flatMap((s) => s.metrics) ?? []
      return new MetricsSnapshot(metrics)
    },
    /** Every scope of one fresh export: its name, version and the names of its metrics. */
    async scopes(): Promise<{ name: string; version: string | undefined; metrics: string[] }[]> {
      exporter.reset()
      await reader.forceFlush()
      return (exporter.getMetrics().at(-1)?.scopeMetrics ?? []).map((s) => ({
        name: s.scope.name,
        version: s.scope.version,
        metrics: s.metrics.map((m) => m.descriptor.name),
      }))
    },
  }
}

/** A tracer provider on the real SDK whose finished spans are kept in memory. */
export function otelTraces() {
  const exporter = new InMemorySpanExporter()
  const tracerProvider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] })
  shutdowns.push(() => tracerProvider.shutdown())
  return {
    tracerProvider,
    /** The spans finished so far, oldest first. */
    spans: (): ReadableSpan[] => exporter.getFinishedSpans(),
    /** The finished spans named `name`. */
    named: (name: string): ReadableSpan[] => exporter.getFinishedSpans().filter((s) => s.name === name),
    reset: () => exporter.reset(),
  }
}

/** A span's duration in milliseconds. */
export const durationMs = (span: ReadableSpan): number => span.duration[0] * 1_000 + span.duration[1] / 1e6
