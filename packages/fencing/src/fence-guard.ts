/**
 * The database guard: SQL for the user's own migration that makes PostgreSQL itself enforce the
 * fence, whatever client writes (the plain Prisma client, `$executeRaw`, psql, another service).
 *
 * - An UPDATE that would lower the fence column fails.
 * - A row's fence outlives the row: every key the table has held is remembered in a tombstone
 *   table with the highest fence it was inserted or deleted with, and a row cannot be inserted
 *   (or re-keyed) under a fence below that. TRUNCATE keeps the fences of the rows it removes.
 * - The tombstones are never lowered nor deleted row by row.
 *
 * Every refusal raises SQLSTATE {@link FENCE_GUARD_SQLSTATE}; the fencing extension maps it to
 * `StaleFencingTokenError`.
 */
import { InvalidFencingOptionError } from './errors.js'

/**
 * The SQLSTATE the guard raises when a write would lower a fence or recreate a key under an
 * older token. Class `FL` is not used by PostgreSQL.
 */
export const FENCE_GUARD_SQLSTATE = 'FL001'

/** Options of {@link fenceGuardSql}. Names are the database's (a model's `@@map`, a field's `@map`), not Prisma's. */
export interface FenceGuardOptions {
  /** The table, e.g. `Product`. Required. */
  table: string
  /** Its fence column: `BIGINT NOT NULL`, e.g. `fenceToken`. Required. */
  column: string
  /**
   * The column, or columns, that name a row across its deletion and re-creation: a primary key
   * or a unique constraint, e.g. `sku`. Required. The tombstone table gets the same columns.
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

const SUFFIXES = {
  tombstoneTable: '_tombstones',
  functions: ['_refuse_lower', '_remember', '_on_truncate', '_keep_tombstones'],
  triggers: ['_refuse_lower', '_on_insert', '_on_delete', '_on_rekey', '_on_truncate', '_tombstone_delete', '_tombstone_update'],
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

/**
 * The SQL that installs the database guard on one table, for your own migration (put its
 * output in `prisma/migrations/<timestamp>_<name>/migration.sql`). It creates a tombstone table,
 * four functions and seven triggers (names from `name`, see {@link fenceGuardObjects}), in one
 * script meant to run in the migration's transaction. Throws `InvalidFencingOptionError` for a
 * bad option; it does no I/O.
 *
 * What PostgreSQL then enforces, for any client (SQLSTATE {@link FENCE_GUARD_SQLSTATE}):
 * an UPDATE that lowers the fence fails; an INSERT, or an UPDATE that changes the key, fails
 * when the key was earlier inserted or deleted with a higher fence; TRUNCATE records the fences
 * of the rows it removes; the tombstones cannot be lowered or deleted row by row (TRUNCATE of
 * the tombstone table is the deliberate reset, for when no old holder can still run).
 *
 * Costs (docs/FENCING.md): an UPDATE that does not set the fence or the key pays a column-list
 * test; one that does, a `WHEN` test that is false unless the fence goes down; an INSERT or DELETE
 * writes one tombstone row (one per key ever used, never removed). The triggers are `UPDATE OF`
 * the fence and the key columns, so a BEFORE trigger of yours that changes the fence on an UPDATE
 * that does not set it is not checked.
 *
 * @example
 * ```ts
 * import { fenceGuardSql } from '@fencelock/fencing'
 * writeFileSync('prisma/migrations/20260101000000_fence_guard/migration.sql',
 *   fenceGuardSql({ table: 'Product', column: 'fenceToken', key: 'sku' }))
 * ```
 */
export function fenceGuardSql(options: FenceGuardOptions): string {
  const o = resolveFenceGuardOptions(options)
  const names = objectNames(o.name)
  const s = o.schema === undefined ? '' : `${q(o.schema)}.`
  const table = `${s}${q(o.table)}`
  const tombstones = `${s}${q(names.tombstoneTable)}`
  const fn = (n: string) => `${s}${q(n)}`
  const [refuseLower, remember, onTruncate, keepTombstones] = names.functions as [string, string, string, string]
  const f = q(o.column)
  const keys = o.key.map(q).join(', ')
  const oldKeys = o.key.map((k) => `OLD.${q(k)}`).join(', ')
  const newKeys = o.key.map((k) => `NEW.${q(k)}`).join(', ')
  // Without a schema the functions resolve names in the schema they were created in, whatever
  // search_path the writing session has (a client on another schema, `SET search_path`).
  const pin = o.schema === undefined ? '\n  SET search_path FROM CURRENT' : ''
  const detail = (stored: string, token: string) =>
    `json_build_object('table', TG_TABLE_NAME, 'column', ${lit(o.column)}, 'stored', (${stored})::text, 'token', (${token})::text)::text`

  return `-- FenceLock database guard for ${o.table}.${o.column} (key: ${o.key.join(', ')}).
-- Generated by fenceGuardSql() of @fencelock/fencing. Whatever client writes, PostgreSQL refuses (SQLSTATE ${FENCE_GUARD_SQLSTATE}) an UPDATE that lowers the fence, and an
-- INSERT or re-key under a fence below the one the key was last inserted or deleted with.

-- The highest fence each key was inserted or deleted with: a deleted row's fence outlives it.
CREATE TABLE ${tombstones} AS SELECT ${keys}, ${f} FROM ${table} WITH NO DATA;
ALTER TABLE ${tombstones} ADD PRIMARY KEY (${keys}), ALTER COLUMN ${f} SET NOT NULL;

CREATE FUNCTION ${fn(refuseLower)}() RETURNS trigger LANGUAGE plpgsql AS $fencelock$
BEGIN
  RAISE EXCEPTION 'stale fencing token: %.% cannot go down from % to %', TG_TABLE_NAME, ${lit(o.column)}, OLD.${f}, coalesce(NEW.${f}::text, 'NULL')
    USING ERRCODE = '${FENCE_GUARD_SQLSTATE}', DETAIL = ${detail(`OLD.${f}`, `NEW.${f}`)},
          HINT = 'a newer fencing token has written this row; the writer''s lock is no longer current';
END
$fencelock$;

-- A row takes a key (INSERT, re-key): its fence must be at least the key's last one. A row
-- leaves a key (DELETE, re-key): the key keeps the row's fence. ON CONFLICT sees rows that this
-- transaction's snapshot does not (and fails under REPEATABLE READ if one appeared), so two
-- sessions deleting and recreating one key cannot slip past each other.
CREATE FUNCTION ${fn(remember)}() RETURNS trigger LANGUAGE plpgsql${pin} AS $fencelock$
DECLARE
  stored bigint;
BEGIN
  IF TG_OP <> 'INSERT' THEN
    INSERT INTO ${tombstones} AS t (${keys}, ${f}) VALUES (${oldKeys}, OLD.${f})
      ON CONFLICT (${keys}) DO UPDATE SET ${f} = GREATEST(t.${f}, EXCLUDED.${f});
  END IF;
  IF TG_OP <> 'DELETE' THEN
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
$fencelock$;

-- TRUNCATE fires no row triggers: keep the fences of every row it is about to remove.
CREATE FUNCTION ${fn(onTruncate)}() RETURNS trigger LANGUAGE plpgsql${pin} AS $fencelock$
BEGIN
  INSERT INTO ${tombstones} AS t (${keys}, ${f}) SELECT ${keys}, ${f} FROM ${table}
    ON CONFLICT (${keys}) DO UPDATE SET ${f} = GREATEST(t.${f}, EXCLUDED.${f});
  RETURN NULL;
END
$fencelock$;

CREATE FUNCTION ${fn(keepTombstones)}() RETURNS trigger LANGUAGE plpgsql AS $fencelock$
BEGIN
  RAISE EXCEPTION 'stale fencing token: the tombstones of %.% are never lowered nor deleted row by row', ${lit(o.table)}, ${lit(o.column)}
    USING ERRCODE = '${FENCE_GUARD_SQLSTATE}', HINT = 'TRUNCATE the tombstone table to reset it, only when no holder of an old lock can still write';
END
$fencelock$;

-- UPDATE OF: an UPDATE that does not set the fence (or the key) skips these triggers at the cost of
-- a column-list test, so the guard costs a plain update next to nothing.
CREATE TRIGGER ${q(names.triggers[0] as string)} AFTER UPDATE OF ${f} ON ${table}
  FOR EACH ROW WHEN (NEW.${f} < OLD.${f} OR NEW.${f} IS NULL) EXECUTE FUNCTION ${fn(refuseLower)}();
CREATE TRIGGER ${q(names.triggers[1] as string)} AFTER INSERT ON ${table}
  FOR EACH ROW EXECUTE FUNCTION ${fn(remember)}();
CREATE TRIGGER ${q(names.triggers[2] as string)} AFTER DELETE ON ${table}
  FOR EACH ROW EXECUTE FUNCTION ${fn(remember)}();
CREATE TRIGGER ${q(names.triggers[3] as string)} AFTER UPDATE OF ${keys} ON ${table}
  FOR EACH ROW WHEN ((${oldKeys}) IS DISTINCT FROM (${newKeys})) EXECUTE FUNCTION ${fn(remember)}();
CREATE TRIGGER ${q(names.triggers[4] as string)} BEFORE TRUNCATE ON ${table}
  FOR EACH STATEMENT EXECUTE FUNCTION ${fn(onTruncate)}();
CREATE TRIGGER ${q(names.triggers[5] as string)} BEFORE DELETE ON ${tombstones}
  FOR EACH ROW EXECUTE FUNCTION ${fn(keepTombstones)}();
CREATE TRIGGER ${q(names.triggers[6] as string)} BEFORE UPDATE ON ${tombstones}
  FOR EACH ROW WHEN (NEW.${f} < OLD.${f} OR NEW.${f} IS NULL OR (${oldKeys}) IS DISTINCT FROM (${newKeys})) EXECUTE FUNCTION ${fn(keepTombstones)}();

COMMENT ON TABLE ${tombstones} IS ${lit(`FenceLock: the highest fence each key of ${o.table} was inserted or deleted with (see fenceGuardSql)`)};
`
}
