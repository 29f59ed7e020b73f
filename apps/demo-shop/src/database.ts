/**
 * The shop's database: a Prisma client per process (driver adapter `pg`), a schema of its own
 * per run (migrated with the project's runner, then seeded), and the embedded PostgreSQL
 * (PGlite over pglite-socket) used when no `DATABASE_URL` is given.
 */
import { fenceGuardObjects, type FenceGuardOptions } from '@fencelock/fencing'
import { PrismaPg } from '@prisma/adapter-pg'
import pg from 'pg'
import { PrismaClient } from '../../../generated/prisma/client.js'
import { applyMigrations, quoteIdent } from '@fencelock/devkit/migrations'
import { connectDatabase, databaseTarget, redact } from '@fencelock/devkit/database-url'

export { PrismaClient, databaseTarget, redact, quoteIdent }

/** The tables the demo's migrations guard (prisma/migrations/20261126000000_fence_guard, …000100_payment_gateway): the fence lives on in the database. */
export const GUARDED_TABLES: readonly FenceGuardOptions[] = Object.freeze([
  { table: 'Product', column: 'fenceToken', key: 'sku' },
  { table: 'Order', column: 'fenceToken', key: 'id' },
  { table: 'GatewayFence', column: 'fenceToken', key: 'resource' },
  { table: 'StockSegment', column: 'fenceToken', key: 'id' },
])

/**
 * The demo's own bookkeeping table, created next to the Prisma tables in a run's schema: the
 * stock each product was seeded with. The lost-update count (initial ≠ remaining + sold) needs
 * it, and it must survive a Redis restart, so it lives in the database.
 */
export const SEED_TABLE = 'ShopSeed'

/** Where a process connects: a `pg` connection string (no `schema` parameter) and the schema. */
export interface DatabaseLocation {
  readonly connectionString: string
  readonly schema: string
}

/** A product to seed. */
export interface ProductSeed {
  readonly sku: string
  readonly name: string
  readonly priceCents: number
  readonly stock: number
  /**
   * Split the stock over this many `StockSegment` rows (issue 23), `Product.stock` then 0; 1 or
   * undefined: no rows, the stock stays on the product.
   */
  readonly segments?: number
}

/**
 * The demo's per-segment bookkeeping (beside {@link SEED_TABLE}): the stock each segment was
 * seeded with, for oversold units and lost updates counted per segment.
 */
export const SEGMENT_SEED_TABLE = 'ShopSegmentSeed'

/** `stock` split over `segments` rows as evenly as it goes, the remainder on the first ones. */
export function splitStock(stock: number, segments: number): number[] {
  return Array.from({ length: segments }, (_, i) => Math.floor(stock / segments) + (i < stock % segments ? 1 : 0))
}

/** Schema names go into SQL identifiers and Prisma's options: keep them plain. */
export const SCHEMA_PATTERN = /^[a-z_][a-z0-9_]{0,62}$/

/**
 * A Prisma client on `location`, with at most `poolSize` connections. Every instance process
 * makes its own, as separate services would.
 */
export function createPrisma(location: DatabaseLocation, poolSize: number): PrismaClient {
  const adapter = new PrismaPg(
    // Named after the run's schema, so a bench finds the run's server processes in pg_stat_activity.
    { connectionString: location.connectionString, max: poolSize, connectionTimeoutMillis: 10_000, application_name: location.schema },
    { schema: location.schema },
  )
  return new PrismaClient({ adapter })
}

async function withClient<T>(connectionString: string, fn: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString })
  await connectDatabase(client, connectionString)
  try {
    return await fn(client)
  } finally {
    await client.end().catch(() => {})
  }
}

/**
 * Makes `location.schema` hold a fresh shop: migrates it (creating it when missing), empties the
 * shop's tables, and seeds `products`. Everything the report later counts starts from here.
 */
