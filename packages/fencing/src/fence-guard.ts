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
 * - A transaction that set `fencelock.token` (`SET LOCAL`, or `set_config(..., true)`) writes
 *   under that token: an UPDATE or DELETE of a row whose fence is newer fails, and the fence of
 *   every row it inserts or updates is raised to the token (a DELETE leaves the token in the
 *   tombstone). That is fencing for clients that cannot add the condition themselves.
 * - The tombstones are never lowered nor deleted row by row.
 *
 * Every refusal raises SQLSTATE {@link FENCE_GUARD_SQLSTATE}; the fencing extension and
 * `withFence` map it to `StaleFencingTokenError`.
 */
import { InvalidFencingOptionError } from './errors.js'

/**
 * The SQLSTATE the guard raises when a write would lower a fence or recreate a key under an
 * older token. Class `FL` is not used by PostgreSQL.
 */
export const FENCE_GUARD_SQLSTATE = 'FL001'

/**
 * The setting a transaction writes its fencing token into for the guard's triggers to read:
 * `SELECT set_config('fencelock.token', '42', true)` (transaction-local; `SET LOCAL
 * fencelock.token = '42'` is the same). Decimal digits, 0 to 2^63 − 1.
 */
export const FENCE_TOKEN_SETTING = 'fencelock.token'

/** Options of {@link fenceGuardSql}. Names are the database's (a model's `@@map`, a field's `@map`), not Prisma's. */
export interface FenceGuardOptions {
  /** The table, e.g. `Product`. Required. */
  table: string
  /** Its fence column: `BIGINT NOT NULL`, e.g. `fenceToken`. Required. */
  column: string
  /**
   * The column, or columns, that name a row across its deletion and re-creation: a primary key
   * or a unique constraint, e.g. `sku`. Required. The tombstone table gets the same columns. A
   * nullable key is fine: a row whose key has a NULL names no key, and leaves no tombstone.
   */
  key: string | readonly string[]
  /**
   * The schema of the table. Default: none, so the SQL acts on the schema the migration runs in
   * (the first of `search_path`), and the guard's functions keep using that schema whatever
   * `search_path` the writing session has.
   */
  schema?: string
  /**
   * Prefix of every object the guard creates. Default `<table>_fence`: the tombstone table
   * `<table>_fence_tombstones`, the functions and triggers `<table>_fence_*`.
   */
  name?: string
}

/** What {@link fenceGuardSql} creates, by name (without the schema). */
export interface FenceGuardObjects {
  readonly tombstoneTable: string
  readonly functions: readonly string[]
  readonly triggers: readonly string[]
}

// PostgreSQL cuts identifiers at 63 bytes without an error; a cut name could collide.
const MAX_IDENTIFIER_BYTES = 63

/** The names {@link fenceGuardSql} gives to the objects it creates, for `name` (default `<table>_fence`). */
export function fenceGuardObjects(options: FenceGuardOptions): FenceGuardObjects {
  const o = resolveFenceGuardOptions(options)
  return objectNames(o.name)
}

/** The names a guard installed with the default `name` has on `table` (for checking it, without the other options). */
export function defaultGuardObjects(table: string): FenceGuardObjects {
  return objectNames(`${table}_fence`)
}

const SUFFIXES = {
  tombstoneTable: '_tombstones',
  functions: ['_refuse_lower', '_remember', '_on_truncate', '_keep_tombstones', '_token'],
  triggers: ['_refuse_lower', '_on_insert', '_on_delete', '_on_rekey', '_on_truncate', '_tombstone_delete', '_tombstone_update', '_token'],
} as const
const LONGEST_SUFFIX = Math.max(...[SUFFIXES.tombstoneTable, ...SUFFIXES.functions, ...SUFFIXES.triggers].map((x) => x.length))

function objectNames(name: string): FenceGuardObjects {
  return {
    tombstoneTable: name + SUFFIXES.tombstoneTable,
    functions: SUFFIXES.functions.map((x) => name + x),
    triggers: SUFFIXES.triggers.map((x) => name + x),
  }
}

interface ResolvedFenceGuardOptions {
  readonly table: string
  readonly column: string
  readonly key: readonly string[]
  readonly schema: string | undefined
  readonly name: string
}

