import { Counter, Gauge } from 'prom-client'
import { BucketHistogram, type HistogramSeries } from './bucket-histogram.js'
import { MetricConflictError } from './errors.js'
import { LabelLimiter } from './label-limiter.js'
import {
  ACQUIRE_OUTCOMES,
  HOLD_BUCKETS_SECONDS,
  RELEASE_OUTCOMES,
  RENEW_OUTCOMES,
  WAIT_BUCKETS_SECONDS,
  GroupCounts,
} from './measurements.js'
import type { AnyRegistry } from './options.js'

/** The lock metrics, as registered (names per docs/METRICS.md; shown with the default prefix). */
export interface LockMetrics {
  /** `fencelock_acquire_total{group, outcome}` (counter). */
  readonly acquireTotal: Counter<'group' | 'outcome'>
  /** `fencelock_wait_seconds{group}` (histogram; see {@link BucketHistogram} for why not prom-client's). */
  readonly waitSeconds: BucketHistogram<'group'>
  /** `fencelock_hold_seconds{group}` (histogram). */
  readonly holdSeconds: BucketHistogram<'group'>
  /** `fencelock_release_total{group, outcome}` (counter). */
  readonly releaseTotal: Counter<'group' | 'outcome'>
  /** `fencelock_lost_total{group}` (counter). */
  readonly lostTotal: Counter<'group'>
  /** `fencelock_renew_total{group, outcome}` (counter). */
  readonly renewTotal: Counter<'group' | 'outcome'>
  /** `fencelock_held{group}` (gauge). */
  readonly held: Gauge<'group'>
  /** `fencelock_leader_changes_total{group}` (counter): elections this process won (`locker.lead()`). */
  readonly leaderChangesTotal: Counter<'group'>
  /** `fencelock_is_leader{group}` (gauge): elections of the group this process leads now (0 or 1 per name). */
  readonly isLeader: Gauge<'group'>
}

/** The fencing metric: `fencelock_fencing_rejections_total{model}` (counter). */
export interface FencingMetrics {
  readonly fencingRejectionsTotal: Counter<'model'>
}

/**
 * One group's counts. The lock's events only bump plain numbers here; the counters and the gauge
 * read them when collected (prom-client calls each metric's `collect()` on every scrape, before it
 * reads the values), so an event costs a few field increments instead of a label lookup per
 * metric. Counter fields hold increments not yet handed to prom-client; `held` is absolute.
 * Histograms are observed directly, on series looked up once.
 */
export class GroupState extends GroupCounts {
  readonly wait: HistogramSeries
  readonly hold: HistogramSeries

  constructor(group: string, metrics: LockMetrics) {
    super(group)
    this.wait = metrics.waitSeconds.labels(group)
    this.hold = metrics.holdSeconds.labels(group)
  }

  observeWait(seconds: number): void {
    this.wait.observe(seconds)
  }

  observeHold(seconds: number): void {
    this.hold.observe(seconds)
  }
}

/**
 * The lock metrics of one registry and prefix, shared by every locker instrumented into it (two
 * lockers of one process add up in the same series) together with the group cap.
 */
export interface LockMetricSet {
  readonly metrics: LockMetrics
  readonly groups: LabelLimiter
  /** State per admitted group; bounded by the group cap. */
  readonly series: Map<string, GroupState>
}

export interface FencingMetricSet {
  readonly metrics: FencingMetrics
  readonly models: LabelLimiter
}

const lockSets = new WeakMap<AnyRegistry, Map<string, LockMetricSet>>()
const fencingSets = new WeakMap<AnyRegistry, Map<string, FencingMetricSet>>()

/**
 * The set registered earlier in this registry under this prefix, `undefined` when none of its
 * names is taken yet.
 * @throws MetricConflictError when one of the names is taken by a metric this package did not make.
 */
