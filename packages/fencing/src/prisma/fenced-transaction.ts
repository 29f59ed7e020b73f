import { withFenceToken } from '../shared/ambient-token.js'
import { delegateKey } from './data-model.js'
import { InvalidFencingOptionError } from '../shared/errors.js'
import { parseFenceToken, type FenceTokenInput } from '../shared/fence-token.js'
import { fenceScopeOf } from './fenced-client.js'
import { invoke } from './fenced-call.js'
import { checkOptionalMs, FENCING_DEFAULTS, type FencedModelNameOf, type FencedTransactionOptions } from './options.js'

/** A client extended with `fencing()`: what {@link fencedTransaction} runs on. */
export interface FencedClient {
  $fenced(token?: FenceTokenInput): unknown
  $transaction(...args: never[]): Promise<unknown>
}

/** The transaction client `db.$transaction(async (tx) => ...)` hands out for the client type `C`. */
export type TransactionClientOf<C> = C extends { $transaction<R>(fn: (tx: infer TX) => Promise<R>, options?: never): Promise<R> }
  ? TX
  : C extends { $transaction(fn: (tx: infer TX) => Promise<unknown>, ...rest: never[]): Promise<unknown> }
    ? TX
    : never

/** The model names of a client type: `Product` for its `product` delegate. */
export type ModelNameOf<C> = {
  [K in keyof C & string]: K extends `$${string}` | `_${string}` ? never : C[K] extends { findUnique: (...args: never[]) => unknown } ? Capitalize<K> : never
}[keyof C & string]

/** The row of model `M` in client type `C` (its scalar fields), as `update` returns it. */
export type RowOf<C, M extends string> = C[Uncapitalize<M> & keyof C] extends { update(args: never): PromiseLike<infer Row> } ? Row : Record<string, unknown>

/** The unique filter of model `M` in client type `C`, as `update` takes it. */
export type WhereUniqueOf<C, M extends string> = C[Uncapitalize<M> & keyof C] extends { findUniqueOrThrow(args: { where: infer W }): unknown }
  ? W
  : Record<string, unknown>

const ISOLATION_LEVELS = new Set(['ReadUncommitted', 'ReadCommitted', 'RepeatableRead', 'Serializable'])

/**
 * Runs `fn` in an interactive transaction whose first statement raises the fence of one row:
 * a conditional `UPDATE ... SET fence = token WHERE <where> AND fence <= token`, which also
 * takes the row lock. So everything `fn` reads afterwards is the row as a current holder sees
 * it, and a stale token fails at that first statement with `StaleFencingTokenError`: `fn` does
 * not run and nothing commits. `fn` gets the transaction client fenced with `token` and the row as
 * that first statement returned it (locked, its fence raised: no need to read it again), and runs
 * with `token` as the ambient token (`tx.$fenced()` needs no argument).
 *
 * The token and options are checked before any query. A missing row fails as Prisma's `update`
 * does (P2025).
 *
 * @example
 * ```ts
 * await fencedTransaction(db, lock.token, { model: 'Product', where: { sku } }, async (tx, product) => {
 *   if (product.stock < 1) throw new SoldOutError(sku)
 *   await tx.product.update({ where: { sku }, data: { stock: product.stock - 1 } })
 *   return tx.order.create({ data: { productId: product.id, buyerId, quantity: 1 } })
 * })
 * ```
 */