const OPTION_NAMES = new Set(['table', 'column', 'key', 'schema', 'name'])

function identifier(field: string, value: unknown, reserve = 0): string {
  if (typeof value !== 'string' || value.length === 0 || value.includes('\0')) {
    throw new InvalidFencingOptionError(field, 'must be a non-empty name without NUL characters', value)
  }
  const max = MAX_IDENTIFIER_BYTES - reserve
  if (Buffer.byteLength(value, 'utf8') > max) {
    throw new InvalidFencingOptionError(field, `must be at most ${max} bytes${reserve > 0 ? ' (PostgreSQL names are at most 63, and the guard appends to it)' : ''}`, value)
  }
  return value
}

function resolveFenceGuardOptions(options: unknown): ResolvedFenceGuardOptions {
  if (options === null || typeof options !== 'object') throw new InvalidFencingOptionError('options', 'must be an object', options)
  const o = options as Record<string, unknown>
  for (const key of Object.keys(o)) {
    if (!OPTION_NAMES.has(key)) throw new InvalidFencingOptionError(key, `is not an option of fenceGuardSql (${[...OPTION_NAMES].join(', ')})`, o[key])
  }
  const table = identifier('table', o.table)
  const column = identifier('column', o.column)
  const rawKey = typeof o.key === 'string' ? [o.key] : o.key
  if (!Array.isArray(rawKey) || rawKey.length === 0) {
    throw new InvalidFencingOptionError('key', 'must be a column name or a non-empty array of column names', o.key)
  }
  const key = rawKey.map((k, i) => identifier(`key[${i}]`, k))
  if (new Set(key).size !== key.length) throw new InvalidFencingOptionError('key', 'must not name a column twice', o.key)
  if (key.includes(column)) throw new InvalidFencingOptionError('key', 'must not include the fence column', o.key)
  const schema = o.schema === undefined ? undefined : identifier('schema', o.schema)
  // The default prefix is the table's name: a long table name needs a shorter `name`.
  const name = o.name === undefined ? `${identifier('table', table, LONGEST_SUFFIX + '_fence'.length)}_fence` : identifier('name', o.name, LONGEST_SUFFIX)
  return { table, column, key, schema, name }
}

/** Quotes a PostgreSQL identifier. */
function q(name: string): string {
  return `"${name.replaceAll('"', '""')}"`
}

/** Quotes a string literal. */
function lit(text: string): string {
  return `'${text.replaceAll("'", "''")}'`
}

/** A name as a comment shows it: a line break in a quoted name would end the comment and start SQL. */
function shown(name: string): string {
  return q(name).replace(/[\p{Cc}\p{Zl}\p{Zp}]/gu, '?')
}

/**
 * The tag of the functions' dollar quotes: `$fencelock$`, unless a name contains that; then
 * `$fencelock_1$`, ... — the first no name contains, so no name can end a function body early.
 */
function dollarTag(o: ResolvedFenceGuardOptions): string {
  const names = [o.table, o.column, ...o.key, o.schema ?? '', o.name]
  let tag = '$fencelock$'
  for (let n = 1; names.some((name) => name.includes(tag)); n++) tag = `$fencelock_${n}$`
  return tag
}

