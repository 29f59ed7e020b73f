/**
 * Errors thrown by `@fencelock/metrics`. Every failure has its own class under
 * {@link MetricsError}, with `name` set and read-only context, so callers branch on the class.
 */

/** Base class of every error this package throws. */
export class MetricsError extends Error {
  constructor(message: string, options: { cause?: unknown } = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause })
    this.name = new.target.name
  }
}

/** A bad option, detected before anything is registered or subscribed. */
export class InvalidMetricsOptionError extends MetricsError {
  /** The option at fault, e.g. `maxGroups`. */
  readonly field: string
  /** What the option must be. */
  readonly rule: string

  constructor(field: string, rule: string, value: unknown) {
    super(`invalid ${field}: ${rule} (got ${describe(value)})`)
    this.field = field
    this.rule = rule
  }
}

/**
 * The registry already holds a metric of this name that this package did not create (or that
 * was created with other buckets or labels), so the two would collide in the exposition.
 */
export class MetricConflictError extends MetricsError {
  /** The full metric name, prefix included. */
  readonly metricName: string

  constructor(metricName: string) {
    super(`the registry already has a metric named "${metricName}" that @fencelock/metrics did not create; use another registry or prefix`)
    this.metricName = metricName
  }
}

function describe(value: unknown): string {
  if (typeof value === 'string') return value.length > 40 ? `a string of ${value.length} characters` : JSON.stringify(value)
  if (typeof value === 'number' || typeof value === 'boolean' || value == null) return String(value)
  if (typeof value === 'bigint') return `${value}n`
  if (Array.isArray(value)) return 'an array'
  return typeof value
}
