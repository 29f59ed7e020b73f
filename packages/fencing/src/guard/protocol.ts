/**
 * What the database guard and its clients agree on: the SQLSTATEs its refusals raise, the
 * transaction-local settings its triggers read, and the statement that sets them. Read by the
 * guard's SQL (guard/sql), the Prisma extension (the refusals, raw SQL under a token) and the pg
 * path (withFence).
 */

/**
 * The SQLSTATE the guard raises when a write would lower a fence or recreate a key under an
 * older token. Class `FL` is not used by PostgreSQL.
 */
export const FENCE_GUARD_SQLSTATE = 'FL001'

/**
 * The setting a transaction writes its fencing token into for the guard's triggers to read:
 * {@link SET_FENCE_TOKEN_SQL}, which also names the transaction in {@link FENCE_TXID_SETTING}.
 * Decimal digits, 0 to 2^63 − 1.
 */
export const FENCE_TOKEN_SETTING = 'fencelock.token'

/**
 * The setting that names the transaction a token belongs to: the id of the transaction that set
 * {@link FENCE_TOKEN_SETTING} (`pg_current_xact_id()`). The guard refuses a token whose
 * transaction is not the current one (SQLSTATE {@link FENCE_TOKEN_SCOPE_SQLSTATE}): a token set for
 * the session (`SET fencelock.token`, `set_config(..., false)`) stays on a pooled connection after
 * its transaction, and would fence later writes of other code with it.
 */
export const FENCE_TXID_SETTING = 'fencelock.txid'

/**
 * The SQL that sets a transaction's fencing token for the guard, as its first statement; `$1` is the
 * token in decimal digits (`lock.token.toString()`). Both settings are transaction-local: they end
 * with the transaction. The only way to set the token the guard accepts.
 *
 * @example
 * ```ts
 * await client.query('BEGIN')
 * await client.query(SET_FENCE_TOKEN_SQL, [lock.token.toString()])
 * ```
 */
export const SET_FENCE_TOKEN_SQL = `SELECT set_config('${FENCE_TOKEN_SETTING}', $1, true), set_config('${FENCE_TXID_SETTING}', pg_current_xact_id()::text, true)`

/**
 * The SQLSTATE the guard raises for a token that was not set by the current transaction (see
 * {@link FENCE_TXID_SETTING}): a token set for the session, or left by an earlier transaction.
 */
export const FENCE_TOKEN_SCOPE_SQLSTATE = 'FL002'

/**
 * The SQLSTATE the guard raises for a DELETE under the transaction's token that reaches a guarded
 * table through a cascade (or a trigger): the rows there are fenced by their own locks, and the
 * deleter's token says nothing about them — refused, as the Prisma path refuses such a delete.
 */
export const FENCE_CASCADE_SQLSTATE = 'FL003'

/**
 * The SQLSTATE of the strict guard (`strict: true`): a write of a guarded table that carries no
 * fencing token — neither the transaction's (SET_FENCE_TOKEN_SQL) nor a fence raised in this
 * transaction (what `$fenced` does) — is refused. The message and DETAIL name the table.
 */
export const FENCE_STRICT_SQLSTATE = 'FL004'

/**
 * The SQLSTATE of a guard installed without the token path (`tokenPath: false`): a write of its
 * table in a transaction that set the fencing token is refused, since that guard would not fence
 * it. The message and DETAIL name the table.
 */
export const FENCE_NO_TOKEN_PATH_SQLSTATE = 'FL005'