export async function prepareShopSchema(location: DatabaseLocation, products: readonly ProductSeed[]): Promise<void> {
  if (!SCHEMA_PATTERN.test(location.schema)) throw new Error(`schema name ${JSON.stringify(location.schema)} must match ${SCHEMA_PATTERN}`)
  await withClient(location.connectionString, async (client) => {
    await applyMigrations(client, { schema: location.schema })
    const s = quoteIdent(location.schema)
    const seed = `${s}.${quoteIdent(SEED_TABLE)}`
    await client.query('BEGIN')
    try {
      await client.query(`CREATE TABLE IF NOT EXISTS ${seed} (sku TEXT PRIMARY KEY, "initialStock" INTEGER NOT NULL)`)
      const segmentSeed = `${s}.${quoteIdent(SEGMENT_SEED_TABLE)}`
      await client.query(
        `CREATE TABLE IF NOT EXISTS ${segmentSeed} (sku TEXT NOT NULL, segment INTEGER NOT NULL, "initialStock" INTEGER NOT NULL, PRIMARY KEY (sku, segment))`,
      )
      // A fresh shop, so the guard's tombstones go too: truncating them is the guard's
      // deliberate reset, fine here because no instance of an earlier run is still writing.
      const tombstones = GUARDED_TABLES.map((t) => `${s}.${quoteIdent(fenceGuardObjects(t).tombstoneTable)}`).join(', ')
      // The gateway's ledger too: order ids start again at 1, and an old charge of order 1 would
      // count as a double charge of the new one (or an old Idempotency-Key replay its charge).
      const ledger = ['GatewayCharge', 'GatewayIdempotencyKey', 'GatewayFence'].map((t) => `${s}.${quoteIdent(t)}`).join(', ')
      await client.query(`TRUNCATE ${s}."Payment", ${s}."Order", ${s}."StockSegment", ${s}."Product", ${seed}, ${segmentSeed}, ${ledger}, ${tombstones} RESTART IDENTITY CASCADE`)
      for (const p of products) {
        const segments = p.segments ?? 1
        const inserted = await client.query<{ id: number }>(
          `INSERT INTO ${s}."Product" (sku, name, "priceCents", stock) VALUES ($1, $2, $3, $4) RETURNING id`,
          [p.sku, p.name, p.priceCents, segments > 1 ? 0 : p.stock],
        )
        await client.query(`INSERT INTO ${seed} (sku, "initialStock") VALUES ($1, $2)`, [p.sku, p.stock])
        if (segments > 1) {
          for (const [segment, stock] of splitStock(p.stock, segments).entries()) {
            await client.query(`INSERT INTO ${s}."StockSegment" ("productId", segment, stock) VALUES ($1, $2, $3)`, [inserted.rows[0]?.id, segment, stock])
            await client.query(`INSERT INTO ${segmentSeed} (sku, segment, "initialStock") VALUES ($1, $2, $3)`, [p.sku, segment, stock])
          }
        }
      }
      await client.query('COMMIT')
    } catch (error) {
      await client.query('ROLLBACK').catch(() => {})
      throw error
    }
  })
}

/** Drops a run's schema and everything in it. */
export async function dropShopSchema(location: DatabaseLocation): Promise<void> {
  if (!SCHEMA_PATTERN.test(location.schema) || location.schema === 'public') return
  await withClient(location.connectionString, (client) => client.query(`DROP SCHEMA IF EXISTS ${quoteIdent(location.schema)} CASCADE`))
}

/** A PostgreSQL the demo started itself; `stop()` ends it. */
export interface EmbeddedDatabase {
  readonly connectionString: string
  stop(): Promise<void>
}

/**
 * An in-memory PGlite served on a loopback port (see embedded-postgres.ts), so the instance
 * processes connect to it with `pg` like to a real server. One session: batches and transactions
 * are serialized. Fine for a demo, not for a benchmark. Takes 2-4 s and 0.5-0.9 GB to start.
 */
export async function startEmbeddedDatabase(): Promise<EmbeddedDatabase> {
  const { startEmbeddedPostgres } = await import('./embedded-postgres.js')
  return startEmbeddedPostgres()
}
