/**
 * What every template of the guard's SQL names, quoted once: the table, its tombstone table, the
 * guard's functions, the fence and key columns, the settings the functions read. A template is
 * then SQL text with these in its placeholders, nothing else computed inline.
 */
import type { ResolvedFenceGuardOptions } from '../guard-options.js'
import { objectNames, strictGuardObjects, type FenceGuardObjects } from '../names.js'
import { FENCE_TOKEN_SCOPE_SQLSTATE, FENCE_TOKEN_SETTING, FENCE_TXID_SETTING } from '../protocol.js'
import { dollarTag, lit, q } from './quote.js'

/** `install` creates the guard; `upgrade` replaces the functions and triggers of one installed earlier. */
export type GuardMode = 'install' | 'upgrade'

/** The guard of one table, named for its SQL. */
export interface GuardSql {
  readonly options: ResolvedFenceGuardOptions
  readonly mode: GuardMode
  readonly names: FenceGuardObjects
  readonly strictNames: ReturnType<typeof strictGuardObjects>
  /** `CREATE FUNCTION`, or `CREATE OR REPLACE FUNCTION` for an upgrade. */
  readonly create: string
  /** The table, quoted (and schema-qualified when a schema is given). */
  readonly table: string
  readonly tombstones: string
  /** A function of the guard by name, quoted and qualified. */
  readonly fn: (name: string) => string
  /** The fence column, quoted. */
  readonly f: string
  /** The fence column's name as a string literal (for messages). */
  readonly column: string
  /** The key columns, quoted, comma-separated; and as `OLD.` / `NEW.` fields. */
  readonly keys: string
  readonly oldKeys: string
  readonly newKeys: string
  /** The dollar-quote tag of the function bodies. */
  readonly $: string
  /** ` SET search_path = ...` for a guard with a schema ('' without: the DO block pins it). */
  readonly pin: string
  /** `SECURITY DEFINER` and the pin: the tombstone writers run with the migration's rights. */
  readonly definer: string
  /** The transaction's token setting, as text (NULL or '' when unset). */
  readonly setting: string
  /** The same as a bigint, NULL when unset. */
  readonly token: string
}

/** Names the guard of `o` for its SQL. */
export function guardSql(o: ResolvedFenceGuardOptions, mode: GuardMode): GuardSql {
  const s = o.schema === undefined ? '' : `${q(o.schema)}.`
  // Every function runs with a search_path of its own: the guard's schema, then pg_temp (last, so
  // no temporary object of the writing session can stand in for the guard's). Without a schema, the
  // schema the migration creates them in: set by the DO block after them (search-path.ts).
  const pin = o.schema === undefined ? '' : `\n  SET search_path = ${q(o.schema)}, pg_temp`
  const setting = `current_setting(${lit(FENCE_TOKEN_SETTING)}, true)`
  return {
    options: o,
    mode,
    names: objectNames(o.name),
    strictNames: strictGuardObjects(o.name),
    create: mode === 'install' ? 'CREATE FUNCTION' : 'CREATE OR REPLACE FUNCTION',
    table: `${s}${q(o.table)}`,
    tombstones: `${s}${q(objectNames(o.name).tombstoneTable)}`,
    fn: (n) => `${s}${q(n)}`,
    f: q(o.column),
    column: lit(o.column),
    keys: o.key.map(q).join(', '),
    oldKeys: o.key.map((k) => `OLD.${q(k)}`).join(', '),
    newKeys: o.key.map((k) => `NEW.${q(k)}`).join(', '),
    $: dollarTag([o.table, o.column, ...o.key, o.schema ?? '', o.name]),
    pin,
    // The two functions that write the tombstones run with their owner's rights (the migration's
    // role): an application role needs rights on the guarded table only, never on the tombstones.
    definer: `\n  SECURITY DEFINER${pin}`,
    setting,
    // The transaction's token, when it set one ('' once a transaction that set it has ended).
    token: `nullif(${setting}, '')::bigint`,
  }
}

/** The DETAIL of a refusal: a JSON object the clients read (`table`, `column`, `stored`, `token`, ...). */
export function detail(g: GuardSql, stored: string, token: string, operation = ''): string {
  return `json_build_object('table', TG_TABLE_NAME, 'column', ${g.column}, 'stored', (${stored})::text, 'token', (${token})::text${operation})::text`
}

/** PL/pgSQL that refuses a token the current transaction did not set (see FENCE_TXID_SETTING). */
export function scopeCheck(g: GuardSql, indent: string): string {
  return `${indent}IF coalesce(current_setting(${lit(FENCE_TXID_SETTING)}, true), '') <> pg_current_xact_id()::text THEN
${indent}  RAISE EXCEPTION '${FENCE_TOKEN_SETTING} % on %.% was not set by this transaction: a token set for the session (SET, set_config(..., false)) or left by an earlier transaction is refused', ${g.setting}, TG_TABLE_NAME, ${g.column}
${indent}    USING ERRCODE = '${FENCE_TOKEN_SCOPE_SQLSTATE}', HINT = 'set it in the transaction that writes, with SET_FENCE_TOKEN_SQL of @fencelock/fencing (it also sets ${FENCE_TXID_SETTING} to the transaction''s id)';
${indent}END IF;`
}
