/**
 * A service as a fenced store: it keeps, in its own database, the newest token it has seen per
 * lock resource, and does the work a request asks for only under a token at least that new.
 * Framework-neutral; `fencing-middleware.ts` puts it behind express.
 */
import { withFenceToken } from '../shared/ambient-token.js'
import { delegateKey } from '../prisma/data-model.js'
import { InvalidFencingOptionError } from '../shared/errors.js'
import { parseFenceToken } from '../shared/fence-token.js'
import { fenceScopeOf } from '../prisma/fenced-client.js'
import { checkLimitsOutsideTransaction, resolveTransactionLimits, type FencedClient, type TransactionClientOf, type TransactionLimits } from '../prisma/fenced-transaction.js'
import { recordFence } from '../prisma/write-steps.js'
import { resourceRule, type FencingClaim } from './fencing-headers.js'

/** Options of {@link withFencedResource}. */
export interface FencedResourceOptions extends TransactionLimits {
  /**
   * The fenced model that holds one row per resource: a `String` key field (`keyField`) and the
   * fence column named in `fencing({ models })`, e.g.
   * `model FencedResource { resource String @id  fenceToken BigInt @default(0) }`, guarded by
   * `fenceGuardSql({ table: 'FencedResource', column: 'fenceToken', key: 'resource' })`. Required.
   */
  model: string
  /** The model's key field, holding the resource name. Default `resource`. */
  keyField?: string
}

const IDENTIFIER = /^[A-Za-z_][A-Za-z0-9_]*$/

/** Checks the options against `db` before any I/O; returns the delegate key, key field and transaction options. */
export function resolveFencedResource(db: unknown, options: FencedResourceOptions): { delegate: string; keyField: string; limits: object } {
  if (db === null || typeof db !== 'object' || typeof (db as FencedClient).$fenced !== 'function' || typeof (db as FencedClient).$transaction !== 'function') {
    throw new InvalidFencingOptionError('db', 'must be a Prisma client extended with fencing()', db)
  }
  if (options === null || typeof options !== 'object') throw new InvalidFencingOptionError('options', 'must be an object', options)
  const scope = fenceScopeOf((db as FencedClient).$fenced(0n))
  const model: unknown = options.model
  if (typeof model !== 'string' || scope === undefined || !scope.options.models.has(model)) {
    throw new InvalidFencingOptionError('model', `must be a fenced model (${scope === undefined ? '?' : [...scope.options.models.keys()].join(', ')})`, model)
  }
  const keyField: unknown = options.keyField ?? 'resource'
  if (typeof keyField !== 'string' || !IDENTIFIER.test(keyField)) throw new InvalidFencingOptionError('keyField', 'must be a field name', keyField)
  const type = scope.dataModel?.get(model)?.scalars.get(keyField)
  if (scope.dataModel !== undefined && type !== 'String') {
    throw new InvalidFencingOptionError('keyField', `must name a String field of ${model}${type === undefined ? '' : ` (it is ${type})`}`, keyField)
  }
  return { delegate: delegateKey(model), keyField, limits: resolveTransactionLimits(options) }
}

/** A claim as the headers carry it: a token, and a resource name by the header functions' rules. */
function checkClaim(claim: unknown): FencingClaim {
  if (claim === null || typeof claim !== 'object') throw new InvalidFencingOptionError('claim', 'must be { token, resource } (readFencingHeaders returns one)', claim)
  const c = claim as { token?: unknown; resource?: unknown }
  // A bad token is an InvalidFenceTokenError, as everywhere else.
  const token = parseFenceToken(c.token)
  const rule = resourceRule(c.resource)
  if (rule !== undefined) throw new InvalidFencingOptionError('claim.resource', rule, c.resource)
  return { token, resource: c.resource as string }
}

/**
 * Runs `fn` in one transaction of `db` that first records `claim.token` as the newest token of
 * `claim.resource` — a fenced upsert of the resource's row (a conditional UPDATE; for a new
 * resource an INSERT ... ON CONFLICT DO NOTHING after it), which also takes its row lock — so a request with an older token fails there with `StaleFencingTokenError` and `fn` does
 * not run, and two requests for one resource do their work one after the other. `fn` gets the
 * transaction client, with the claim's token ambient. The claim and the options are checked before
 * any I/O (`InvalidFencingOptionError`: a claim that is not `{ token, resource }`, a bad token, a
 * resource the header functions refuse).
 *
 * @example
 * ```ts
 * const claim = readFencingHeaders((name) => req.headers[name.toLowerCase()])
 * const charge = await withFencedResource(db, claim, { model: 'FencedResource' }, (tx) =>
 *   tx.charge.create({ data: { orderId, amountCents } }),
 * )
 * ```
 */
export async function withFencedResource<C extends FencedClient, R>(
  db: C,
  claim: FencingClaim,
  options: FencedResourceOptions,
  fn: (tx: TransactionClientOf<C>) => Promise<R>,
): Promise<R> {
  const { delegate, keyField, limits } = resolveFencedResource(db, options)
  checkLimitsOutsideTransaction(db, options)
  const model = options.model
  if (typeof fn !== 'function') throw new InvalidFencingOptionError('fn', 'must be a function', fn)
  const { token, resource } = checkClaim(claim)
  db.$fenced(token)
  const run = async (tx: TransactionClientOf<C> & { $fenced(token: bigint): Record<string, object> }): Promise<R> => {
    const scope = fenceScopeOf(tx.$fenced(token))
    if (scope === undefined || (tx as unknown as Record<string, unknown>)[delegate] === undefined) {
      throw new InvalidFencingOptionError('model', 'must be a model of this Prisma client', options.model)
    }
    // A fenced upsert of the resource's row: `fence <= token` raised to the token, or the row created with it.
    await recordFence(tx, model, scope.options.models.get(model) as string, scope, { [keyField]: resource }, { [keyField]: resource })
    return withFenceToken(token, () => fn(tx))
  }
  return (db.$transaction as (fn: (tx: never) => Promise<R>, options: object) => Promise<R>)(run as never, limits)
}
