export {
  instrumentOpenTelemetry,
  instrumentFencingOpenTelemetry,
  type OpenTelemetryLockInstrumentation,
  type OpenTelemetryFencingInstrumentation,
} from './instrument-opentelemetry.js'
export { lockHistogramProducer, type LockHistogramProducer } from './histogram-producer.js'
export { OPENTELEMETRY_DEFAULTS, type OpenTelemetryOptions, type OpenTelemetryFencingOptions } from './otel-options.js'
export { OTEL_INSTRUMENTS, OTEL_ATTRIBUTES, SCOPE_NAME, SCOPE_VERSION } from './names.js'
export type { FencedWriteReport } from './fenced-write-report.js'
export type { FencingRejection } from '../fencing-rejection.js'
export type { InstrumentableLocker } from '../instrument.js'
export {
  WAIT_BUCKETS_SECONDS,
  HOLD_BUCKETS_SECONDS,
  ACQUIRE_OUTCOMES,
  RELEASE_OUTCOMES,
  RENEW_OUTCOMES,
} from '../measurements.js'
export { defaultGroupOf, OTHER_LABEL, MAX_LABEL_CHARS } from '../label-limiter.js'
export { MetricsError, InvalidMetricsOptionError } from '../errors.js'
