import {
  ValueType,
  type Attributes,
  type BatchObservableResult,
  type Histogram,
  type Meter,
  type Observable,
} from '@opentelemetry/api'
import { InvalidMetricsOptionError } from '../errors.js'
import { LabelLimiter } from '../label-limiter.js'
import {
  ACQUIRE_OUTCOMES,
  HOLD_BUCKETS_SECONDS,
  RELEASE_OUTCOMES,
  RENEW_OUTCOMES,
  WAIT_BUCKETS_SECONDS,
  type AcquireOutcome,
  GroupCounts,
  type ReleaseOutcome,
  type RenewOutcome,
} from '../measurements.js'
import {
  CumulativeHistogram,
  HISTOGRAM_DESCRIPTIONS,
  type BindableHistogramProducer,
  type HistogramPair,
} from './histogram-producer.js'
import { OTEL_ATTRIBUTES as A, OTEL_INSTRUMENTS as I } from './names.js'

/** Attributes of one group and one outcome each, built once: the SDK reads them, never keeps them. */
type OutcomeAttributes<O extends string> = Readonly<Record<O, Attributes>>

function outcomeAttributes<O extends string>(group: string, key: string, outcomes: readonly O[]): OutcomeAttributes<O> {
  const out = {} as Record<O, Attributes>
  for (const outcome of outcomes) out[outcome] = Object.freeze({ [A.group]: group, [key]: outcome })
  return Object.freeze(out)
}

/** Where a group's wait or hold values go: the SDK's histogram, or our own counts (histogram-producer.ts). */
interface Recorder {
  record(seconds: number): void
}

/**
 * One group's counts, read by the observable instruments at each collection. Unlike the
 * prom-client path's, the counter fields are cumulative (an observable counter reports its total).
 * The histograms are recorded on every event: into the SDK's histograms (the group's attributes
 * built once), or, with a `lockHistogramProducer()`, into counts of our own that the producer
 * hands over at each collection.
 */
export class OtelGroupState extends GroupCounts {
  readonly attributes: Attributes
  readonly acquireAttributes: OutcomeAttributes<AcquireOutcome>
  readonly releaseAttributes: OutcomeAttributes<ReleaseOutcome>
  readonly renewAttributes: OutcomeAttributes<RenewOutcome>
  /** The group's own histograms, when a producer reports them; undefined on the SDK's. */
  readonly pair: HistogramPair | undefined
  readonly #wait: Recorder
  readonly #hold: Recorder

  constructor(group: string, histograms: Histograms) {
    super(group)
    const attributes = Object.freeze({ [A.group]: group })
    this.attributes = attributes
    this.acquireAttributes = outcomeAttributes(group, A.acquireOutcome, ACQUIRE_OUTCOMES)
    this.releaseAttributes = outcomeAttributes(group, A.releaseOutcome, RELEASE_OUTCOMES)
    this.renewAttributes = outcomeAttributes(group, A.renewalOutcome, RENEW_OUTCOMES)
    if (histograms.kind === 'producer') {
      this.pair = {
        wait: new CumulativeHistogram(attributes, WAIT_BUCKETS_SECONDS),
        hold: new CumulativeHistogram(attributes, HOLD_BUCKETS_SECONDS),
      }
      this.#wait = this.pair.wait
      this.#hold = this.pair.hold
    } else {
      const { waitTime, holdTime } = histograms
      this.pair = undefined
      this.#wait = { record: (seconds) => waitTime.record(seconds, attributes) }
      this.#hold = { record: (seconds) => holdTime.record(seconds, attributes) }
    }
  }

  observeWait(seconds: number): void {
    this.#wait.record(seconds)
  }

  observeHold(seconds: number): void {
    this.#hold.record(seconds)
  }
}

/** Writes of one model reported to the fencing hook, cumulative. */
export class ModelWrites {
  readonly model: string
  refused = 0
  accepted = 0
  readonly refusedAttributes: Attributes
  readonly acceptedAttributes: Attributes

  constructor(model: string) {
    this.model = model
    this.refusedAttributes = Object.freeze({ [A.model]: model, [A.writeOutcome]: 'refused' })
    this.acceptedAttributes = Object.freeze({ [A.model]: model, [A.writeOutcome]: 'accepted' })
  }
}

