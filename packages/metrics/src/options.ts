import type { Registry, RegistryContentType } from 'prom-client'
import { InvalidMetricsOptionError } from './errors.js'
import { defaultGroupOf } from './label-limiter.js'

/** Defaults of every option, in one frozen object. */
export const METRICS_DEFAULTS = Object.freeze({
  /**
   * Prefix of every metric name. The shipped alert rules and dashboard assume this one; change it
   * only to run two copies side by side, and rewrite the rules to match.
   */
  prefix: 'fencelock_',
  /**
   * Most distinct `group` label values. At 47 series per group (4 acquire outcomes, 2 × 18 histogram
   * series, 2 release outcomes, lost, 3 renew outcomes, held) 20 groups are at most ~1 000 series
   * per process, plus `other`.
   */
  maxGroups: 20,
  /** Most distinct `model` label values of fencing rejections (Prisma models are few). */
  maxModels: 50,
})

/** The registries this package accepts: prom-client's, in either exposition format. */
export type AnyRegistry = Registry<RegistryContentType>

/** Options of {@link instrumentFencing}. */
export interface FencingInstrumentOptions {
  /** Registry to register in. Default: a new `Registry` of its own, never prom-client's global one. */
  registry?: AnyRegistry
  /** Prefix of metric names. Default `fencelock_` (see {@link METRICS_DEFAULTS}). */
  prefix?: string
  /** Most distinct `model` values; later models are counted as `other`. 1 to 1 000, default 50. */
  maxModels?: number
  /**
   * Fenced models (Prisma model names) whose rejection series are created at zero right away.
   * Rejections are rare, and `rate()` cannot see the first ones on a series that appears with a
   * value above zero: list the models you fence. They count against `maxModels`. Default none.
   */
  models?: readonly string[]
}

/** Options of {@link instrument}. */
export interface InstrumentOptions extends FencingInstrumentOptions {
  /**
   * Maps a lock resource to its `group` label: a small, fixed set of names such as `order` or
   * `payment`, never an id. Default {@link defaultGroupOf}: the text before the first `:`. What it
   * returns is cut to 64 characters and capped by `maxGroups`; a throw or a non-string counts as
   * `other`.
   */
  groupOf?: (resource: string) => string
  /** Most distinct `group` values; later groups are counted as `other`. 1 to 1 000, default 20. */
  maxGroups?: number
  /**
   * Groups whose series are created at zero right away, so their first increments show in
   * `rate()` (Prometheus cannot see the increase of a series that appears with a value > 0).
   * They count against `maxGroups`. Default none: a group's series appear at its first event.
   */
  groups?: readonly string[]
}

export interface ResolvedFencingOptions {
  readonly registry: AnyRegistry | undefined
  readonly prefix: string
  readonly maxModels: number
  readonly models: readonly string[]
}

export interface ResolvedInstrumentOptions extends ResolvedFencingOptions {
  readonly groupOf: (resource: string) => string
  readonly maxGroups: number
  readonly groups: readonly string[]
}

const METRIC_PREFIX = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/

/**
 * The options object, `{}` when omitted.
 * @param names the options `what` takes: any other name is a typo or an option of another function,
 *   refused rather than ignored.
 */
export function checkObject(value: unknown, what: string, names: readonly string[]): Record<string, unknown> {
  if (value === undefined) return {}
  if (value === null || typeof value !== 'object' || Array.isArray(value)) throw new InvalidMetricsOptionError('options', 'must be an object', value)
  const o = value as Record<string, unknown>
  for (const key of Object.keys(o)) {
    if (!names.includes(key)) throw new InvalidMetricsOptionError(key, `is not an option of ${what} (the options are ${names.join(', ')})`, o[key])
  }
  return o
}

export function checkCount(field: string, value: unknown): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 1 || value > 1_000) {
    throw new InvalidMetricsOptionError(field, 'must be an integer from 1 to 1000', value)
  }
  return value
}

/** Duck-typed, not `instanceof`: an app may hold a Registry from another copy of prom-client. */
function checkRegistry(value: unknown): AnyRegistry | undefined {
  if (value === undefined) return undefined
  const r = value as Partial<Record<'registerMetric' | 'getSingleMetric' | 'metrics', unknown>> & { contentType?: unknown }
  if (
    value === null ||
    typeof value !== 'object' ||
    typeof r.registerMetric !== 'function' ||
    typeof r.getSingleMetric !== 'function' ||
    typeof r.metrics !== 'function' ||
    typeof r.contentType !== 'string'
  ) {
    throw new InvalidMetricsOptionError('registry', 'must be a prom-client Registry', value)
  }
  return value as AnyRegistry
}

/** An optional list of label values to create up front: non-empty strings, at most the cap. */
export function checkNames(field: string, value: unknown, max: number, maxField: string): readonly string[] {
  if (value === undefined) return []
  if (!Array.isArray(value) || value.some((v) => typeof v !== 'string' || v.length === 0)) {
    throw new InvalidMetricsOptionError(field, 'must be an array of non-empty strings', value)
  }
  if (value.length > max) throw new InvalidMetricsOptionError(field, `must list at most ${maxField} (${max}) values`, value)
  return [...(value as string[])]
}

const FENCING_OPTION_NAMES = ['registry', 'prefix', 'maxModels', 'models'] as const
const INSTRUMENT_OPTION_NAMES = [...FENCING_OPTION_NAMES, 'groupOf', 'maxGroups', 'groups'] as const

export function resolveFencingOptions(options: unknown, what = 'instrumentFencing', names: readonly string[] = FENCING_OPTION_NAMES): ResolvedFencingOptions {
  const o = checkObject(options, what, names)
  const prefix = o.prefix ?? METRICS_DEFAULTS.prefix
  if (typeof prefix !== 'string' || (prefix !== '' && !METRIC_PREFIX.test(prefix)) || prefix.length > 64) {
    throw new InvalidMetricsOptionError('prefix', 'must be at most 64 characters of [a-zA-Z0-9_:], not starting with a digit', prefix)
  }
  const maxModels = checkCount('maxModels', o.maxModels ?? METRICS_DEFAULTS.maxModels)
  return { registry: checkRegistry(o.registry), prefix, maxModels, models: checkNames('models', o.models, maxModels, 'maxModels') }
}

export function resolveInstrumentOptions(options: unknown): ResolvedInstrumentOptions {
  const base = resolveFencingOptions(options, 'instrument', INSTRUMENT_OPTION_NAMES)
  return { ...base, ...resolveGroupOptions(options as Record<string, unknown> | undefined, METRICS_DEFAULTS.maxGroups) }
}

/** `groupOf`, `maxGroups` and `groups` of an options object whose names were checked already. */
export function resolveGroupOptions(
  o: Record<string, unknown> | undefined,
  defaultMaxGroups: number,
): { groupOf: (resource: string) => string; maxGroups: number; groups: readonly string[] } {
  const groupOf = o?.groupOf ?? defaultGroupOf
  if (typeof groupOf !== 'function') throw new InvalidMetricsOptionError('groupOf', 'must be a function', groupOf)
  const maxGroups = checkCount('maxGroups', o?.maxGroups ?? defaultMaxGroups)
  return { groupOf: groupOf as (resource: string) => string, maxGroups, groups: checkNames('groups', o?.groups, maxGroups, 'maxGroups') }
}
