/** The options of the guard's SQL: checked once, before any SQL is written (`InvalidFencingOptionError`). */
import { InvalidFencingOptionError } from '../shared/errors.js'
import { LONGEST_SUFFIX } from './names.js'

/** Options of `fenceGuardSql`. Names are the database's (a model's `@@map`, a field's `@map`), not Prisma's. */
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
   * The strict guard: every INSERT, UPDATE and DELETE of the table must carry a fencing token, or
   * it is refused (SQLSTATE `FL004`, naming the table) — so a stale holder
   * writing through the plain client, or a writer who forgot the token, fails instead of landing.
   * A write carries a token when the transaction set one (SET_FENCE_TOKEN_SQL), or, for an INSERT,
   * when its fence is above 0, and for an UPDATE or DELETE, when the transaction raised the row's
   * fence (`UPDATE ... SET fence = ...`, as every `$fenced` write does). Default false.
   */
  strict?: boolean
  /**
   * The token path: a transaction that set its token (SET_FENCE_TOKEN_SQL: `withFence`, raw SQL on a
   * `$fenced` view) writes under it, the guard's row trigger fencing every row. Default true. `false`
   * for a table written only through the Prisma extension (or by SQL that sets the fence itself):
   * then the guard has no BEFORE row trigger, which PostgreSQL runs by locking and WAL-logging each
   * row before it updates or deletes it, so an UPDATE or DELETE costs what it costs unguarded; a
   * write under a token is refused (SQLSTATE `FL005`), never left unfenced.
   */
  tokenPath?: boolean
  /**
   * Prefix of every object the guard creates. Default `<table>_fence`: the tombstone table
   * `<table>_fence_tombstones`, the functions and triggers `<table>_fence_*`.
   */
  name?: string
}

// PostgreSQL cuts identifiers at 63 bytes without an error; a cut name could collide.
const MAX_IDENTIFIER_BYTES = 63

/** The options, checked, with their defaults. */
export interface ResolvedFenceGuardOptions {
  readonly table: string
  readonly column: string
  readonly key: readonly string[]
  readonly schema: string | undefined
  readonly name: string
  readonly strict: boolean
  readonly tokenPath: boolean
}

const OPTION_NAMES = new Set(['table', 'column', 'key', 'schema', 'name', 'strict', 'tokenPath'])

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

/** Checks the options of `fenceGuardSql` (no I/O); throws `InvalidFencingOptionError` naming the field and the rule. */
export function resolveFenceGuardOptions(options: unknown): ResolvedFenceGuardOptions {
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
  if (o.strict !== undefined && typeof o.strict !== 'boolean') throw new InvalidFencingOptionError('strict', 'must be a boolean', o.strict)
  if (o.tokenPath !== undefined && typeof o.tokenPath !== 'boolean') throw new InvalidFencingOptionError('tokenPath', 'must be a boolean', o.tokenPath)
  return { table, column, key, schema, name, strict: o.strict === true, tokenPath: o.tokenPath !== false }
}