/**
 * The SQL that installs the database guard on one table, for your own migration (put its
 * output in `prisma/migrations/<timestamp>_<name>/migration.sql`). It creates a tombstone table,
 * five functions and eight triggers (names from `name`, see {@link fenceGuardObjects}), in one
 * script meant to run in the migration's transaction. Throws `InvalidFencingOptionError` for a
 * bad or unknown option; it does no I/O.
 *
 * What PostgreSQL then enforces, for any client (SQLSTATE {@link FENCE_GUARD_SQLSTATE}):
 * an UPDATE that lowers the fence fails; an INSERT, or an UPDATE that changes the key, fails
 * when the key was earlier held with a higher fence (a key a row leaves, by DELETE or re-key,
 * keeps the highest of the row's old and new fence); TRUNCATE records the fences of the rows it
 * removes; the tombstones cannot be lowered or deleted row by row (TRUNCATE of the tombstone table
 * is the deliberate reset, for when no old holder can still run). In a transaction that set
 * {@link FENCE_TOKEN_SETTING}, an UPDATE or DELETE of a row whose fence is above the token fails,
 * and every row it inserts or updates gets at least the token as its fence.
 *
 * Costs (docs/FENCING.md): an UPDATE that does not set the fence or the key pays a column-list
 * test and one setting lookup; one that does, a `WHEN` test that is false unless the fence goes
 * down; an INSERT or DELETE writes one tombstone row (one per key ever used, never removed). The
 * lowering check is `UPDATE OF` the fence and the key columns, so a BEFORE trigger of yours that
 * changes the fence on an UPDATE that does not set it is not checked.
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
  return guardSql(resolveFenceGuardOptions(options), 'install')
}

/**
 * The SQL that brings a guard installed by any earlier `fenceGuardSql` (same options) to this
 * version: it replaces the guard's functions and triggers and keeps its tombstone table, for a new
 * migration of its own (never edit the applied one). What the table then enforces is exactly what
 * `fenceGuardSql` installs today. Throws `InvalidFencingOptionError` for a bad or unknown option.
 */
export function fenceGuardUpgradeSql(options: FenceGuardOptions): string {
  return guardSql(resolveFenceGuardOptions(options), 'upgrade')
}

