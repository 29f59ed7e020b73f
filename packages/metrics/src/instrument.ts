import type { Locker, LockEvent } from '@fencelock/lock'
import { Registry } from 'prom-client'
import { InvalidMetricsOptionError } from './errors.js'
import type { FencingRejection } from './fencing-rejection.js'
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

/** One lock counted as held, in the list of its resource (newest first). */
interface HeldLock {
  readonly token: bigint
  readonly state: GroupState
  next: HeldLock | undefined
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

  const seriesOf = (resource: string): GroupState => {
    let group: unknown
    try {
      group = groupOf(resource)
    } catch {
      group = undefined
    }
    return groupState(set, set.groups.admit(group, maxGroups))
  }
  for (const group of o.groups) groupState(set, set.groups.admit(group, maxGroups))

  /**
   * Locks granted while we listen and not yet ended, by resource (the lock's own string, whose
   * hash V8 has cached), then token. Each one ends exactly once here (on `lost`, or on `released`
   * when it was not lost first), which keeps `held` exact and makes
   * acquired = released + expired + lost + held. A `released` of a lock not in here (granted
   * before we listened, or granted to a waiter that had already given up, which never got an
   * `acquired` event) is not counted. A locker holds one lock per resource but for a lock that
   * ran past its TTL unnoticed, so the list behind a resource is one entry long nearly always.
   */
  const held = new Map<string, HeldLock>()
  /** Names this process leads (locker.lead()), each counted once in `fencelock_is_leader` until demoted. */
  const leading = new Map<string, GroupState>()

  /** Ends a held lock once; `heldMs` undefined when the hold time is unknown (failed release). */
  const end = (resource: string, token: bigint, heldMs: number | undefined): GroupState | undefined => {
    let entry = held.get(resource)
    let previous: HeldLock | undefined
    while (entry && entry.token !== token) {
      previous = entry
      entry = entry.next
    }
    if (!entry) return undefined
    if (previous) previous.next = entry.next
    else if (entry.next) held.set(resource, entry.next)
    else held.delete(resource)
    const s = entry.state
    if (heldMs !== undefined) s.hold.observe(heldMs / 1000)
    s.held--
    return s
  }

  const onEvent = (event: LockEvent): void => {
    switch (event.type) {
      case 'acquired': {
        const s = seriesOf(event.resource)
        s.acquire.acquired++
        s.held++
        s.wait.observe(event.waitedMs / 1000)
        held.set(event.resource, { token: event.token, state: s, next: held.get(event.resource) })
        return
      }
      case 'timeout': {
        const s = seriesOf(event.resource)
        s.acquire.timeout++
        s.wait.observe(event.waitedMs / 1000)
        return
      }
      case 'aborted': {
        const s = seriesOf(event.resource)
        s.acquire.aborted++
        s.wait.observe(event.waitedMs / 1000)
        return
      }
      case 'unavailable': {
        const s = seriesOf(event.resource)
        s.acquire.error++
        s.wait.observe(event.waitedMs / 1000)
        return
      }
      case 'error':
        // Per failed round trip; an acquire's outcome comes once, as `unavailable`.
        if (event.operation === 'renew') seriesOf(event.resource).renew.error++
        // A release Redis failed ends the lock (it expires on its own); its outcome is unknown,
        // so it is not counted as a release.
        else if (event.operation === 'release' && event.token !== undefined) end(event.resource, event.token, undefined)
        return
      case 'extended':
        if (event.auto) seriesOf(event.resource).renew.ok++
        return
      case 'lost': {
        const s = end(event.resource, event.token, event.heldMs)
        // A watchdog that finds the lock gone (or cannot renew it in time) is a renewal that
        // failed for good. A lock without one whose lease ran out renewed nothing.
        if (event.autoExtend) seriesOf(event.resource).renew.lost++
        if (s) s.lost++
        return
      }
      case 'released': {
        const s = end(event.resource, event.token, event.heldMs)
        if (s) s.release[event.outcome]++
        return
      }
      case 'elected': {
        const s = seriesOf(event.resource)
        s.elected++
        if (!leading.has(event.resource)) s.leading++
        leading.set(event.resource, s)
        return
      }
      case 'demoted': {
        const s = leading.get(event.resource)
        if (s) s.leading--
        leading.delete(event.resource)
        return
      }
      case 'contended':
      case 'tick':
      case 'token-regressed':
        return
    }
  }

  const unsubscribe = locker.listen(onEvent)
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
      for (const entry of held.values()) {
        for (let e: HeldLock | undefined = entry; e; e = e.next) e.state.held--
      }
      held.clear()
      for (const s of leading.values()) s.leading--
      leading.clear()
    },
  }
}
