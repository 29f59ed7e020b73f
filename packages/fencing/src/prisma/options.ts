import { InvalidFencingOptionError } from '../shared/errors.js'
import type { FenceTokenInput } from '../shared/fence-token.js'

/** Defaults of every option, in one frozen object. Units are in the names. */
export const FENCING_DEFAULTS = Object.freeze({
  /** `fencedTransaction`: how long to wait for a connection to start the transaction (Prisma's default). */
  maxWaitMs: 2_000,
  /** `fencedTransaction`: how long the transaction may run before Prisma rolls it back (Prisma's default). */
  timeoutMs: 5_000,
})

/**
 * One refused write, handed to {@link FencingOptions.onRejection} (the metrics package counts
 * them as `fencelock_fencing_rejections_total{model}`). The same facts as the
 * `StaleFencingTokenError` thrown right after.
 */
export interface FencingRejection {
  /** The Prisma model, e.g. `Product`. */
  model: string
  /** The Prisma operation that was refused, e.g. `update`. */
  operation: string
  /** The caller's stale token. */
  token: bigint
  /** The newer token stored on the row, when it could be read. */
  storedToken: bigint | undefined
}

/**
 * One fenced write as it settled, handed to {@link FencingOptions.onFencedWrite} (the metrics
 * package's OpenTelemetry instrumentation counts it and draws a span): accepted — the database took
 * it — or refused — a newer token was on the row (`StaleFencingTokenError`). A write that failed
 * for another reason, or that was refused before any query (an unsupported shape), reports nothing.
 */
export interface FencedWriteReport {
  /** The Prisma model, e.g. `Product`. */
  model: string
  /** The Prisma operation, e.g. `update`. */
  operation: string
  /** The writer's token. */
  token: bigint
  outcome: 'accepted' | 'refused'
  /** A refusal's newer token stored on the row, when it could be read; undefined for an accepted write. */
  storedToken: bigint | undefined
  /** From the call's first statement to its answer, in milliseconds of the monotonic clock. */
  durationMs: number
}

/** The model names of a Prisma client type, read off its delegates' typed field references. */
export type ClientModelName<C> = {
  [K in keyof C]: C[K] extends { readonly fields: infer F } ? (F[keyof F] extends { readonly modelName: infer M extends string } ? M : never) : never
}[keyof C]

/** The field references of model `M` of client type `C`. */
type ModelFields<C, M> = {
  [K in keyof C]: C[K] extends { readonly fields: infer F } ? (F[keyof F] extends { readonly modelName: M } ? F : never) : never
}[keyof C]

/** The `BigInt` fields of model `M` of client type `C`: the fields that can be its fence column. */
export type BigIntFieldOf<C, M> = {
  [F in keyof ModelFields<C, M>]: ModelFields<C, M>[F] extends { readonly typeName: 'BigInt' } ? F : never
}[keyof ModelFields<C, M>] &
  string

/**
 * What a model without a `BigInt` field takes in {@link FencedModels}: no name fits, and the type
 * error says why (`Type '"fenceToken"' is not assignable to type '"Payment has no BigInt column
 * ..."'`) instead of "not assignable to type 'undefined'".
 */
export type NoFenceColumn<M extends string> = `${M} has no BigInt column to fence with (add one: fenceToken BigInt @default(0))`

/**
 * `models` of {@link FencingOptions} for client type `C`: each model of the client, with one of its
 * `BigInt` fields (a model without one takes {@link NoFenceColumn}, whose text is the type error's
 * message). Without a client type (`C` unknown), any names (checked when applied).
 */
export type FencedModels<C = unknown> = unknown extends C
  ? Readonly<Record<string, string>>
  : { readonly [M in ClientModelName<C>]?: [BigIntFieldOf<C, M>] extends [never] ? NoFenceColumn<M> : BigIntFieldOf<C, M> }

/**
 * The model names `models` fences: its keys, but those of models without a fence column (the
 * {@link NoFenceColumn} of `FencedModels<C>` when the exact names were not captured).
 */
export type FencedModelNames<F> = {
  [K in keyof F]-?: [Exclude<F[K], undefined>] extends [NoFenceColumn<string>] ? never : K
}[keyof F] &
  string

// Type-level only: nothing at run time has this key.
declare const FENCED_MODELS: unique symbol

/**
 * The type of `db.$fenced`: a client (or transaction client) with its writes fenced by `token`. It
 * also carries, for the type checker only, the `models` that `fencing()` was given, so
 * `fencedTransaction` can take a fenced model only.
 */
export type FencedMethod<M> = (<T extends object>(this: T, token?: FenceTokenInput) => T) & { readonly [FENCED_MODELS]?: M }

/**
 * The fenced model names of a client extended with `fencing()`: exactly the models it was given
 * when their names were captured (`fencing({ models })` with a `const` object), else every model of
 * the schema with a `BigInt` column (`fencing<typeof prisma>(...)`; the exact set is checked when it
 * runs).
 */
export type FencedModelNameOf<C> = C extends { readonly $fenced: { readonly [FENCED_MODELS]?: infer F } } ? FencedModelNames<F> : string

/**
 * Options of {@link fencing}. Give it your client's type, `fencing<typeof prisma>({ ... })`, and a
 * model or field name that your schema does not have — or a field that is not `BigInt` — is a type
 * error.
 */
