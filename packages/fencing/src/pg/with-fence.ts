/**
 * `withFence`: one transaction of a `pg` connection that writes under a fencing token, which the
 * database guard's triggers read (`fencelock.token`), for clients that cannot add the fencing
 * condition themselves.
 */
import { FenceTransactionLostError, StaleFencingTokenError, InvalidFencingOptionError, InvalidFenceTokenError, UnsupportedFencedWriteError } from '../shared/errors.js'
import { FENCE_CASCADE_SQLSTATE, FENCE_TOKEN_SCOPE_SQLSTATE, FENCE_TOKEN_SETTING, FENCE_TXID_SETTING } from '../guard/protocol.js'
import { parseFenceToken, type FenceTokenInput } from '../shared/fence-token.js'
import { fenceGuardRefusal } from '../guard/refusal.js'

/** One connection that runs SQL: a `pg.Client`, or a client from `pool.connect()` (structural, so `pg` is not a dependency). */
export interface FenceConnection {
  query(text: string, values?: unknown[]): Promise<unknown>
}

/**
 * Runs `fn(client)` in one transaction of `client` that writes under `token`: `BEGIN`, then
 * the token and the transaction's id (`fencelock.token`, `fencelock.txid`), then `fn`, then `COMMIT` — or
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
    // The token and the transaction's id (taken now: it assigns one), set for the session, not
    // the transaction: if fn's own COMMIT ends this transaction, they stay, naming a transaction
    // that is over, and the guard refuses every write fn then sends outside it (FL002). At COMMIT
    // the transaction in progress must still be this one: an id is never reused, so that is exact.
    const begun = await client.query(
      `SELECT set_config('${FENCE_TOKEN_SETTING}', $1, false), set_config('${FENCE_TXID_SETTING}', pg_current_xact_id()::text, false) AS xid`,
      [value.toString()],
    )
    const xid = firstRow(begun)?.xid
    result = await fn(client)
    await commitChecked(client, value, xid)
  } catch (error) {
    // A failed COMMIT has ended the transaction already; a ROLLBACK then only warns.
    await client.query('ROLLBACK').catch(() => {})
    // Settings made in a transaction that committed (fn's COMMIT) outlive it: clear them.
    await client.query(CLEAR).catch(() => {})
    if (error instanceof FenceTransactionLostError) throw error
    if (sqlStateOf(error) === FENCE_TOKEN_SCOPE_SQLSTATE) throw new FenceTransactionLostError('ended', value, error)
    if (sqlStateOf(error) === FENCE_CASCADE_SQLSTATE) {
      const table = cascadeTable(error)
      throw new UnsupportedFencedWriteError(table, 'delete', 'cascade', table, `reached ${table} through a cascade (or a trigger) under the token: delete those rows first, each under its own lock's token, or make the foreign key ON DELETE RESTRICT`)
    }
    const refusal = fenceGuardRefusal(error)
    if (refusal === undefined) throw error
    throw new StaleFencingTokenError(refusal.table ?? 'unknown table', refusal.operation ?? 'write', value, refusal.storedToken, error)
  }
  return result
}

const CLEAR = `SELECT set_config('${FENCE_TOKEN_SETTING}', '', false), set_config('${FENCE_TXID_SETTING}', '', false)`

/**
 * COMMITs withFence's transaction if it is still the one withFence opened, with its token: else
 * throws `FenceTransactionLostError` (the caller rolls back whatever is in progress). The same
 * statement clears the session's settings (read first: `OFFSET 0` keeps the inner query apart), so
 * they end with the COMMIT. Then reads what COMMIT answered: PostgreSQL answers an aborted
 * transaction's COMMIT with ROLLBACK.
 */
async function commitChecked(client: FenceConnection, token: bigint, xid: unknown): Promise<void> {
  let state: Record<string, unknown> | undefined
  try {
    state = firstRow(
      await client.query(
        `SELECT s.xid, s.token, set_config('${FENCE_TOKEN_SETTING}', '', false), set_config('${FENCE_TXID_SETTING}', '', false)
           FROM (SELECT pg_current_xact_id_if_assigned()::text AS xid, current_setting('${FENCE_TOKEN_SETTING}', true) AS token OFFSET 0) s`,
      ),
    )
  } catch (error) {
    // 25P02: "current transaction is aborted" — an error fn caught; COMMIT would answer ROLLBACK.
    if (sqlStateOf(error) === '25P02') throw new FenceTransactionLostError('rolled-back', token, error)
    throw error
  }
  if (typeof xid !== 'string' || state?.xid !== xid) throw new FenceTransactionLostError('ended', token)
  if (state.token !== token.toString()) throw new FenceTransactionLostError('token-changed', token)
  const committed = await client.query('COMMIT')
  if ((committed as { command?: unknown }).command === 'ROLLBACK') throw new FenceTransactionLostError('rolled-back', token)
}

/** The table a cascade refusal names in its detail. */
function cascadeTable(error: unknown, depth = 0): string {
  if (error === null || typeof error !== 'object' || depth > 4) return 'unknown table'
  const e = error as { code?: unknown; detail?: unknown; cause?: unknown }
  if (e.code === FENCE_CASCADE_SQLSTATE && typeof e.detail === 'string') {
    try {
      const table = (JSON.parse(e.detail) as { table?: unknown }).table
      if (typeof table === 'string') return table
    } catch {
      // not our detail
    }
  }
  return cascadeTable(e.cause, depth + 1)
}

/** The SQLSTATE of a database error (pg's `code`), or of the one it wraps. */
function sqlStateOf(error: unknown, depth = 0): unknown {
  if (error === null || typeof error !== 'object' || depth > 4) return undefined
  const e = error as { code?: unknown; cause?: unknown }
  return typeof e.code === 'string' && /^[0-9A-Z]{5}$/.test(e.code) ? e.code : sqlStateOf(e.cause, depth + 1)
}

/** The first row of a `pg` result, when it has one. */
function firstRow(result: unknown): Record<string, unknown> | undefined {
  const rows = (result as { rows?: unknown } | undefined)?.rows
  return Array.isArray(rows) && rows[0] !== null && typeof rows[0] === 'object' ? (rows[0] as Record<string, unknown>) : undefined
}

/** A `pg.Pool` (or one like it): it hands out connections and counts them. */
function isPool(client: object): boolean {
  const c = client as { connect?: unknown; totalCount?: unknown; idleCount?: unknown }
  return typeof c.connect === 'function' && typeof c.totalCount === 'number' && typeof c.idleCount === 'number'
}
