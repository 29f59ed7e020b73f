import type { Meter, Tracer } from '@opentelemetry/api'
import { InvalidMetricsOptionError } from '../errors.js'
import type { FencingRejection } from '../fencing-rejection.js'
import type { InstrumentableLocker } from '../instrument.js'
import { groupFor } from '../label-limiter.js'
import { lockEventTally } from '../lock-event-tally.js'
import type { FencedWriteReport } from './fenced-write-report.js'
import { SCOPE_NAME, SCOPE_VERSION } from './names.js'
import {
  checkHistogramChoice,
  chooseHistograms,
  modelWrites,
  otelGroupState,
  otelMetricSet,
  type OtelGroupState,
  type OtelMetricSet,
} from './otel-metrics.js'
import {
  resolveOpenTelemetryFencingOptions,
  resolveOpenTelemetryOptions,
  type OpenTelemetryFencingOptions,
  type OpenTelemetryOptions,
  type ResolvedOpenTelemetryFencingOptions,
} from './otel-options.js'
import { acquireSpanRecorder, fencedWriteSpanRecorder } from './otel-spans.js'

/** What {@link instrumentFencingOpenTelemetry} returns. */
export interface OpenTelemetryFencingInstrumentation {
  /**
   * Reports one refused write. Pass it as `fencing({ models, onRejection })`. Bound, never throws:
   * a failure to report must not turn a refusal into a different error.
   */
  readonly onFencingRejection: (rejection: FencingRejection) => void
  /**
   * Reports one fenced write, accepted or refused: counted in `fencelock.fencing.writes` by
   * outcome, and a span. For a fencing hook that reports every write; bound, never throws.
   */
  readonly onFencedWrite: (write: FencedWriteReport) => void
}

/** What {@link instrumentOpenTelemetry} returns. */
export interface OpenTelemetryLockInstrumentation extends OpenTelemetryFencingInstrumentation {
  /** The group values admitted so far (shared by everything instrumented through this meter provider). */
  readonly groups: ReadonlySet<string>
  /**
   * Stops listening to the locker. The locks it counted as held and not yet ended are taken off
   * `fencelock.lock.held` (nothing would ever take them off later); counters keep their values.
   * Calling it again does nothing.
   */
  stop(): void
}

const meterOf = (o: ResolvedOpenTelemetryFencingOptions): Meter => o.meterProvider.getMeter(SCOPE_NAME, SCOPE_VERSION)
const tracerOf = (o: ResolvedOpenTelemetryFencingOptions): Tracer | undefined =>
  o.traces ? o.tracerProvider.getTracer(SCOPE_NAME, SCOPE_VERSION) : undefined

function fencedWriteObserver(
  set: OtelMetricSet,
  o: ResolvedOpenTelemetryFencingOptions,
): OpenTelemetryFencingInstrumentation {
  for (const model of o.models) modelWrites(set, set.models.admit(model, o.maxModels))
  const tracer = tracerOf(o)
  const span = tracer ? fencedWriteSpanRecorder(tracer) : undefined
  const onFencedWrite = (write: FencedWriteReport): void => {
    try {
      const outcome = write?.outcome
      // A report that says neither cannot be counted under either.
      if (outcome !== 'accepted' && outcome !== 'refused') return
      const writes = modelWrites(set, set.models.admit(write.model, o.maxModels))
      writes[outcome]++
      if (span) {
        const durationMs = write.durationMs
        span({
          model: writes.model,
          operation: write.operation,
          token: write.token,
          outcome,
          storedToken: write.storedToken,
          durationMs,
        })
      }
    } catch {
      // Reporting must never fail the write path that reports.
    }
  }
  const onFencingRejection = (rejection: FencingRejection): void => {
    if (rejection == null || typeof rejection !== 'object')
      return onFencedWrite({ outcome: 'refused' } as FencedWriteReport)
    onFencedWrite({ ...rejection, outcome: 'refused' })
  }
  return { onFencingRejection, onFencedWrite }
}

/**
 * Reports fenced writes through OpenTelemetry alone, for a process that fences writes but holds
 * no Locker: the `fencelock.fencing.writes` counter and a span per write.
 *
 * @example
 * ```ts
 * const { onFencingRejection } = instrumentFencingOpenTelemetry({ models: ['Product'] })
 * const db = prisma.$extends(fencing({ models: { Product: 'fenceToken' }, onRejection: onFencingRejection }))
 * ```
 * @throws InvalidMetricsOptionError for a bad or unknown option, before anything is created.
 */
export function instrumentFencingOpenTelemetry(
  options: OpenTelemetryFencingOptions = {},
): OpenTelemetryFencingInstrumentation {
  const o = resolveOpenTelemetryFencingOptions(options)
  return fencedWriteObserver(otelMetricSet(meterOf(o)), o)
}

/**
 * Subscribes OpenTelemetry instruments to a Locker's events — the measurements `instrument()`
 * exports through prom-client, named by OpenTelemetry's conventions (docs/METRICS.md,
 * "OpenTelemetry") — and makes a span per acquire (its wait, attempts, outcome and token); plus
 * hooks for fenced writes. Attributes are bounded: the group `groupOf` maps a resource to, never
 * the resource itself.
 *
 * @param locker a `Locker` from `@fencelock/lock` (only its `listen()` is used).
 * @example
 * ```ts
 * const locker = new Locker(redis)
 * const telemetry = instrumentOpenTelemetry(locker, { meterProvider, groups: ['order'] })
 * const db = prisma.$extends(fencing({ models, onRejection: telemetry.onFencingRejection }))
 * // on shutdown
 * telemetry.stop()
 * ```
 * @throws InvalidMetricsOptionError for a bad locker or a bad or unknown option, before anything is created or subscribed.
 */
export function instrumentOpenTelemetry(
  locker: InstrumentableLocker,
  options: OpenTelemetryOptions = {},
): OpenTelemetryLockInstrumentation {
  if (locker == null || typeof (locker as Partial<InstrumentableLocker>).listen !== 'function') {
    throw new InvalidMetricsOptionError('locker', 'must be a Locker from @fencelock/lock', locker)
  }
  const o = resolveOpenTelemetryOptions(options)
  const meter = meterOf(o)
  checkHistogramChoice(meter, o.histograms)
  const set = otelMetricSet(meter)
  chooseHistograms(set, o.histograms)
  const { groupOf, maxGroups } = o
  const seriesOf = (resource: string): OtelGroupState =>
    otelGroupState(set, set.groups.admit(groupFor(groupOf, resource), maxGroups))
  for (const group of o.groups) otelGroupState(set, set.groups.admit(group, maxGroups))

  const tracer = tracerOf(o)
  const acquireSpan = tracer ? acquireSpanRecorder(tracer, o.spanResource) : undefined
  const tally = lockEventTally<OtelGroupState>({
    seriesOf,
    onAcquireOutcome: acquireSpan && ((event, s) => acquireSpan(event, s.group)),
  })
  const unsubscribe = locker.listen(tally.listener)
  let stopped = false
  return {
    ...fencedWriteObserver(set, o),
    groups: set.groups.admitted,
    stop() {
      if (stopped) return
      stopped = true
      unsubscribe()
      tally.drop()
    },
  }
}