export interface FencingOptions<C = unknown, M extends FencedModels<C> = FencedModels<C>> {
  /**
   * The fenced models, by Prisma model name, each with the name of its fence column (a `BigInt`
   * field, `@default(0)`). Required, at least one. Example: `{ Product: 'fenceToken' }`.
   */
  models: M
  /**
   * Called once per refused write, before `StaleFencingTokenError` is thrown; what it returns is
   * ignored. Exceptions it throws, and the rejection of a promise it returns, are swallowed:
   * observing must never change what the write does. Default: none.
   */
  onRejection?: (rejection: FencingRejection) => unknown
  /**
   * Called once per fenced write when it settles, accepted or refused (after `onRejection` for a
   * refusal), with its duration: for traces and per-outcome counts (`instrumentOpenTelemetry`'s
   * `onFencedWrite`). Its return value, exceptions and rejections are ignored: observing never
   * changes what the write does. Default: none.
   */
  onFencedWrite?: (write: FencedWriteReport) => unknown
}

/** Options of one {@link fencedTransaction}: which row's fence to raise, and the transaction's limits. */
export interface FencedTransactionOptions<Model extends string = string, Where = Record<string, unknown>> {
  /** The fenced model of the row, e.g. `Product`. */
  model: Model
  /** A unique filter of the row (as for `update`), e.g. `{ sku: 'A-1' }`. */
  where: Where
  /** Wait for a connection to start the transaction, 1 ms to 10 min. Default 2 000. */
  maxWaitMs?: number
  /** Longest run of the transaction before Prisma rolls it back, 1 ms to 1 h. Default 5 000. */
  timeoutMs?: number
  /** PostgreSQL isolation level. Default: the database's (READ COMMITTED), which suits the fence: see docs/FENCING.md. */
  isolationLevel?: 'ReadUncommitted' | 'ReadCommitted' | 'RepeatableRead' | 'Serializable'
}

export interface ResolvedFencingOptions {
  /** Model name → fence column. */
  readonly models: ReadonlyMap<string, string>
  readonly onRejection: ((rejection: FencingRejection) => unknown) | undefined
  readonly onFencedWrite: ((write: FencedWriteReport) => unknown) | undefined
}

// Prisma model and field names are identifiers; anything else cannot name one.
const IDENTIFIER = /^[A-Za-z_][A-Za-z0-9_]*$/

const FENCING_OPTION_NAMES: readonly string[] = ['models', 'onRejection', 'onFencedWrite']

/**
 * The name in `known` that `name` is most likely a slip of (another case, a letter missing, extra
 * or changed: `model` for `models`), or undefined when none is within two edits.
 */
function nearestName(name: string, known: readonly string[]): string | undefined {
  const lower = name.toLowerCase()
  let best: { name: string; distance: number } | undefined
  for (const candidate of known) {
    const distance = editDistance(lower, candidate.toLowerCase())
    if (distance <= 2 && (best === undefined || distance < best.distance)) best = { name: candidate, distance }
  }
  return best?.name
}

/** Levenshtein distance (short option names only). */
function editDistance(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j)
  for (let i = 1; i <= a.length; i++) {
    const current = [i]
    for (let j = 1; j <= b.length; j++) {
      current[j] = Math.min((previous[j] as number) + 1, (current[j - 1] as number) + 1, (previous[j - 1] as number) + (a[i - 1] === b[j - 1] ? 0 : 1))
    }
    previous = current
  }
  return previous[b.length] as number
}

/** Validates {@link FencingOptions} once, before any client exists. Unknown option names are refused, with the name meant when one is near. */
export function resolveFencingOptions(options: unknown): ResolvedFencingOptions {
  if (options === null || typeof options !== 'object') throw new InvalidFencingOptionError('options', 'must be an object', options)
  const o = options as Record<string, unknown>
  for (const key of Object.keys(o)) {
    if (FENCING_OPTION_NAMES.includes(key)) continue
    const near = nearestName(key, FENCING_OPTION_NAMES)
    throw new InvalidFencingOptionError(key, `is not an option of fencing() (${near === undefined ? `the options are ${FENCING_OPTION_NAMES.join(', ')}` : `did you mean ${near}?`})`, o[key])
  }
  const models = o.models
  if (models === null || typeof models !== 'object' || Array.isArray(models)) {
    throw new InvalidFencingOptionError('models', "must be an object of model name to fence column, e.g. { Product: 'fenceToken' }", models)
  }
  const entries = Object.entries(models as Record<string, unknown>)
  if (entries.length === 0) throw new InvalidFencingOptionError('models', 'must name at least one model', models)
  const resolved = new Map<string, string>()
  for (const [model, field] of entries) {
    if (!IDENTIFIER.test(model)) throw new InvalidFencingOptionError('models', 'keys must be Prisma model names', model)
    if (typeof field !== 'string' || !IDENTIFIER.test(field)) {
      throw new InvalidFencingOptionError(`models.${model}`, 'must be the name of the fence column field', field)
    }
    resolved.set(model, field)
  }
  if (o.onRejection !== undefined && typeof o.onRejection !== 'function') {
    throw new InvalidFencingOptionError('onRejection', 'must be a function', o.onRejection)
  }
  if (o.onFencedWrite !== undefined && typeof o.onFencedWrite !== 'function') {
    throw new InvalidFencingOptionError('onFencedWrite', 'must be a function', o.onFencedWrite)
  }
  return {
    models: resolved,
    onRejection: o.onRejection as ResolvedFencingOptions['onRejection'],
    onFencedWrite: o.onFencedWrite as ResolvedFencingOptions['onFencedWrite'],
  }
}

/** Checks an optional integer in milliseconds; the message names the field and its range. */
export function checkOptionalMs(field: string, value: unknown, fallback: number, max: number): number {
  if (value === undefined) return fallback
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 1 || value > max) {
    throw new InvalidFencingOptionError(field, `must be an integer from 1 to ${max}`, value)
  }
  return value
}