function reusable<S>(
  cache: WeakMap<AnyRegistry, Map<string, S>>,
  registry: AnyRegistry,
  prefix: string,
  metricsOf: (set: S) => object,
  names: readonly string[],
): S | undefined {
  const existing = cache.get(registry)?.get(prefix)
  if (existing) {
    const ours = Object.values(metricsOf(existing)) as unknown[]
    // Still ours only if every metric is still registered: `registry.clear()` drops them all.
    if (names.every((name, i) => registry.getSingleMetric(name) === ours[i])) return existing
  }
  for (const name of names) {
    if (registry.getSingleMetric(name) !== undefined) throw new MetricConflictError(name)
  }
  return undefined
}

function remember<S>(cache: WeakMap<AnyRegistry, Map<string, S>>, registry: AnyRegistry, prefix: string, set: S): S {
  let byPrefix = cache.get(registry)
  if (!byPrefix) {
    byPrefix = new Map()
    cache.set(registry, byPrefix)
  }
  byPrefix.set(prefix, set)
  return set
}

/** Full names of the lock metrics, in the order of {@link LockMetrics}' fields. */
export function lockMetricNames(prefix: string): readonly string[] {
  return ['acquire_total', 'wait_seconds', 'hold_seconds', 'release_total', 'lost_total', 'renew_total', 'held', 'leader_changes_total', 'is_leader'].map(
    (n) => prefix + n,
  )
}

const fencingMetricNames = (prefix: string): readonly string[] => [`${prefix}fencing_rejections_total`]

/**
 * The lock and fencing metrics of `registry` under `prefix`: the ones registered by an earlier
 * call, or new ones. Checks every name before registering any, so a conflict registers nothing.
 * @throws MetricConflictError when a name is taken by a metric this package did not make.
 */
export function metricSets(registry: AnyRegistry, prefix: string): { lock: LockMetricSet; fencing: FencingMetricSet } {
  const lock = reusable(lockSets, registry, prefix, (s) => s.metrics, lockMetricNames(prefix))
  const fencing = reusable(fencingSets, registry, prefix, (s) => s.metrics, fencingMetricNames(prefix))
  return {
    lock: lock ?? remember(lockSets, registry, prefix, createLockMetricSet(registry, prefix)),
    fencing: fencing ?? remember(fencingSets, registry, prefix, createFencingMetricSet(registry, prefix)),
  }
}

/**
 * The fencing metric alone, for an app that fences writes without a Locker in this process.
 * @throws MetricConflictError as {@link metricSets}.
 */
export function fencingMetricSet(registry: AnyRegistry, prefix: string): FencingMetricSet {
  const fencing = reusable(fencingSets, registry, prefix, (s) => s.metrics, fencingMetricNames(prefix))
  return fencing ?? remember(fencingSets, registry, prefix, createFencingMetricSet(registry, prefix))
}

/** Hands the pending increments of every group to `counter`, then clears them. */
function flush<O extends string>(counter: Counter<'group' | 'outcome'>, series: Map<string, GroupState>, pending: (s: GroupState) => Record<O, number>): void {
  for (const state of series.values()) {
    const counts = pending(state)
    for (const outcome in counts) {
      const delta = counts[outcome]
      if (delta > 0) {
        counter.inc({ group: state.group, outcome }, delta)
        counts[outcome] = 0
      }
    }
  }
}

