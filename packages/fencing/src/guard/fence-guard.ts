/**
 * The database guard: SQL for the user's own migration that makes PostgreSQL itself enforce the
 * fence, whatever client writes (the plain Prisma client, `$executeRaw`, psql, Drizzle, Kysely,
 * another service).
 *
 * - An UPDATE that would lower the fence column fails.
 * - A row's fence outlives the row: every key the table has held is remembered in a tombstone
 *   table with the highest fence it was inserted, deleted or re-keyed away with, and a row cannot
 *   be inserted (or re-keyed) under a fence below that. TRUNCATE keeps the fences of the rows it
 *   removes. A NULL key names no row (as for a unique constraint) and leaves no tombstone.
 * - A transaction that set `fencelock.token` with `SET_FENCE_TOKEN_SQL` writes under that
 *   token (a token not set by the current transaction is refused, see `FENCE_TXID_SETTING`): an UPDATE or DELETE of a row whose fence is newer fails, and the fence of
 *   every row it inserts or updates is raised to the token (a DELETE leaves the token in the
 *   tombstone). That is fencing for clients that cannot add the condition themselves.
 * - The tombstones are never lowered nor deleted row by row.
 *
 * Every refusal raises SQLSTATE `FENCE_GUARD_SQLSTATE` (FL001); the fencing extension and
 * `withFence` map it to `StaleFencingTokenError`.
 */
import { resolveFenceGuardOptions, type FenceGuardOptions } from './guard-options.js'
import { objectNames, type FenceGuardObjects } from './names.js'
import { guardScript } from './sql/guard-script.js'

export type { FenceGuardOptions } from './guard-options.js'
export type { FenceGuardObjects } from './names.js'

/** The names {@link fenceGuardSql} gives to the objects it creates, for `name` (default `<table>_fence`). */
export function fenceGuardObjects(options: FenceGuardOptions): FenceGuardObjects {
  return objectNames(resolveFenceGuardOptions(options).name)
}

/**
 * The SQL that installs the database guard on one table, for your own migration (put its
 * output in `prisma/migrations/<timestamp>_<name>/migration.sql`). It creates a tombstone table,
 * five functions and eight triggers (names from `name`, see {@link fenceGuardObjects}), in one
 * script meant to run in the migration's transaction. Throws `InvalidFencingOptionError` for a
 * bad or unknown option; it does no I/O.
 *
 * What PostgreSQL then enforces, for any client (SQLSTATE `FENCE_GUARD_SQLSTATE` (FL001)):
 * an UPDATE that lowers the fence fails; an INSERT, or an UPDATE that changes the key, fails
 * when the key was earlier held with a higher fence (a key a row leaves, by DELETE or re-key,
 * keeps the highest of the row's old and new fence); TRUNCATE records the fences of the rows it
 * removes; the tombstones cannot be lowered or deleted row by row (TRUNCATE of the tombstone table
 * is the deliberate reset, for when no old holder can still run). In a transaction that set
 * `fencelock.token`, an UPDATE or DELETE of a row whose fence is above the token fails,
 * and every row it inserts or updates gets at least the token as its fence.
 *
 * Costs (docs/FENCING.md): an UPDATE that does not set the fence or the key pays a column-list
 * test and one setting lookup; one that does, a `WHEN` test that is false unless the fence goes
 * down; an INSERT or DELETE writes one tombstone row (one per key ever used, never removed). The
 * lowering check is `UPDATE OF` the fence and the key columns, so a BEFORE trigger of yours that
 * changes the fence on an UPDATE that does not set it is not checked.
 *
 * A partitioned table, or a partition, is refused when the SQL runs (SQLSTATE `0A000`): a row
 * moved to another partition by an UPDATE is deleted and inserted, out of reach of the UPDATE triggers.
 *
 * A guard installed by an earlier version of this function is brought up to date, tombstones
 * kept, by {@link fenceGuardUpgradeSql}.
 *
 * @example
 * ```ts
 * import { fenceGuardSql } from '@fencelock/fencing'
 * writeFileSync('prisma/migrations/20260101000000_fence_guard/migration.sql',
 *   fenceGuardSql({ table: 'Product', column: 'fenceToken', key: 'sku' }))
 * ```
 */
export function fenceGuardSql(options: FenceGuardOptions): string {
  return guardScript(resolveFenceGuardOptions(options), 'install')
}

/**
 * The SQL that brings a guard installed by any earlier `fenceGuardSql` (same options) to this
 * version: it replaces the guard's functions and triggers and keeps its tombstone table, for a new
 * migration of its own (never edit the applied one). What the table then enforces is exactly what
 * `fenceGuardSql` installs today. Throws `InvalidFencingOptionError` for a bad or unknown option.
 */
export function fenceGuardUpgradeSql(options: FenceGuardOptions): string {
  return guardScript(resolveFenceGuardOptions(options), 'upgrade')
}
