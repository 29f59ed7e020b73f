/**
 * `npm run db:seed [-- --reset] [-- --schema <name>]`: puts the flash-sale demo's products into
 * DATABASE_URL (default postgresql://postgres@127.0.0.1:5432/test), after `npm run db:migrate`.
 *
 * Without `--reset` it only creates the products that are missing and leaves existing ones as
 * they are (a second run changes nothing). With `--reset` it also deletes their orders and
 * payments and puts stock and price back to the seed values, in one transaction: a fresh start
 * for the next demo run. The fence tokens stay as they are: the database guard refuses to lower
 * them (whoever asks), and it need not be lowered — the lock's next tokens are above every token
 * it issued before.
 */
import { resolve } from 'node:path'
import { pathToFileURL } from 'node:url'
import { PrismaPg } from '@prisma/adapter-pg'
import pg from 'pg'
import { PrismaClient } from '../generated/prisma/client.js'
import { EXIT_CODES, runCommand, stringFlag, type CliSpec } from '@fencelock/devkit/cli'
import { connectDatabase, databaseTarget, redact } from '@fencelock/devkit/database-url'

/** A product of the demo, as seeded. */
export interface DemoProduct {
  readonly sku: string
  readonly name: string
  readonly priceCents: number
  readonly stock: number
}

/** The demo's products: few units of each, so a flash sale oversells quickly without a lock. */
export const DEMO_PRODUCTS: readonly DemoProduct[] = Object.freeze([
  { sku: 'FLASH-SNEAKER', name: 'Limited sneaker', priceCents: 12_900, stock: 20 },
  { sku: 'FLASH-WATCH', name: 'Collector watch', priceCents: 49_900, stock: 5 },
  { sku: 'FLASH-VINYL', name: 'Signed vinyl record', priceCents: 3_900, stock: 50 },
])

/** What happened to one product. */
export interface SeedResult {
  readonly sku: string
  readonly action: 'created' | 'kept' | 'reset'
  readonly stock: number
}

/** The client methods the seed uses: any Prisma client of our schema (extended or not) fits. */
type SeedClient = Pick<PrismaClient, '$transaction'>

/**
 * Creates the missing demo products; with `reset`, also deletes their orders and payments and
 * restores the seed values. One transaction, so a failure leaves the data as it was.
 *
 * @example
 * ```ts
 * const results = await seedProducts(db, { reset: true })
 * ```
 */
export async function seedProducts(db: SeedClient, options: { reset?: boolean; products?: readonly DemoProduct[] } = {}): Promise<SeedResult[]> {
  const products = options.products ?? DEMO_PRODUCTS
  return db.$transaction(async (tx) => {
    const results: SeedResult[] = []
    for (const p of products) {
      const existing = await tx.product.findUnique({ where: { sku: p.sku } })
      if (existing === null) {
        await tx.product.create({ data: { ...p } })
        results.push({ sku: p.sku, action: 'created', stock: p.stock })
      } else if (options.reset === true) {
        // Payments reference orders, orders reference the product: delete in that order.
        await tx.payment.deleteMany({ where: { order: { productId: existing.id } } })
        await tx.order.deleteMany({ where: { productId: existing.id } })
        await tx.product.update({ where: { id: existing.id }, data: { name: p.name, priceCents: p.priceCents, stock: p.stock } })
        results.push({ sku: p.sku, action: 'reset', stock: p.stock })
      } else {
        results.push({ sku: p.sku, action: 'kept', stock: existing.stock })
      }
    }
    return results
  })
}

const CLI: CliSpec = {
  command: 'npm run db:seed --',
  summary: "Creates the flash-sale demo's missing products; with --reset, also deletes their orders and payments and restores stock and price, in one transaction.",
  flags: {
    reset: { type: 'boolean', description: 'also reset the existing products (their orders and payments are deleted)' },
    schema: { type: 'string', value: '<name>', description: 'the PostgreSQL schema', default: '?schema= of DATABASE_URL, else public' },
  },
  notes: 'Run `npm run db:migrate` first. DATABASE_URL: default postgresql://postgres@127.0.0.1:5432/test.',
  failure: 'it failed (nothing changed)',
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(resolve(process.argv[1])).href) {
  await runCommand(CLI, process.argv.slice(2), async (values) => {
    const target = databaseTarget()
    const schema = stringFlag(values, 'schema') ?? target.schema
    // Reached first with a plain connection: a database that is not there is a run that could not
    // start (exit 2), not a failed seed.
    const probe = new pg.Client({ connectionString: target.connectionString })
    await connectDatabase(probe, target.connectionString)
    await probe.end()
    const db = new PrismaClient({ adapter: new PrismaPg({ connectionString: target.connectionString }, { schema }) })
    try {
      const results = await seedProducts(db, { reset: values.reset === true })
      for (const r of results) console.log(`[db:seed] ${r.sku}: ${r.action} (stock ${r.stock})`)
      console.log(`[db:seed] ${redact(target.connectionString)} schema ${schema}: ${results.length} products`)
      return EXIT_CODES.ok
    } catch (error) {
      // P2021: a table is missing, the usual cause being a database that was never migrated.
      if ((error as { code?: unknown }).code === 'P2021') throw new Error(`${(error as Error).message} (run \`npm run db:migrate\` first)`, { cause: error })
      throw error
    } finally {
      await db.$disconnect()
    }
  })
}
