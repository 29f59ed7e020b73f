import type { Locker } from '@fencelock/lock'
import { Registry } from 'prom-client'
import { InvalidMetricsOptionError } from './errors.js'
import type { FencingRejection } from './fencing-rejection.js'
import { groupFor } from './label-limiter.js'
import { lockEventTally } from './lock-event-tally.js'
import { fencingMetricSet, groupState, metricSets, type FencingMetrics, type FencingMetricSet, type GroupState, type LockMetrics } from './lock-metrics.js'
import { resolveFencingOptions, resolveInstrumentOptions, type AnyRegistry, type FencingInstrumentOptions, type InstrumentOptions } from './options.js'

/** What {@link instrumentFencing} returns. */
export interface FencingInstrumentation {
  /** The registry the metric is in (the one given, or the one made). Serve it at `/metrics`. */
  readonly registry: AnyRegistry
  readonly metrics: FencingMetrics
  /**
   * Counts one rejected stale write. Pass it as `fencing({ models, onRejection })`. Bound, never
   * throws: a failure to count must not turn a rejection into a different error.
   */
  readonly onFencingRejection: (rejection: FencingRejection) => void
}

/** What {@link instrument} returns. */
export interface LockInstrumentation extends FencingInstrumentation {
  readonly metrics: LockMetrics & FencingMetrics
  /** The `group` label values admitted so far (shared by everything instrumented into this registry). */
  readonly groups: ReadonlySet<string>
  /**
   * Stops listening to the locker. The locks it counted as held and not yet ended are taken off
   * `fencelock_held` (nothing would ever take them off later); counters keep their values.
   * Calling it again does nothing.
   */
  stop(): void
}

/** The part of a Locker this package uses. */
export type InstrumentableLocker = Pick<Locker, 'listen'>

/**
 * Counts fencing rejections alone, for a process that fences writes but holds no Locker.
 *
 * @example
 * ```ts
 * const { registry, onFencingRejection } = instrumentFencing()
 * const db = prisma.$extends(fencing({ models: { Product: 'fenceToken' }, onRejection: onFencingRejection }))
 * app.get('/metrics', metricsHandler(registry))
 * ```
 * @throws InvalidMetricsOptionError for a bad option, before anything is registered.
 * @throws MetricConflictError when the registry has a metric of the same name that this package did not make.
 */
export function instrumentFencing(options: FencingInstrumentOptions = {}): FencingInstrumentation {
  const o = resolveFencingOptions(options)
  const registry = o.registry ?? new Registry()
  const set = fencingMetricSet(registry, o.prefix)
  return { registry, metrics: set.metrics, onFencingRejection: rejectionCounter(set, o.maxModels, o.models) }
}

function rejectionCounter(set: FencingMetricSet, maxModels: number, models: readonly string[]): (rejection: FencingRejection) => void {
  for (const model of models) set.metrics.fencingRejectionsTotal.inc({ model: set.models.admit(model, maxModels) }, 0)
  return (rejection) => {
    try {
      set.metrics.fencingRejectionsTotal.inc({ model: set.models.admit(rejection?.model, maxModels) })
    } catch {
      // Counting must never fail the write path that reports the rejection.
    }
  }
}

/**
 * Subscribes Prometheus metrics to a Locker's events: acquires by outcome, waits, holds, releases,
 * losses, renewals and locks held, labelled by a bounded `group`; plus a hook for fencing
 * rejections. Metric names, types and labels are those of docs/METRICS.md ("Metric reference"); see
 * docs/METRICS.md for each metric's exact meaning.
 *
 * @param locker a `Locker` from `@fencelock/lock` (only its `listen()` is used).
 * @example
 * ```ts
 * const registry = new Registry()
 * const locker = new Locker(redis)
 * const metrics = instrument(locker, { registry, groupOf: (r) => r.split(':')[0] ?? 'other' })
 * const db = prisma.$extends(fencing({ models, onRejection: metrics.onFencingRejection }))
 * app.get('/metrics', metricsHandler(registry))
 * // on shutdown
 * metrics.stop()
 * ```
 * @throws InvalidMetricsOptionError for a bad locker or option, before anything is registered.
 * @throws MetricConflictError when the registry has a metric of the same name that this package did not make.
 */
export function instrument(locker: InstrumentableLocker, options: InstrumentOptions = {}): LockInstrumentation {
  if (locker == null || typeof (locker as Partial<InstrumentableLocker>).listen !== 'function') {
    throw new InvalidMetricsOptionError('locker', 'must be a Locker from @fencelock/lock', locker)
  }
  const o = resolveInstrumentOptions(options)
  const registry = o.registry ?? new Registry()
  const { lock: set, fencing } = metricSets(registry, o.prefix)
  const { groupOf, maxGroups } = o

  const seriesOf = (resource: string): GroupState => groupState(set, set.groups.admit(groupFor(groupOf, resource), maxGroups))
  for (const group of o.groups) groupState(set, set.groups.admit(group, maxGroups))

  const tally = lockEventTally({ seriesOf })
  const unsubscribe = locker.listen(tally.listener)
  let stopped = false
  return {
    registry,
    metrics: { ...set.metrics, ...fencing.metrics },
    groups: set.groups.admitted,
    onFencingRejection: rejectionCounter(fencing, o.maxModels, o.models),
    stop() {
      if (stopped) return
      stopped = true
      unsubscribe()
      tally.drop()
    },
  }
}
