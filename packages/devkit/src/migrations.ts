/**
 * The project's migration runner: applies the SQL migrations in prisma/migrations (Prisma's
 * layout, `<timestamp>_<name>/migration.sql`) to a PostgreSQL schema. `npm run db:migrate`
 * (scripts/db-migrate.ts) is its command line; the demo shop and the tests call it directly.
 *
 * Why our own runner: `prisma migrate deploy` needs Prisma's native schema engine, which cannot
 * be downloaded everywhere. The files keep Prisma's layout, so where the engine exists `prisma
 * migrate deploy` can take over (see docs/FENCING.md).
 *
 * What it promises:
 * - idempotent: what it applied is recorded in `<schema>._fencelock_migrations` (name and
 *   SHA-256 of the file) and never applied twice; a recorded migration whose file changed
 *   since is an error, not silently skipped;
 * - each migration runs in its own transaction together with its record, so a failure leaves
 *   neither half of it behind;
 * - concurrent runs against one schema serialize on an advisory lock;
 * - the schema is created when missing, and migrations run with `search_path` set to it.
 */
import { createHash } from 'node:crypto'
import { existsSync } from 'node:fs'
import { readdir, readFile } from 'node:fs/promises'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'

/** Where the migrations live: Prisma's layout, one folder per migration. */
export const DEFAULT_MIGRATIONS_DIR = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..', '..', 'prisma', 'migrations')

/** The runner's own bookkeeping table, created in the target schema (not Prisma's `_prisma_migrations`). */
export const MIGRATIONS_TABLE = '_fencelock_migrations'

/** Key space of the advisory lock that serializes runs (the second key is the schema's hash). */
const LOCK_CLASS_ID = 0x46454e43 // "FENC"

/** One migration file. `checksum` is the SHA-256 of its bytes, hex. */
export interface Migration {
  readonly name: string
  readonly sql: string
  readonly checksum: string
}

/**
 * What the runner needs from a connection: `pg.Client` fits. One connection, not a pool: the
 * advisory lock and each transaction belong to one session. `query(text)` without values must
 * accept several statements (the simple query protocol), because a migration file has many.
 */
export interface MigrationConnection {
  query(text: string, values?: unknown[]): Promise<{ rows: Record<string, unknown>[] }>
}

/** Options of {@link applyMigrations}. */
export interface ApplyMigrationsOptions {
  /** Target schema, created when missing. Default `public`. */
  schema?: string
  /** The migrations to apply. Default: {@link readMigrations} of {@link DEFAULT_MIGRATIONS_DIR}. */
  migrations?: readonly Migration[]
  /** Receives one line per applied migration and one per warning. Default: none. */
  log?: (line: string) => void
}

/** What one run did. */
export interface MigrationReport {
  readonly schema: string
  /** Applied by this run, in order. */
  readonly applied: string[]
  /** Found already recorded, unchanged. */
  readonly alreadyApplied: string[]
}

/** A migration failed, or the recorded history does not match the files. Nothing of the failed migration was kept. */
export class MigrationError extends Error {
  /** The migration concerned, when there is one. */
  readonly migration: string | undefined

  constructor(message: string, migration?: string, cause?: unknown) {
    super(message, cause === undefined ? undefined : { cause })
    this.name = 'MigrationError'
    this.migration = migration
  }
}

/** Reads `<dir>/<name>/migration.sql` for every folder of `dir`, sorted by name (timestamp first). */
export async function readMigrations(dir: string = DEFAULT_MIGRATIONS_DIR): Promise<Migration[]> {
  const entries = await readdir(dir, { withFileTypes: true })
  const names = entries.filter((e) => e.isDirectory()).map((e) => e.name).sort()
  const migrations: Migration[] = []
  for (const name of names) {
    const file = join(dir, name, 'migration.sql')
    if (!existsSync(file)) throw new MigrationError(`${file} is missing`, name)
    const bytes = await readFile(file)
    migrations.push({ name, sql: bytes.toString('utf8'), checksum: createHash('sha256').update(bytes).digest('hex') })
  }
  return migrations
}

/** Quotes a PostgreSQL identifier (any name, including quotes and capitals). */
export function quoteIdent(name: string): string {
  return `"${name.replaceAll('"', '""')}"`
}

/**
 * Applies every migration not yet recorded in `schema`, each in its own transaction, and
 * records it. Safe to run again and from several processes at once.
 *
 * @example
 * ```ts
 * const client = new pg.Client({ connectionString })
 * await client.connect()
 * const report = await applyMigrations(client, { schema: 'test_1234' })
 * ```
 */
export async function applyMigrations(conn: MigrationConnection, options: ApplyMigrationsOptions = {}): Promise<MigrationReport> {
  const schema = options.schema ?? 'public'
  if (schema.length === 0 || schema.length > 63) throw new MigrationError(`schema name must be 1 to 63 characters (got ${JSON.stringify(schema)})`)
  const migrations = options.migrations ?? (await readMigrations())
  const log = options.log ?? (() => {})
  const s = quoteIdent(schema)
  const table = `${s}.${quoteIdent(MIGRATIONS_TABLE)}`

  // Session-level lock: held across the per-migration transactions, so two runners do not
  // both find a migration pending and apply it twice.
  await conn.query('SELECT pg_advisory_lock($1::int, hashtext($2))', [LOCK_CLASS_ID, schema])
  try {
    await conn.query(`CREATE SCHEMA IF NOT EXISTS ${s}`)
    await conn.query(
      `CREATE TABLE IF NOT EXISTS ${table} (
         name TEXT PRIMARY KEY,
         checksum TEXT NOT NULL,
         applied_at TIMESTAMPTZ NOT NULL DEFAULT now()
       )`,
    )
    const { rows } = await conn.query(`SELECT name, checksum FROM ${table}`)
    const recorded = new Map(rows.map((r) => [String(r.name), String(r.checksum)]))

    const onDisk = new Set(migrations.map((m) => m.name))
    for (const name of recorded.keys()) {
      if (!onDisk.has(name)) log(`warning: ${name} is recorded in ${schema}.${MIGRATIONS_TABLE} but has no file`)
    }

    const applied: string[] = []
    const alreadyApplied: string[] = []
    for (const m of migrations) {
      const checksum = recorded.get(m.name)
      if (checksum !== undefined) {
        // An edited migration would leave this database different from a fresh one: refuse.
        if (checksum !== m.checksum) {
          throw new MigrationError(
            `${m.name} was applied to schema ${schema} with checksum ${checksum.slice(0, 12)}, but the file now has ${m.checksum.slice(0, 12)}; add a new migration instead of editing an applied one`,
            m.name,
          )
        }
        alreadyApplied.push(m.name)
        continue
      }
      await conn.query('BEGIN')
      try {
        // LOCAL: only this transaction; the connection's search_path is back afterwards.
        await conn.query(`SET LOCAL search_path TO ${s}`)
        await conn.query(m.sql)
        await conn.query(`INSERT INTO ${table} (name, checksum) VALUES ($1, $2)`, [m.name, m.checksum])
        await conn.query('COMMIT')
      } catch (cause) {
        await conn.query('ROLLBACK').catch(() => {})
        const why = cause instanceof Error ? cause.message : String(cause)
        throw new MigrationError(`${m.name} failed and was rolled back: ${why}`, m.name, cause)
      }
      applied.push(m.name)
      log(`applied ${m.name}`)
    }
    return { schema, applied, alreadyApplied }
  } finally {
    await conn.query('SELECT pg_advisory_unlock($1::int, hashtext($2))', [LOCK_CLASS_ID, schema]).catch(() => {})
  }
}
