/**
 * `@fencelock/fencing/pg`: fencing for any client that speaks to PostgreSQL through `pg` (raw SQL,
 * Drizzle, Kysely, TypeORM, ...). No Prisma here: the database guard (`fenceGuardSql`) does the
 * fencing, reading the transaction's token (`fencelock.token`) in its triggers.
 */
import { StaleFencingTokenError, InvalidFencingOptionError, InvalidFenceTokenError } from './errors.js'
import { FENCE_TOKEN_SETTING } from './fence-guard.js'
import { parseFenceToken, type FenceTokenInput } from './fence-token.js'
import { fenceGuardRefusal } from './guard-error.js'

export { FENCE_TOKEN_SETTING } from './fence-guard.js'
export { isFenceGuardError } from './guard-error.js'
export { StaleFencingTokenError, InvalidFenceTokenError, InvalidFencingOptionError, FencingError } from './errors.js'
export type { FenceTokenInput } from './fence-token.js'

/** One connection that runs SQL: a `pg.Client`, or a client from `pool.connect()` (structural, so `pg` is not a dependency). */
export interface FenceConnection {
  query(text: string, values?: unknown[]): Promise<unknown>
}

/**
 * Runs `fn(client)` in one transaction of `client` that writes under `token`: `BEGIN`, then
 * `set_config('fencelock.token', token, true)` (transaction-local), then `fn`, then `COMMIT` — or
 * `ROLLBACK` when `fn` throws or the database refuses. On a table with the database guard
 * (`fenceGuardSql`), every UPDATE or DELETE of that transaction on a row whose fence is newer than
 * `token` fails, and every row it inserts or updates gets the token as its fence (at least): the
 * fencing condition, added by the database for a client that cannot add it. A refusal rolls the
 * whole transaction back and throws `StaleFencingTokenError` (`model` is the table).
 *
 * Checked before any I/O: `token` must be a positive bigint, or a string of digits, at most
 * 2^63 − 1 (`InvalidFenceTokenError`); `client` one connection, not a pool — a pool runs each
 * query on any of its connections, outside the transaction (`InvalidFencingOptionError`). The
 * client must not be inside a transaction already: `BEGIN` would not start one, and `COMMIT` would
 * end the caller's.
 *
 * @example
 * ```ts
 * const client = await pool.connect()
 * try {
 *   await withFence(client, lock.token, (c) => c.query('UPDATE "Product" SET stock = stock - 1 WHERE sku = $1', [sku]))
 * } finally {
 *   client.release()
 * }
 * ```
 */
export async function withFence<C extends FenceConnection, R>(client: C, token: FenceTokenInput, fn: (client: C) => Promise<R>): Promise<R> {
  const value = parseFenceToken(token)
  if (value <= 0n) throw new InvalidFenceTokenError('must be positive (1 to 9223372036854775807)', token)
  if (client === null || typeof client !== 'object' || typeof (client as { query?: unknown }).query !== 'function') {
    throw new InvalidFencingOptionError('client', 'must be a pg client (pg.Client, or a client from pool.connect())', client)
  }
  if (isPool(client)) throw new InvalidFencingOptionError('client', 'must be one connection, not a pool: take one with pool.connect() (and release it)', 'a pool')
  if (typeof fn !== 'function') throw new InvalidFencingOptionError('fn', 'must be a function', fn)

  await client.query('BEGIN')
  let result: R
  try {
    await client.query(`SELECT set_config('${FENCE_TOKEN_SETTING}', $1, true)`, [value.toString()])
    result = await fn(client)
    await client.query('COMMIT')
  } catch (error) {
    // A failed COMMIT has ended the transaction already; a ROLLBACK then only warns.
    await client.query('ROLLBACK').catch(() => {})
    const refusal = fenceGuardRefusal(error)
    if (refusal === undefined) throw error
    throw new StaleFencingTokenError(refusal.table ?? 'unknown table', refusal.operation ?? 'write', value, refusal.storedToken, error)
  }
  return result
}

/** A `pg.Pool` (or one like it): it hands out connections and counts them. */
function isPool(client: object): boolean {
  const c = client as { connect?: unknown; totalCount?: unknown; idleCount?: unknown }
  return typeof c.connect === 'function' && typeof c.totalCount === 'number' && typeof c.idleCount === 'number'
}
