/**
 * One PostgreSQL schema per test file: created with a unique name, migrated with our own
 * runner (@fencelock/devkit/migrations), dropped afterwards. Test files run in parallel without
 * seeing each other's rows, and every test also uses its own SKUs.
 *
 * PostgreSQL must be up: a connection failure fails the file loudly, it never skips.
 */
import { randomBytes } from 'node:crypto'
import { PrismaPg } from '@prisma/adapter-pg'
import pg from 'pg'
import { PrismaClient } from '../../../../generated/prisma/client.js'
import { databaseTarget, redact } from '@fencelock/devkit/database-url'
import { applyMigrations, readMigrations } from '@fencelock/devkit/migrations'
import { fencing, type FencingRejection } from '../../src/index.js'

export { PrismaClient }

/** The fenced models of the demo schema, as the demo configures them. */
export const FENCED_MODELS = Object.freeze({ Product: 'fenceToken', Order: 'fenceToken' })

/** A Prisma client on `schema`, extended with fencing; `rejections` collects `onRejection` calls. */
export function fencedClient(base: PrismaClient, rejections: FencingRejection[] = []) {
  return base.$extends(fencing({ models: FENCED_MODELS, onRejection: (r) => rejections.push(r) }))
}

export type FencedDb = ReturnType<typeof fencedClient>

export interface TestDatabase {
  readonly schema: string
  /** Plain Prisma client on the schema: no extension (the control, and for checking rows). */
  readonly base: PrismaClient
  /** `base` with the fencing extension. */
  readonly db: FencedDb
  /** Every rejection `db` reported, in order. */
  readonly rejections: FencingRejection[]
  /** A raw connection outside Prisma, for looking at the server (locks, activity). */
  readonly admin: pg.Client
  /** Drops the schema and closes every connection. */
  close(): Promise<void>
}

/** A unique, lowercase SQL-safe name (≤ 63 characters). */
export function uniqueName(prefix: string): string {
  return `${prefix}_${process.pid}_${randomBytes(4).toString('hex')}`.toLowerCase().slice(0, 63)
}

/** The demo's migration that installs the database guard on Product and Order. */
export const GUARD_MIGRATION = '20261126000000_fence_guard'
/** The migration that brings that guard up to date (fenceGuardUpgradeSql: the transaction's token, re-keys, NULL keys). */
export const GUARD_UPGRADE_MIGRATION = '20261201000000_fence_guard_token'
/** The round-4 upgrade of that guard (the token's transaction, the trigger's own table, definer functions, the strict mode). */
export const GUARD_ROUND4_MIGRATION = '20261205000000_fence_guard_round4'
/** Every migration that brings the first guard of Product and Order up to date: left out for "the guard as first installed". */
export const GUARD_UPGRADES: readonly string[] = [GUARD_UPGRADE_MIGRATION, GUARD_ROUND4_MIGRATION]
/** Left out of an unguarded schema: every migration that installs or replaces the guard of Product and Order. */
export const GUARD_MIGRATIONS: ReadonlySet<string> = new Set([GUARD_MIGRATION, ...GUARD_UPGRADES])

/**
 * Creates and migrates a fresh schema for one test file. `guard: false` leaves out the database
 * guard's migrations: the control that shows what the guard adds; `leaveOut` leaves out the
 * migrations it names (the guard as first installed, without its upgrade).
 */
