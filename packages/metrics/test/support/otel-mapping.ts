/**
 * Which OpenTelemetry instrument carries the measurement of which prom-client metric, with the
 * attribute each label becomes, and the names `@opentelemetry/exporter-prometheus` gives them in
 * the exposition (dots to underscores, `_total` on monotonic sums, no unit suffix). The table of
 * docs/METRICS.md ("OpenTelemetry") says the same; the tests check both paths against it.
 */
import { OTEL_ATTRIBUTES as A, OTEL_INSTRUMENTS as I } from '../../src/opentelemetry/index.js'

export interface Correspondence {
  /** The prom-client metric (default prefix). */
  readonly prom: string
  /** The OpenTelemetry instrument. */
  readonly otel: string
  readonly kind: 'counter' | 'gauge' | 'histogram'
  /** prom-client label → OpenTelemetry attribute. */
  readonly labels: Readonly<Record<string, string>>
  /** Attributes the OpenTelemetry point has besides the mapped ones (the fencing outcome). */
  readonly extra?: Readonly<Record<string, string>>
}

export const CORRESPONDENCES: readonly Correspondence[] = [
  {
    prom: 'fencelock_acquire_total',
    otel: I.acquires,
    kind: 'counter',
    labels: { group: A.group, outcome: A.acquireOutcome },
  },
  { prom: 'fencelock_wait_seconds', otel: I.waitTime, kind: 'histogram', labels: { group: A.group } },
  { prom: 'fencelock_hold_seconds', otel: I.holdTime, kind: 'histogram', labels: { group: A.group } },
  {
    prom: 'fencelock_release_total',
    otel: I.releases,
    kind: 'counter',
    labels: { group: A.group, outcome: A.releaseOutcome },
  },
  { prom: 'fencelock_lost_total', otel: I.losses, kind: 'counter', labels: { group: A.group } },
  {
    prom: 'fencelock_renew_total',
    otel: I.renewals,
    kind: 'counter',
    labels: { group: A.group, outcome: A.renewalOutcome },
  },
  { prom: 'fencelock_held', otel: I.held, kind: 'gauge', labels: { group: A.group } },
  { prom: 'fencelock_leader_changes_total', otel: I.electionWins, kind: 'counter', labels: { group: A.group } },
  { prom: 'fencelock_is_leader', otel: I.activeTerms, kind: 'gauge', labels: { group: A.group } },
  {
    prom: 'fencelock_fencing_rejections_total',
    otel: I.fencedWrites,
    kind: 'counter',
    labels: { model: A.model },
    extra: { [A.writeOutcome]: 'refused' },
  },
]

/** A name or attribute key as the Prometheus exporter writes it. */
export const promName = (otelName: string): string => otelName.replace(/[^a-zA-Z0-9_:]/g, '_').replace(/_+/g, '_')

/** The metric name of `c`'s instrument in the OpenTelemetry path's exposition (histograms: before `_bucket`). */
export const exposedName = (c: Correspondence): string => promName(c.otel) + (c.kind === 'counter' ? '_total' : '')

/**
 * A series selector of the prom-client path, `name{l="v",...}` as promtool test files write them,
 * rewritten into the OpenTelemetry path's: the metric renamed (a histogram keeps its `_bucket`,
 * `_sum`, `_count` suffix), each mapped label renamed, the extra attributes added, other labels
 * (`job`, `instance`, `le`) kept.
 */
export function toOtelSeries(series: string): string {
  const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)\{(.*)\}$/.exec(series.trim())
  if (!m) throw new Error(`not a series selector: ${series}`)
  const [, name, labels] = m as unknown as [string, string, string]
  const c = CORRESPONDENCES.find(
    (x) =>
      name === x.prom ||
      (x.kind === 'histogram' &&
        /_(bucket|sum|count)$/.test(name) &&
        name.replace(/_(bucket|sum|count)$/, '') === x.prom),
  )
  if (!c) throw new Error(`no OpenTelemetry instrument for ${name}`)
  const suffix = c.kind === 'histogram' ? name.slice(c.prom.length) : ''
  const pairs = [...labels.matchAll(/([a-zA-Z_]\w*)="((?:[^"\\]|\\.)*)"/g)].map(
    ([, k, v]) => `${c.labels[k!] !== undefined ? promName(c.labels[k!]!) : k}="${v}"`,
  )
  for (const [k, v] of Object.entries(c.extra ?? {})) pairs.push(`${promName(k)}="${v}"`)
  return `${exposedName(c)}${suffix}{${pairs.join(',')}}`
}
