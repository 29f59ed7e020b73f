export { instrument, instrumentFencing, type LockInstrumentation, type FencingInstrumentation, type InstrumentableLocker } from './instrument.js'
export { metricsHandler, type MetricsRequest, type MetricsResponse, type MetricsSource } from './metrics-handler.js'
export {
  WAIT_BUCKETS_SECONDS,
  HOLD_BUCKETS_SECONDS,
  ACQUIRE_OUTCOMES,
  RELEASE_OUTCOMES,
  RENEW_OUTCOMES,
  type AcquireOutcome,
  type ReleaseOutcome,
  type RenewOutcome,
} from './measurements.js'
export type { LockMetrics, FencingMetrics } from './lock-metrics.js'
export { BucketHistogram, HistogramSeries } from './bucket-histogram.js'
export { defaultGroupOf, OTHER_LABEL, MAX_LABEL_CHARS } from './label-limiter.js'
export { METRICS_DEFAULTS, type InstrumentOptions, type FencingInstrumentOptions, type AnyRegistry } from './options.js'
export { MetricsError, InvalidMetricsOptionError, MetricConflictError } from './errors.js'
export type { FencingRejection } from './fencing-rejection.js'