/**
 * The instruments of one Meter, shared by everything instrumented through it (two lockers of one
 * process add up in the same series, as they do in one prom-client registry), with the group and
 * model caps. One batch callback reads every group at each collection: a second set of
 * observable instruments under the same names would report the same series twice.
 */
export interface OtelMetricSet {
  readonly meter: Meter
  readonly groups: LabelLimiter
  readonly series: Map<string, OtelGroupState>
  readonly models: LabelLimiter
  readonly writes: Map<string, ModelWrites>
  /**
   * How the wait and hold histograms are recorded, decided by the first `instrumentOpenTelemetry()`
   * of the meter (`histograms` option) and the same for every later one; undefined until then (a
   * meter used only for fenced writes has none).
   */
  histograms: Histograms | undefined
}

/** The SDK's two histograms, or the producer that reports ours. */
export type Histograms =
  | { readonly kind: 'sdk'; readonly waitTime: Histogram; readonly holdTime: Histogram }
  | { readonly kind: 'producer'; readonly producer: BindableHistogramProducer }

const sets = new WeakMap<Meter, OtelMetricSet>()

/** The set of `meter`: made and registered on first use, the same one after. */
export function otelMetricSet(meter: Meter): OtelMetricSet {
  const existing = sets.get(meter)
  if (existing) return existing
  const set = createSet(meter)
  sets.set(meter, set)
  return set
}

function createSet(meter: Meter): OtelMetricSet {
  const int = ValueType.INT
  const acquires = meter.createObservableCounter(I.acquires, {
    description:
      "Lock acquires by outcome: acquired, timeout (waitMs ran out), aborted (the caller's signal), error (Redis failed or did not answer).",
    unit: '{acquire}',
    valueType: int,
  })
  const releases = meter.createObservableCounter(I.releases, {
    description:
      'Held locks ended by release(), by outcome: released (our key was deleted) or expired (the key had already expired or been taken). A lock already counted as lost is not counted again.',
    unit: '{release}',
    valueType: int,
  })
  const losses = meter.createObservableCounter(I.losses, {
    description:
      "Held locks lost before they were released: found taken or gone (by the watchdog or extend()), or their lease ran out on the holder's clock.",
    unit: '{loss}',
    valueType: int,
  })
  const renewals = meter.createObservableCounter(I.renewals, {
    description: 'Watchdog renewals by outcome: ok, lost (the lock was lost), error (Redis failed; retried).',
    unit: '{renewal}',
    valueType: int,
  })
  const held = meter.createObservableUpDownCounter(I.held, {
    description: 'Locks held now (granted, not yet released or lost).',
    unit: '{lock}',
    valueType: int,
  })
  const wins = meter.createObservableCounter(I.electionWins, {
    description: 'Elections this process won (locker.lead()): each is a new leader with a larger term.',
    unit: '{win}',
    valueType: int,
  })
  const terms = meter.createObservableUpDownCounter(I.activeTerms, {
    description: 'Elections (locker.lead()) this process leads now: 1 per name of the group it is the leader of.',
    unit: '{term}',
    valueType: int,
  })
  const writes = meter.createObservableCounter(I.fencedWrites, {
    description:
      "Fenced writes by outcome: refused (the database rejected the write's token as older than the row's) or accepted.",
    unit: '{write}',
    valueType: int,
  })

  const set: OtelMetricSet = {
    meter,
    groups: new LabelLimiter(),
    series: new Map(),
    models: new LabelLimiter(),
    writes: new Map(),
    histograms: undefined,
  }
  const observables: Observable[] = [acquires, releases, losses, renewals, held, wins, terms, writes]
  meter.addBatchObservableCallback((result: BatchObservableResult) => {
    if (set.histograms?.kind === 'producer') set.histograms.producer.meterCollected()
    for (const s of set.series.values()) {
      for (const outcome of ACQUIRE_OUTCOMES) result.observe(acquires, s.acquire[outcome], s.acquireAttributes[outcome])
      for (const outcome of RELEASE_OUTCOMES) result.observe(releases, s.release[outcome], s.releaseAttributes[outcome])
      for (const outcome of RENEW_OUTCOMES) result.observe(renewals, s.renew[outcome], s.renewAttributes[outcome])
      result.observe(losses, s.lost, s.attributes)
      result.observe(held, s.held, s.attributes)
      result.observe(wins, s.elected, s.attributes)
      result.observe(terms, s.leading, s.attributes)
    }
    for (const w of set.writes.values()) {
      result.observe(writes, w.refused, w.refusedAttributes)
      // Accepted writes are reported only by a hook that reports them: no zero series claims
      // that none happened where nothing reports them.
      if (w.accepted > 0) result.observe(writes, w.accepted, w.acceptedAttributes)
    }
  }, observables)
  return set
}