export async function fencedTransaction<C extends FencedClient, M extends ModelNameOf<TransactionClientOf<C>> & FencedModelNameOf<C>, R>(
  db: C,
  token: FenceTokenInput,
  options: FencedTransactionOptions<M, WhereUniqueOf<TransactionClientOf<C>, M>>,
  fn: (tx: TransactionClientOf<C>, row: RowOf<TransactionClientOf<C>, M>) => Promise<R>,
): Promise<R> {
  const value = parseFenceToken(token)
  if (db === null || typeof db !== 'object' || typeof db.$fenced !== 'function' || typeof db.$transaction !== 'function') {
    throw new InvalidFencingOptionError('db', 'must be a Prisma client extended with fencing()', db)
  }
  if (options === null || typeof options !== 'object') throw new InvalidFencingOptionError('options', 'must be an object', options)
  if (typeof fn !== 'function') throw new InvalidFencingOptionError('fn', 'must be a function', fn)
  const model: unknown = options.model
  const where: unknown = options.where
  // Making a fenced view sends nothing; it tells us which models are fenced, and with what column.
  const scope = fenceScopeOf(db.$fenced(value))
  const field = typeof model === 'string' ? scope?.options.models.get(model) : undefined
  if (scope === undefined || field === undefined) {
    throw new InvalidFencingOptionError('model', `must be a fenced model (${scope === undefined ? '?' : [...scope.options.models.keys()].join(', ')})`, model)
  }
  if (where === null || typeof where !== 'object') throw new InvalidFencingOptionError('where', 'must be a unique filter of the row', where)
  const txOptions = resolveTransactionLimits(options)
  checkLimitsOutsideTransaction(db, options)

  const run = async (tx: { $fenced(token: bigint): unknown }): Promise<R> => {
    const fenced = tx.$fenced(value) as Record<string, object>
    const delegate = fenced[delegateKey(model as string)]
    if (delegate === undefined) throw new InvalidFencingOptionError('model', 'must be a model of this Prisma client', model)
    // The fence first: `data: {}` becomes `{ [field]: token }`, under the condition. Its
    // RETURNING is the row as this transaction holds it (locked, fence raised): handed to `fn`,
    // which then need not read it again.
    const row = await invoke(delegate, 'update', { where, data: {} })
    return withFenceToken(value, () => fn(fenced as TransactionClientOf<C>, row as RowOf<TransactionClientOf<C>, M>))
  }
  return (db.$transaction as (fn: (tx: never) => Promise<R>, options: object) => Promise<R>)(run, txOptions)
}

/**
 * Inside the caller's transaction (a transaction client: Prisma removes its `$connect`) the work
 * runs in a savepoint of it, and Prisma ignores a nested transaction's isolation level, `maxWait`
 * and `timeout`: asking for them there is refused rather than silently not done.
 */
export function checkLimitsOutsideTransaction(db: object, options: TransactionLimits): void {
  if (typeof (db as { $connect?: unknown }).$connect === 'function') return
  for (const field of ['isolationLevel', 'maxWaitMs', 'timeoutMs'] as const) {
    if (options[field] !== undefined) {
      throw new InvalidFencingOptionError(field, 'cannot be set inside your transaction (this runs in a savepoint of it, whose level and limits are the transaction’s): set it on your $transaction', options[field])
    }
  }
}

/** The limits of a transaction this package opens for the caller. */
export interface TransactionLimits {
  maxWaitMs?: number
  timeoutMs?: number
  isolationLevel?: 'ReadUncommitted' | 'ReadCommitted' | 'RepeatableRead' | 'Serializable'
}

/** Checks {@link TransactionLimits} (before any I/O) and returns them as Prisma's `$transaction` options. */
export function resolveTransactionLimits(options: TransactionLimits): { maxWait: number; timeout: number; isolationLevel?: string } {
  const maxWait = checkOptionalMs('maxWaitMs', options.maxWaitMs, FENCING_DEFAULTS.maxWaitMs, 600_000)
  const timeout = checkOptionalMs('timeoutMs', options.timeoutMs, FENCING_DEFAULTS.timeoutMs, 3_600_000)
  const isolationLevel: unknown = options.isolationLevel
  if (isolationLevel !== undefined && (typeof isolationLevel !== 'string' || !ISOLATION_LEVELS.has(isolationLevel))) {
    throw new InvalidFencingOptionError('isolationLevel', `must be one of ${[...ISOLATION_LEVELS].join(', ')}`, isolationLevel)
  }
  return isolationLevel === undefined ? { maxWait, timeout } : { maxWait, timeout, isolationLevel }
}