function createLockMetricSet(registry: AnyRegistry, prefix: string): LockMetricSet {
    const registers = [registry]
    const series = new Map<string, GroupState>()
    const metrics: LockMetrics = {
      acquireTotal: new Counter({
        name: `${prefix}acquire_total`,
        help:
          'Lock acquires by outcome: acquired, timeout (waitMs ran out), aborted (the caller\'s signal), ' +
          'error (one per acquire round trip that Redis failed or did not answer in time).',
        labelNames: ['group', 'outcome'],
        registers,
        collect() {
          flush(this, series, (s) => s.acquire)
        },
      }),
      waitSeconds: new BucketHistogram({
        name: `${prefix}wait_seconds`,
        help: 'Time an acquire waited until it got the lock, timed out or was aborted, in seconds.',
        labelName: 'group',
        buckets: WAIT_BUCKETS_SECONDS,
        registers,
      }),
      holdSeconds: new BucketHistogram({
        name: `${prefix}hold_seconds`,
        help: 'Time a lock was held, from the acquire that won it to its release or its loss, in seconds.',
        labelName: 'group',
        buckets: HOLD_BUCKETS_SECONDS,
        registers,
      }),
      releaseTotal: new Counter({
        name: `${prefix}release_total`,
        help:
          'Held locks ended by release(), by outcome: released (our key was deleted) or expired (the key had ' +
          'already expired or been taken). A lock already counted in lost_total is not counted again.',
        labelNames: ['group', 'outcome'],
        registers,
        collect() {
          flush(this, series, (s) => s.release)
        },
      }),
      lostTotal: new Counter({
        name: `${prefix}lost_total`,
        help: 'Held locks lost before they were released: found taken or gone (by the watchdog or extend()), or their lease ran out on the holder\'s clock.',
        labelNames: ['group'],
        registers,
        collect() {
          for (const state of series.values()) {
            if (state.lost > 0) {
              this.inc({ group: state.group }, state.lost)
              state.lost = 0
            }
          }
        },
      }),
      renewTotal: new Counter({
        name: `${prefix}renew_total`,
        help: 'Watchdog renewals by outcome: ok, lost (the lock was lost), error (Redis failed; retried).',
        labelNames: ['group', 'outcome'],
        registers,
        collect() {
          flush(this, series, (s) => s.renew)
        },
      }),
      held: new Gauge({
        name: `${prefix}held`,
        help: 'Locks held now (granted, not yet released or lost).',
        labelNames: ['group'],
        registers,
        collect() {
          for (const state of series.values()) this.set({ group: state.group }, state.held)
        },
      }),
      leaderChangesTotal: new Counter({
        name: `${prefix}leader_changes_total`,
        help: 'Elections this process won (locker.lead()): each is a new leader with a larger term. Summed over processes, the rate of leader changes.',
        labelNames: ['group'],
        registers,
        collect() {
          for (const state of series.values()) {
            if (state.elected > 0) {
              this.inc({ group: state.group }, state.elected)
              state.elected = 0
            }
          }
        },
      }),
      isLeader: new Gauge({
        name: `${prefix}is_leader`,
        help: 'Elections (locker.lead()) this process leads now: 1 while it is the leader of one name of the group. Summed over processes, more than 1 per name means a deposed leader has not noticed yet.',
        labelNames: ['group'],
        registers,
        collect() {
          for (const state of series.values()) this.set({ group: state.group }, state.leading)
        },
      }),
    }
    return { metrics, groups: new LabelLimiter(), series }
}

function createFencingMetricSet(registry: AnyRegistry, prefix: string): FencingMetricSet {
  return {
    metrics: {
      fencingRejectionsTotal: new Counter({
        name: `${prefix}fencing_rejections_total`,
        help: 'Writes the database rejected because they carried a fencing token older than the row\'s, by model.',
        labelNames: ['model'],
        registers: [registry],
      }),
    },
    models: new LabelLimiter(),
  }
}

/**
 * The state of `group`, created on first use with every series at zero: a series that first
 * appears with a value above zero hides that increase from `rate()`, and the ratio rules need
 * both sides of each division.
 */
export function groupState(set: LockMetricSet, group: string): GroupState {
  const cached = set.series.get(group)
  if (cached) return cached
  const m = set.metrics
  for (const outcome of ACQUIRE_OUTCOMES) m.acquireTotal.inc({ group, outcome }, 0)
  for (const outcome of RELEASE_OUTCOMES) m.releaseTotal.inc({ group, outcome }, 0)
  for (const outcome of RENEW_OUTCOMES) m.renewTotal.inc({ group, outcome }, 0)
  m.lostTotal.inc({ group }, 0)
  m.held.inc({ group }, 0)
  m.leaderChangesTotal.inc({ group }, 0)
  m.isLeader.inc({ group }, 0)
  const state = new GroupState(group, m)
  set.series.set(group, state)
  return state
}
