/**
 * A startup check that the database guard (`fenceGuardSql`) is installed on every fenced model's
 * table, complete and in effect. Without the guard a write from outside the extension can lower a
 * fence, and the next stale token is then accepted — silently; this check makes the missing guard
 * an error when the application starts instead.
 *
 * It asks the database through the caller's own Prisma client, in one read-only transaction: a
 * `findFirst` per model makes PostgreSQL lock the model's table (`AccessShareLock`), and `pg_locks`
 * of that session then names the table as Prisma reaches it — its schema included, whatever the
 * adapter's `schema` option or the `search_path`. The catalog then tells which of the guard's
 * objects exist there.
 */
import { delegateKey, readDataModel } from './data-model.js'
import { InvalidFencingOptionError, MissingFenceGuardError, type MissingGuardObject } from '../shared/errors.js'
import { checkModels } from './extension.js'
import { defaultGuardObjects, strictGuardObjects } from '../guard/names.js'
import { resolveFencingOptions, type FencedModels } from './options.js'

/** Options of {@link assertFenceGuard}. */
export interface AssertFenceGuardOptions<C = unknown> {
  /** The fenced models and their fence columns, as given to `fencing()`. Required. */
  models: FencedModels<C>
  /** Also require the strict guard (`fenceGuardSql({ strict: true })`): its function and its two triggers, enabled. Default false. */
  strict?: boolean
}

/** What the check needs of a client: a transaction client with raw queries and the model delegates. */
interface CheckingClient {
  $queryRawUnsafe<T = unknown>(query: string, ...values: unknown[]): Promise<T>
  [delegate: string]: unknown
}

interface LockedTable {
  oid: string
  schema: string
  name: string
}

const OPTION_NAMES = new Set(['models', 'strict'])
const GUIDE = 'https://github.com/fencelock/fencelock/blob/main/docs/FENCING.md#the-guard-in-prisma-migrate'

/**
 * Checks that the database guard is installed on the table of every model in `models`: its
 * tombstone table, its five functions and eight triggers (enabled), the lowering trigger on the
 * fence column — by the default names of `fenceGuardSql` (`<table>_fence_*`). Resolves when all are
 * there; otherwise throws `MissingFenceGuardError`, whose message names every missing object by
 * model and says how to install the guard (or bring an older one up to date), and whose `missing`
 * lists them. Options are checked before any query (`InvalidFencingOptionError`); a table that does
 * not exist fails as Prisma's query does (P2021).
 *
 * `prisma` is your client, extended or not. Call it once at startup, after the migrations ran.
 *
 * @example
 * ```ts
 * const models = { Invoice: 'fenceToken' } as const
 * const db = prisma.$extends(fencing<typeof prisma>({ models }))
 * await assertFenceGuard(prisma, { models }) // MissingFenceGuardError when a migration is missing
 * ```
 */
export async function assertFenceGuard<C extends object>(prisma: C, options: AssertFenceGuardOptions<C>): Promise<void> {
  if (options === null || typeof options !== 'object') throw new InvalidFencingOptionError('options', 'must be an object', options)
  for (const key of Object.keys(options)) {
    if (!OPTION_NAMES.has(key)) throw new InvalidFencingOptionError(key, `is not an option of assertFenceGuard (${[...OPTION_NAMES].join(', ')})`, (options as unknown as Record<string, unknown>)[key])
  }
  const resolved = resolveFencingOptions({ models: options.models })
  const strict: unknown = options.strict
  if (strict !== undefined && typeof strict !== 'boolean') throw new InvalidFencingOptionError('strict', 'must be a boolean', strict)
  if (prisma === null || typeof prisma !== 'object' || typeof (prisma as { $transaction?: unknown }).$transaction !== 'function') {
    throw new InvalidFencingOptionError('prisma', 'must be a Prisma client', prisma)
  }
  const dataModel = readDataModel(prisma)
  checkModels(prisma, resolved, dataModel)
  const models = [...resolved.models].map(([model, field]) => {
    const shape = dataModel?.get(model)
    return { model, field, table: shape?.dbName ?? model, column: shape?.columns.get(field) ?? field, key: (shape?.primaryKey ?? []).map((f) => shape?.columns.get(f) ?? f) }
  })

  const client = prisma as unknown as { $transaction<R>(fn: (tx: CheckingClient) => Promise<R>): Promise<R> }
  const found = await client.$transaction(async (tx) => {
    // Each findFirst locks its model's table for the rest of the transaction: pg_locks then names it.
    for (const m of models) await (tx[delegateKey(m.model)] as { findFirst(args: object): Promise<unknown> }).findFirst({ select: { [m.field]: true } })
    const locked = await tx.$queryRawUnsafe<LockedTable[]>(
      `SELECT c.oid::text AS oid, n.nspname AS schema, c.relname AS name
         FROM pg_locks l JOIN pg_class c ON c.oid = l.relation JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE l.pid = pg_backend_pid() AND l.locktype = 'relation' AND c.relkind IN ('r', 'p')`,
    )
    return Promise.all(models.map(async (m) => ({ ...m, ...(await inspect(tx, m, locked, strict === true)) })))
  })

  const missing = found.flatMap((f) => f.missing)
  if (missing.length === 0) return
  const installed = new Set(found.filter((f) => f.missing.length < f.expected).map((f) => f.model))
  const hints = new Map(
    found.map((f) => {
      const command = `npx fencelock-guard --table ${shellWord(f.table)} --column ${shellWord(f.column)} --key ${f.key.length === 0 ? '<key column>' : f.key.map(shellWord).join(',')}`
      return [
        f.model,
        f.hasTombstones
          ? `Bring it up to date in a new migration: ${command} --upgrade --migration ${migrationName(f.table)}_upgrade`
          : `Install it in a migration: ${command} --migration ${migrationName(f.table)} (${GUIDE})`,
      ] as const
    }),
  )
  throw new MissingFenceGuardError(missing, installed, hints)
}

