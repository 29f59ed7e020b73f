import { metrics, trace, type MeterProvider, type TracerProvider } from '@opentelemetry/api'
import { InvalidMetricsOptionError } from '../errors.js'
import { checkCount, checkNames, checkObject, resolveGroupOptions } from '../options.js'
import {
  checkHistogramProducer,
  type BindableHistogramProducer,
  type LockHistogramProducer,
} from './histogram-producer.js'

/** Defaults of every option of the OpenTelemetry path, in one frozen object. */
export const OPENTELEMETRY_DEFAULTS = Object.freeze({
  /** Spans for acquires and fenced writes, besides the metrics. */
  traces: true,
  /**
   * The lock's resource name as a span attribute (`fencelock.lock.resource`). Off: a name such as
   * `order:42` often carries an id that a trace backend should not index, and span-to-metrics
   * pipelines turn attributes into labels. The span's name and `fencelock.lock.group` are bounded.
   */
  spanResource: false,
  /** Most distinct `fencelock.lock.group` values, as the prom-client path's `maxGroups`. */
  maxGroups: 20,
  /** Most distinct `fencelock.fencing.model` values. */
  maxModels: 50,
})

/** Options of {@link instrumentFencingOpenTelemetry}. */
export interface OpenTelemetryFencingOptions {
  /**
   * Where the instruments are created (`getMeter('@fencelock/metrics', version)`). Default: the
   * global one at the time of the call (`metrics.getMeterProvider()`), which records nothing until
   * an SDK is registered: register it first, or pass it here.
   */
  meterProvider?: MeterProvider
  /** Where the spans go. Default: the global one (`trace.getTracerProvider()`), which follows an SDK registered later. */
  tracerProvider?: TracerProvider
  /** Make spans (see {@link OPENTELEMETRY_DEFAULTS}). Default `true`. */
  traces?: boolean
  /** Most distinct `fencelock.fencing.model` values; later models are counted as `other`. 1 to 1 000, default 50. */
  maxModels?: number
  /**
   * Fenced models (Prisma model names) whose `refused` series is created at zero right away, so
   * `rate()` sees the first refusal. They count against `maxModels`. Default none.
   */
  models?: readonly string[]
}

/** Options of {@link instrumentOpenTelemetry}. */
export interface OpenTelemetryOptions extends OpenTelemetryFencingOptions {
  /**
   * Maps a lock resource to its `fencelock.lock.group` attribute: a small, fixed set of names such
   * as `order`, never an id. Default: the text before the first `:`. Cut to 64 characters and
   * capped by `maxGroups`; a throw or a non-string counts as `other`.
   */
  groupOf?: (resource: string) => string
  /** Most distinct groups; later groups are counted as `other`. 1 to 1 000, default 20. */
  maxGroups?: number
  /** Groups whose counters are reported (at zero) right away. They count against `maxGroups`. Default none. */
  groups?: readonly string[]
  /** Add the resource name to acquire spans (see {@link OPENTELEMETRY_DEFAULTS}). Default `false`. */
  spanResource?: boolean
  /**
   * Where the wait and hold histograms go. Default: the SDK's histograms, created on the meter
   * (every record hashes its attributes: about 0.6 µs each here, two per acquire + release). A
   * {@link LockHistogramProducer} from `lockHistogramProducer()`, registered with the meter
   * provider's reader (`metricProducers`), counts them here and hands them over aggregated at each
   * collection: the same names, units, attributes and buckets, cumulative, at a fraction of the
   * cost; a View does not apply to them. One choice per meter provider: every
   * `instrumentOpenTelemetry()` of it passes the same producer, or none.
   */
  histograms?: LockHistogramProducer
}

export interface ResolvedOpenTelemetryFencingOptions {
  readonly meterProvider: MeterProvider
  readonly tracerProvider: TracerProvider
  readonly traces: boolean
  readonly maxModels: number
  readonly models: readonly string[]
}

export interface ResolvedOpenTelemetryOptions extends ResolvedOpenTelemetryFencingOptions {
  readonly groupOf: (resource: string) => string
  readonly maxGroups: number
  readonly groups: readonly string[]
  readonly spanResource: boolean
  readonly histograms: BindableHistogramProducer | undefined
}

const FENCING_NAMES = ['meterProvider', 'tracerProvider', 'traces', 'maxModels', 'models'] as const
const LOCK_NAMES = [...FENCING_NAMES, 'groupOf', 'maxGroups', 'groups', 'spanResource', 'histograms'] as const

function checkBoolean(field: string, value: unknown): boolean {
  if (typeof value !== 'boolean') throw new InvalidMetricsOptionError(field, 'must be true or false', value)
  return value
}

/** Duck-typed, not `instanceof`: the API package defines interfaces, and any SDK's provider fits. */
function checkProvider<P>(field: string, value: unknown, method: string, what: string): P | undefined {
  if (value === undefined) return undefined
  if (value === null || typeof value !== 'object' || typeof (value as Record<string, unknown>)[method] !== 'function') {
    throw new InvalidMetricsOptionError(field, `must be ${what} (an object with ${method}())`, value)
  }
  return value as P
}

function resolveFencing(o: Record<string, unknown>): ResolvedOpenTelemetryFencingOptions {
  const meterProvider = checkProvider<MeterProvider>(
    'meterProvider',
    o.meterProvider,
    'getMeter',
    'an OpenTelemetry MeterProvider',
  )
  const tracerProvider = checkProvider<TracerProvider>(
    'tracerProvider',
    o.tracerProvider,
    'getTracer',
    'an OpenTelemetry TracerProvider',
  )
  const traces = checkBoolean('traces', o.traces ?? OPENTELEMETRY_DEFAULTS.traces)
  const maxModels = checkCount('maxModels', o.maxModels ?? OPENTELEMETRY_DEFAULTS.maxModels)
  const models = checkNames('models', o.models, maxModels, 'maxModels')
  return {
    meterProvider: meterProvider ?? metrics.getMeterProvider(),
    tracerProvider: tracerProvider ?? trace.getTracerProvider(),
    traces,
    maxModels,
    models,
  }
}

export function resolveOpenTelemetryFencingOptions(options: unknown): ResolvedOpenTelemetryFencingOptions {
  return resolveFencing(checkObject(options, 'instrumentFencingOpenTelemetry', FENCING_NAMES))
}

export function resolveOpenTelemetryOptions(options: unknown): ResolvedOpenTelemetryOptions {
  const o = checkObject(options, 'instrumentOpenTelemetry', LOCK_NAMES)
  const base = resolveFencing(o)
  const spanResource = checkBoolean('spanResource', o.spanResource ?? OPENTELEMETRY_DEFAULTS.spanResource)
  const histograms = checkHistogramProducer(o.histograms)
  return { ...base, ...resolveGroupOptions(o, OPENTELEMETRY_DEFAULTS.maxGroups), spanResource, histograms }
}
