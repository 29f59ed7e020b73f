/**
 * The names this package gives its OpenTelemetry instruments, attributes and spans, after the
 * semantic conventions' naming rules: lowercase, dot-separated namespaces under one of our own
 * (`fencelock`, never an OpenTelemetry namespace), snake_case inside a component, the unit in the
 * instrument's metadata and not in its name, counters named by the plural of what they count
 * (unit `{acquire}`), up-down counters not pluralized, no `total`. The wait and hold histograms
 * follow the closest standard prior art, a connection pool's `db.client.connection.wait_time`
 * and `use_time`: waiting for, then holding, something exclusive.
 */

/** The instrumentation scope: this package. Kept equal to package.json's version by a test. */
export const SCOPE_NAME = '@fencelock/metrics'
export const SCOPE_VERSION = '0.1.0'

/** Instrument names, by the prom-client metric each one carries the same measurement as. */
export const OTEL_INSTRUMENTS = Object.freeze({
  /** Counter, `{acquire}`: `fencelock_acquire_total`. */
  acquires: 'fencelock.lock.acquires',
  /** Histogram, `s`: `fencelock_wait_seconds`. */
  waitTime: 'fencelock.lock.wait_time',
  /** Histogram, `s`: `fencelock_hold_seconds`. */
  holdTime: 'fencelock.lock.hold_time',
  /** Counter, `{release}`: `fencelock_release_total`. */
  releases: 'fencelock.lock.releases',
  /** Counter, `{loss}`: `fencelock_lost_total`. */
  losses: 'fencelock.lock.losses',
  /** Counter, `{renewal}`: `fencelock_renew_total`. */
  renewals: 'fencelock.lock.renewals',
  /** UpDownCounter, `{lock}`: `fencelock_held`. */
  held: 'fencelock.lock.held',
  /** Counter, `{win}`: `fencelock_leader_changes_total`. */
  electionWins: 'fencelock.election.wins',
  /** UpDownCounter, `{term}`: `fencelock_is_leader`. */
  activeTerms: 'fencelock.election.term.active',
  /** Counter, `{write}`: `fencelock_fencing_rejections_total` (its `refused` series). */
  fencedWrites: 'fencelock.fencing.writes',
} as const)

/** Attribute names, on the instruments and on the spans. */
export const OTEL_ATTRIBUTES = Object.freeze({
  /** The bounded group of a lock's resource (`groupOf`, capped): the prom-client path's `group`. */
  group: 'fencelock.lock.group',
  /** `acquired`, `timeout`, `aborted` or `error`. */
  acquireOutcome: 'fencelock.lock.acquire.outcome',
  /** `released` or `expired`. */
  releaseOutcome: 'fencelock.lock.release.outcome',
  /** `ok`, `lost` or `error`. */
  renewalOutcome: 'fencelock.lock.renewal.outcome',
  /** Spans only: the grant's fencing token, as a decimal string (tokens are 64-bit integers). */
  token: 'fencelock.lock.token',
  /** Spans only: how many tries the grant took. */
  attempts: 'fencelock.lock.attempts',
  /** Spans only, and only with `spanResource: true`: the lock's resource name. */
  resource: 'fencelock.lock.resource',
  /** The fenced model (bounded by `maxModels`): the prom-client path's `model`. */
  model: 'fencelock.fencing.model',
  /** `accepted` or `refused`. */
  writeOutcome: 'fencelock.fencing.outcome',
  /** Spans only: the fenced operation, e.g. `update`. */
  operation: 'fencelock.fencing.operation',
  /** Spans only: the write's token, as a decimal string. */
  writeToken: 'fencelock.fencing.token',
  /** Spans only: the newer token stored on the row, when known, as a decimal string. */
  storedToken: 'fencelock.fencing.stored_token',
  /** The semantic conventions' own attribute for the class of error an operation ended with. */
  errorType: 'error.type',
} as const)