export async function createTestDatabase(label: string, options: { guard?: boolean; leaveOut?: readonly string[] } = {}): Promise<TestDatabase> {
  const { connectionString } = databaseTarget()
  const schema = uniqueName(`fencing_${label}`)
  const admin = new pg.Client({ connectionString })
  try {
    await admin.connect()
  } catch (cause) {
    throw new Error(
      `PostgreSQL is not reachable at ${redact(connectionString)} (set DATABASE_URL, or start it: npm test does when run as root, see scripts/ensure-system.mjs). These tests need it and never skip.`,
      { cause },
    )
  }
  const migrations = (await readMigrations()).filter((m) => (options.guard !== false || !GUARD_MIGRATIONS.has(m.name)) && !(options.leaveOut ?? []).includes(m.name))
  await applyMigrations(admin, { schema, migrations })
  const base = new PrismaClient({ adapter: new PrismaPg({ connectionString }, { schema }) })
  const rejections: FencingRejection[] = []
  return {
    schema,
    base,
    db: fencedClient(base, rejections),
    rejections,
    admin,
    async close() {
      await base.$disconnect()
      await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`)
      await admin.end()
    },
  }
}

let skuCounter = 0
/** A SKU no other test uses. */
export function uniqueSku(label: string): string {
  skuCounter += 1
  return `${label}-${skuCounter}-${randomBytes(3).toString('hex')}`
}

/** Creates a product with the given stored fence token and returns it. */
export async function seedProduct(base: PrismaClient, fenceToken = 0n, label = 'sku') {
  return base.product.create({ data: { sku: uniqueSku(label), name: 'Test product', priceCents: 1_000, stock: 10, fenceToken } })
}

/**
 * Waits until a backend of `schema` is blocked on a lock (a row lock held by another
 * transaction), so a test knows the interleaving it built is really in place.
 */
export async function waitForLockWait(admin: pg.Client, schema: string, timeoutMs = 10_000): Promise<void> {
  const deadline = performance.now() + timeoutMs
  for (;;) {
    const { rows } = await admin.query<{ n: string }>(
      `SELECT count(*) AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND position($1 in query) > 0`,
      [`"${schema}".`],
    )
    if (Number(rows[0]?.n) > 0) return
    if (performance.now() > deadline) throw new Error(`no backend of schema ${schema} waited for a lock within ${timeoutMs} ms`)
    await new Promise((resolve) => setTimeout(resolve, 10))
  }
}

/**
 * Waits until an open transaction holds the row lock of `Product` `id` (a fence raised, not yet
 * committed): `FOR UPDATE SKIP LOCKED` skips exactly such a row.
 */
export async function waitForRowLocked(admin: pg.Client, schema: string, id: number, timeoutMs = 10_000): Promise<void> {
  const deadline = performance.now() + timeoutMs
  for (;;) {
    const { rows } = await admin.query(`SELECT id FROM "${schema}"."Product" WHERE id = $1 FOR UPDATE SKIP LOCKED`, [id])
    if (rows.length === 0) return
    if (performance.now() > deadline) throw new Error(`Product ${id} was not locked by another transaction within ${timeoutMs} ms`)
    await new Promise((resolve) => setTimeout(resolve, 5))
  }
}

/** A promise with its resolve function outside: a gate a test opens when it is ready. */
export function gate(): { promise: Promise<void>; open: () => void } {
  let open!: () => void
  const promise = new Promise<void>((resolve) => {
    open = resolve
  })
  return { promise, open }
}

/** Settles a promise into `{ value }` or `{ error }`, so a test can assert on either. */
export async function settle<T>(promise: Promise<T>): Promise<{ value?: T; error?: unknown }> {
  try {
    return { value: await promise }
  } catch (error) {
    return { error }
  }
}

/** A second plain PostgreSQL session on `schema`: another holder, another service, psql. */
export async function openSession(schema: string): Promise<pg.Client> {
  const client = new pg.Client({ connectionString: databaseTarget().connectionString })
  await client.connect()
  await client.query(`SET search_path TO "${schema}"`)
  return client
}

/** A transaction another session holds open, e.g. a newer holder's write not yet committed. */
export interface HeldTransaction {
  commit(): Promise<void>
  rollback(): Promise<void>
}

/**
 * Runs `statements` in a transaction of a new session and keeps it open: its row locks are held
 * until `commit()` (or `rollback()`), which also closes the session.
 */
export async function holdTransaction(schema: string, ...statements: [string, unknown[]?][]): Promise<HeldTransaction> {
  const session = await openSession(schema)
  await session.query('BEGIN')
  try {
    for (const [sql, values] of statements) await session.query(sql, values)
  } catch (error) {
    await session.end()
    throw error
  }
  const end = async (how: 'COMMIT' | 'ROLLBACK') => {
    try {
      await session.query(how)
    } finally {
      await session.end()
    }
  }
  return { commit: () => end('COMMIT'), rollback: () => end('ROLLBACK') }
}