function guardSql(o: ResolvedFenceGuardOptions, mode: 'install' | 'upgrade'): string {
  const names = objectNames(o.name)
  const s = o.schema === undefined ? '' : `${q(o.schema)}.`
  const table = `${s}${q(o.table)}`
  const tombstones = `${s}${q(names.tombstoneTable)}`
  const fn = (n: string) => `${s}${q(n)}`
  const [refuseLower, remember, onTruncate, keepTombstones, tokenFn] = names.functions as [string, string, string, string, string]
  const f = q(o.column)
  const keys = o.key.map(q).join(', ')
  const oldKeys = o.key.map((k) => `OLD.${q(k)}`).join(', ')
  const newKeys = o.key.map((k) => `NEW.${q(k)}`).join(', ')
  const $ = dollarTag(o)
  // Without a schema the functions resolve names in the schema they were created in, whatever
  // search_path the writing session has (a client on another schema, `SET search_path`).
  const pin = o.schema === undefined ? '\n  SET search_path FROM CURRENT' : ''
  const detail = (stored: string, token: string, operation = '') =>
    `json_build_object('table', TG_TABLE_NAME, 'column', ${lit(o.column)}, 'stored', (${stored})::text, 'token', (${token})::text${operation})::text`
  // The transaction's token, when it set one ('' once a transaction that set it has ended).
  const setting = `current_setting(${lit(FENCE_TOKEN_SETTING)}, true)`
  const token = `nullif(${setting}, '')::bigint`
  const create = mode === 'install' ? 'CREATE FUNCTION' : 'CREATE OR REPLACE FUNCTION'
  const trigger = (n: number, definition: string) => {
    const name = q(names.triggers[n] as string)
    return `${mode === 'upgrade' ? `DROP TRIGGER IF EXISTS ${name} ON ${n >= 5 && n <= 6 ? tombstones : table};\n` : ''}CREATE TRIGGER ${name} ${definition};`
  }

  const header = `-- FenceLock database guard for ${shown(o.table)}.${shown(o.column)} (key: ${o.key.map(shown).join(', ')}).
-- Generated by ${mode === 'install' ? 'fenceGuardSql' : 'fenceGuardUpgradeSql'}() of @fencelock/fencing. Whatever client writes, PostgreSQL refuses (SQLSTATE ${FENCE_GUARD_SQLSTATE}) an UPDATE that lowers the fence, an
-- INSERT or re-key under a fence below the one the key last held, and in a transaction that set ${FENCE_TOKEN_SETTING}, a write of a row with a newer fence.
`
  const table_ =
    mode === 'install'
      ? `
-- The highest fence each key was inserted or deleted with: a deleted row's fence outlives it.
CREATE TABLE ${tombstones} AS SELECT ${keys}, ${f} FROM ${table} WITH NO DATA;
ALTER TABLE ${tombstones} ADD PRIMARY KEY (${keys}), ALTER COLUMN ${f} SET NOT NULL;
`
      : `
-- The tombstone table ${shown(names.tombstoneTable)} stays as it is; the functions and triggers are replaced.
`

  return `${header}${table_}
${create} ${fn(refuseLower)}() RETURNS trigger LANGUAGE plpgsql AS ${$}
BEGIN
  RAISE EXCEPTION 'stale fencing token: %.% cannot go down from % to %', TG_TABLE_NAME, ${lit(o.column)}, OLD.${f}, coalesce(NEW.${f}::text, 'NULL')
    USING ERRCODE = '${FENCE_GUARD_SQLSTATE}', DETAIL = ${detail(`OLD.${f}`, `NEW.${f}`)},
          HINT = 'a newer fencing token has written this row; the writer''s lock is no longer current';
END
${$};

-- A row takes a key (INSERT, re-key): its fence must be at least the key's last one. A row
-- leaves a key (DELETE, re-key): the key keeps the highest of the row's fence before and after
-- (a re-key by a newer token leaves that token) and the transaction's token. ON CONFLICT sees rows
-- that this transaction's snapshot does not (and fails under REPEATABLE READ if one appeared), so
-- two sessions deleting and recreating one key cannot slip past each other. A key with a NULL
-- names no row (a unique constraint lets many rows have it) and leaves no tombstone.
${create} ${fn(remember)}() RETURNS trigger LANGUAGE plpgsql${pin} AS ${$}
DECLARE
  stored bigint;
  leaving bigint;
BEGIN
  IF TG_OP <> 'INSERT' AND (${oldKeys}) IS NOT NULL THEN
    leaving := GREATEST(OLD.${f}, ${token});
    IF TG_OP = 'UPDATE' THEN
      leaving := GREATEST(leaving, NEW.${f});
    END IF;
    INSERT INTO ${tombstones} AS t (${keys}, ${f}) VALUES (${oldKeys}, leaving)
      ON CONFLICT (${keys}) DO UPDATE SET ${f} = GREATEST(t.${f}, EXCLUDED.${f});
  END IF;
  IF TG_OP <> 'DELETE' AND (${newKeys}) IS NOT NULL THEN
    INSERT INTO ${tombstones} AS t (${keys}, ${f}) VALUES (${newKeys}, NEW.${f})
      ON CONFLICT (${keys}) DO UPDATE SET ${f} = GREATEST(t.${f}, EXCLUDED.${f})
      RETURNING t.${f} INTO stored;
    IF NEW.${f} IS NULL OR stored > NEW.${f} THEN
      RAISE EXCEPTION 'stale fencing token: %.% was written with % before, this row carries %', TG_TABLE_NAME, ${lit(o.column)}, stored, coalesce(NEW.${f}::text, 'NULL')
        USING ERRCODE = '${FENCE_GUARD_SQLSTATE}', DETAIL = ${detail('stored', `NEW.${f}`)},
              HINT = 'the row was deleted by a newer fencing token; an older one cannot recreate it';
    END IF;
  END IF;
  RETURN NULL;
END
${$};

-- TRUNCATE fires no row triggers: keep the fences of every row it is about to remove (raised to
-- the transaction's token, which must not be older than any of them).
${create} ${fn(onTruncate)}() RETURNS trigger LANGUAGE plpgsql${pin} AS ${$}
DECLARE
  token bigint := ${token};
  newest bigint;
BEGIN
  IF token IS NOT NULL THEN
    SELECT max(${f}) INTO newest FROM ${table};
    IF newest > token THEN
      RAISE EXCEPTION 'stale fencing token: TRUNCATE of % under token %, a row holds %', TG_TABLE_NAME, token, newest
        USING ERRCODE = '${FENCE_GUARD_SQLSTATE}', DETAIL = ${detail('newest', 'token', ", 'operation', 'truncate'")};
    END IF;
  END IF;
  INSERT INTO ${tombstones} AS t (${keys}, ${f}) SELECT ${keys}, GREATEST(${f}, token) FROM ${table} WHERE (${keys}) IS NOT NULL
    ON CONFLICT (${keys}) DO UPDATE SET ${f} = GREATEST(t.${f}, EXCLUDED.${f});
  RETURN NULL;
END
${$};

${create} ${fn(keepTombstones)}() RETURNS trigger LANGUAGE plpgsql AS ${$}
BEGIN
  RAISE EXCEPTION 'stale fencing token: the tombstones of %.% are never lowered nor deleted row by row', ${lit(o.table)}, ${lit(o.column)}
    USING ERRCODE = '${FENCE_GUARD_SQLSTATE}', HINT = 'TRUNCATE the tombstone table to reset it, only when no holder of an old lock can still write';
END
${$};

-- The transaction's token (${FENCE_TOKEN_SETTING}), for clients that cannot add the fencing condition
-- themselves: a row with a newer fence is neither updated nor deleted, and every row written gets at
-- least the token as its fence. BEFORE the write, so the row it sees is the newest committed version
-- (a writer that waited for another's row lock sees what that one committed).
${create} ${fn(tokenFn)}() RETURNS trigger LANGUAGE plpgsql AS ${$}
DECLARE
  setting text := ${setting};
  token bigint;
BEGIN
  IF setting !~ '^[0-9]{1,19}$' OR length(setting) = 19 AND setting > '9223372036854775807' THEN
    RAISE EXCEPTION 'invalid ${FENCE_TOKEN_SETTING}: % (decimal digits, 0 to 9223372036854775807)', setting USING ERRCODE = '22023';
  END IF;
  token := setting::bigint;
  IF TG_OP <> 'INSERT' AND OLD.${f} > token THEN
    RAISE EXCEPTION 'stale fencing token: % of %.% under token % refused, the row holds %', TG_OP, TG_TABLE_NAME, ${lit(o.column)}, token, OLD.${f}
      USING ERRCODE = '${FENCE_GUARD_SQLSTATE}', DETAIL = ${detail(`OLD.${f}`, 'token', ", 'operation', lower(TG_OP)")},
            HINT = 'a newer fencing token has written this row; the writer''s lock is no longer current';
  END IF;
  IF TG_OP = 'DELETE' THEN
    RETURN OLD;
  END IF;
  NEW.${f} := GREATEST(NEW.${f}, token);
  RETURN NEW;
END
${$};

-- UPDATE OF: an UPDATE that does not set the fence (or the key) skips these triggers at the cost of
-- a column-list test, so the guard costs a plain update next to nothing. The token trigger's WHEN is
-- one setting lookup, false unless the transaction set a token.
${trigger(0, `AFTER UPDATE OF ${f} ON ${table}\n  FOR EACH ROW WHEN (NEW.${f} < OLD.${f} OR NEW.${f} IS NULL) EXECUTE FUNCTION ${fn(refuseLower)}()`)}
${trigger(1, `AFTER INSERT ON ${table}\n  FOR EACH ROW EXECUTE FUNCTION ${fn(remember)}()`)}
${trigger(2, `AFTER DELETE ON ${table}\n  FOR EACH ROW EXECUTE FUNCTION ${fn(remember)}()`)}
${trigger(3, `AFTER UPDATE OF ${keys} ON ${table}\n  FOR EACH ROW WHEN ((${oldKeys}) IS DISTINCT FROM (${newKeys})) EXECUTE FUNCTION ${fn(remember)}()`)}
${trigger(4, `BEFORE TRUNCATE ON ${table}\n  FOR EACH STATEMENT EXECUTE FUNCTION ${fn(onTruncate)}()`)}
${trigger(5, `BEFORE DELETE ON ${tombstones}\n  FOR EACH ROW EXECUTE FUNCTION ${fn(keepTombstones)}()`)}
${trigger(6, `BEFORE UPDATE ON ${tombstones}\n  FOR EACH ROW WHEN (NEW.${f} < OLD.${f} OR NEW.${f} IS NULL OR (${oldKeys}) IS DISTINCT FROM (${newKeys})) EXECUTE FUNCTION ${fn(keepTombstones)}()`)}
${trigger(7, `BEFORE INSERT OR UPDATE OR DELETE ON ${table}\n  FOR EACH ROW WHEN (${setting} <> '') EXECUTE FUNCTION ${fn(tokenFn)}()`)}

COMMENT ON TABLE ${tombstones} IS ${lit(`FenceLock: the highest fence each key of ${o.table} was inserted or deleted with (see fenceGuardSql)`)};
`
}
