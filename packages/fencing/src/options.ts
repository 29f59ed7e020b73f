import { InvalidFencingOptionError } from './errors.js'

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

/** Options of {@link fencing}. */
export interface FencingOptions {
  /**
   * The fenced models, by Prisma model name, each with the name of its fence column (a `BigInt`
   * field, `@default(0)`). Required, at least one. Example: `{ Product: 'fenceToken' }`.
   */
  models: Readonly<Record<string, string>>
  /**
   * Called once per refused write, before `StaleFencingTokenError` is thrown. Exceptions it
   * throws are swallowed: observing must never change what the write does. Default: none.
   */
  onRejection?: (rejection: FencingRejection) => void
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
  readonly onRejection: ((rejection: FencingRejection) => void) | undefined
}

// Prisma model and field names are identifiers; anything else cannot name one.
const IDENTIFIER = /^[A-Za-z_][A-Za-z0-9_]*$/

/** Validates {@link FencingOptions} once, before any client exists. */
export function resolveFencingOptions(options: unknown): ResolvedFencingOptions {
  if (options === null || typeof options !== 'object') throw new InvalidFencingOptionError('options', 'must be an object', options)
  const o = options as Record<string, unknown>
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
  return { models: resolved, onRejection: o.onRejection as ResolvedFencingOptions['onRejection'] }
}

/** Checks an optional integer in milliseconds; the message names the field and its range. */
export function checkOptionalMs(field: string, value: unknown, fallback: number, max: number): number {
  if (value === undefined) return fallback
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 1 || value > max) {
    throw new InvalidFencingOptionError(field, `must be an integer from 1 to ${max}`, value)
  }
  return value
}