/**
 * Checks, before anything is created, that `producer` (the `histograms` option, or undefined for
 * the SDK's histograms) agrees with what earlier calls chose for `meter`'s set and that the
 * producer serves no other meter.
 * @throws InvalidMetricsOptionError (`histograms`)
 */
export function checkHistogramChoice(meter: Meter, producer: BindableHistogramProducer | undefined): void {
  const chosen = sets.get(meter)?.histograms
  if (chosen?.kind === 'sdk' && producer !== undefined)
    throw new InvalidMetricsOptionError(
      'histograms',
      "must be the same for every instrumentOpenTelemetry() of one meter provider: an earlier call records this meter provider's wait and hold histograms through the SDK (no histograms option)",
      producer,
    )
  if (chosen?.kind === 'producer' && chosen.producer !== producer)
    throw new InvalidMetricsOptionError(
      'histograms',
      "must be the same for every instrumentOpenTelemetry() of one meter provider: an earlier call gave this meter provider's wait and hold histograms to a lockHistogramProducer(); pass that producer",
      producer,
    )
  if (producer !== undefined && chosen === undefined && producer.bound)
    throw new InvalidMetricsOptionError(
      'histograms',
      'is already the producer of another meter provider: make one lockHistogramProducer() per meter provider (and its reader)',
      producer,
    )
}

/** Fixes how `set` records its histograms (checked first by {@link checkHistogramChoice}); the SDK's are created here, once. */
export function chooseHistograms(set: OtelMetricSet, producer: BindableHistogramProducer | undefined): void {
  if (set.histograms) return
  if (producer) {
    producer.bind(function* pairs() {
      for (const state of set.series.values()) if (state.pair) yield state.pair
    })
    set.histograms = { kind: 'producer', producer }
    return
  }
  // Help texts as the prom-client path's, less its Prometheus wording.
  const waitTime = set.meter.createHistogram(I.waitTime, {
    description: HISTOGRAM_DESCRIPTIONS.wait,
    unit: 's',
    valueType: ValueType.DOUBLE,
    // Advice, which a View of the application overrides: the lock's buckets, not the SDK's
    // defaults (meant for milliseconds), so the 1 s alert boundary stays exact.
    advice: { explicitBucketBoundaries: [...WAIT_BUCKETS_SECONDS] },
  })
  const holdTime = set.meter.createHistogram(I.holdTime, {
    description: HISTOGRAM_DESCRIPTIONS.hold,
    unit: 's',
    valueType: ValueType.DOUBLE,
    advice: { explicitBucketBoundaries: [...HOLD_BUCKETS_SECONDS] },
  })
  set.histograms = { kind: 'sdk', waitTime, holdTime }
}

/**
 * The state of `group`, created on first use: from then on every counter of the group is
 * reported, at zero until it counts something, so `rate()` sees each first increase and the ratio
 * rules have both sides of each division. (The histograms' series appear at their first record:
 * OpenTelemetry has no way to create a histogram series without an observation.)
 */
export function otelGroupState(set: OtelMetricSet, group: string): OtelGroupState {
  let state = set.series.get(group)
  if (!state) {
    if (!set.histograms) throw new Error('internal: a group state before the histograms were chosen')
    state = new OtelGroupState(group, set.histograms)
    set.series.set(group, state)
  }
  return state
}

/** The writes of `model` (already admitted), created on first use with `refused` at zero. */
export function modelWrites(set: OtelMetricSet, model: string): ModelWrites {
  let writes = set.writes.get(model)
  if (!writes) {
    writes = new ModelWrites(model)
    set.writes.set(model, writes)
  }
  return writes
}