/** A migration name for a table's guard (`--migration` takes letters, digits and `_`). */
function migrationName(table: string): string {
  return `${table.replace(/[^A-Za-z0-9_]+/g, '_').toLowerCase()}_fence_guard`.slice(0, 200)
}

/** What exists of one model's guard, next to its table. */
async function inspect(
  tx: CheckingClient,
  m: { model: string; table: string; column: string },
  locked: readonly LockedTable[],
  strict: boolean,
): Promise<{ schema: string; missing: MissingGuardObject[]; expected: number; hasTombstones: boolean }> {
  const table = locked.find((t) => t.name === m.table)
  if (table === undefined) throw new Error(`assertFenceGuard: the table "${m.table}" of ${m.model} was not found among the tables Prisma read`)
  const names = defaultGuardObjects(m.table)
  const qualified = `${table.schema}.${table.name}`
  const missing: MissingGuardObject[] = []
  const miss = (kind: MissingGuardObject['kind'], name: string, problem: MissingGuardObject['problem'] = 'missing') =>
    missing.push(Object.freeze({ model: m.model, table: qualified, kind, name, problem }))

  const [tombstone] = await tx.$queryRawUnsafe<{ oid: string }[]>(
    `SELECT c.oid::text AS oid FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 AND c.relname = $2 AND c.relkind IN ('r', 'p')`,
    table.schema,
    names.tombstoneTable,
  )
  if (tombstone === undefined) miss('tombstone table', names.tombstoneTable)

  const functions = await tx.$queryRawUnsafe<{ name: string }[]>(
    `SELECT p.proname AS name FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = $1 AND p.prorettype = 'trigger'::regtype`,
    table.schema,
  )
  const have = new Set(functions.map((f) => f.name))
  const strictNames = strictGuardObjects(`${m.table}_fence`)
  for (const name of [...names.functions, ...(strict ? [strictNames.function] : [])]) if (!have.has(name)) miss('function', name)

  // Which table each trigger belongs on, as fenceGuardSql creates them: the 6th and 7th on the tombstones.
  const triggers = await tx.$queryRawUnsafe<{ name: string; relation: string; enabled: string; onColumn: boolean }[]>(
    `SELECT t.tgname AS name, t.tgrelid::text AS relation, t.tgenabled::text AS enabled,
            EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = t.tgrelid AND a.attname = $3 AND a.attnum = ANY (t.tgattr::int2[])) AS "onColumn"
       FROM pg_trigger t WHERE NOT t.tgisinternal AND t.tgrelid::text IN ($1, $2)`,
    table.oid,
    tombstone?.oid ?? table.oid,
    m.column,
  )
  names.triggers.forEach((name, i) => {
    const on = i === 5 || i === 6 ? tombstone?.oid : table.oid
    const trigger = triggers.find((t) => t.name === name && t.relation === on)
    // 'D' disabled; 'R' fires only under session_replication_role = replica, so not for applications.
    if (trigger === undefined) miss('trigger', name)
    else if (trigger.enabled === 'D' || trigger.enabled === 'R') miss('trigger', name, 'disabled')
    else if (i === 0 && !trigger.onColumn) miss('trigger', name, 'other column')
  })
  if (strict) {
    for (const name of strictNames.triggers) {
      const trigger = triggers.find((t) => t.name === name && t.relation === table.oid)
      if (trigger === undefined) miss('trigger', name)
      else if (trigger.enabled === 'D' || trigger.enabled === 'R') miss('trigger', name, 'disabled')
    }
  }
  return { schema: table.schema, missing, expected: 1 + names.functions.length + names.triggers.length, hasTombstones: tombstone !== undefined }
}

/** A word for the hint's command line: quoted when the shell would split or expand it. */
function shellWord(word: string): string {
  return /^[A-Za-z0-9_.,/-]+$/.test(word) ? word : `'${word.replaceAll("'", `'\\''`)}'`
}
