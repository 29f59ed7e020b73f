/**
 * Fencing beyond Prisma (@fencelock/fencing/pg): the transaction's token (fencelock.token) read by
 * the database guard, through `withFence` on a raw `pg` client, Drizzle and Kysely. Each is raced
 * the way it breaks — a newer holder's session holds the row lock with its write while the older
 * token's write waits on it, then commits — and each runs against the unguarded control too.
 */
import { eq, sql as drizzleSql } from 'drizzle-orm'
import { drizzle } from 'drizzle-orm/node-postgres'
import { bigint, integer, pgTable, serial, text } from 'drizzle-orm/pg-core'
import { Kysely, PostgresDialect, sql } from 'kysely'
import pg from 'pg'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { databaseTarget } from '@fencelock/devkit/database-url'
import { InvalidFenceTokenError, InvalidFencingOptionError, isFenceGuardError, StaleFencingTokenError, withFence } from '../src/pg.js'
import { BAD_TOKENS } from './support/bad-tokens.js'
import { createTestDatabase, openSession, seedProduct, settle, type TestDatabase } from './support/database.js'

let g: TestDatabase
let u: TestDatabase

beforeAll(async () => {
  ;[g, u] = await Promise.all([createTestDatabase('pg'), createTestDatabase('pg_unguarded', { guard: false })])
})

afterAll(async () => {
  await Promise.all([g?.close(), u?.close()])
})

/** A client of its own on the schema, for one test; ended afterwards. */
async function clientOn(t: TestDatabase): Promise<pg.Client> {
  const client = new pg.Client({ connectionString: databaseTarget().connectionString })
  await client.connect()
  await client.query(`SET search_path TO "${t.schema}"`)
  return client
}

/** While a newer holder (token 20) holds `Product` `id` with its uncommitted write, runs `write`; commits the holder once `write` waits on it. */
async function behindNewerHolder<T>(t: TestDatabase, id: number, write: () => Promise<T>) {
  const holder = await openSession(t.schema)
  try {
    const pid = (await holder.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]?.pid
    await holder.query('BEGIN')
    await holder.query(`SELECT set_config('fencelock.token', '20', true)`)
    await holder.query(`UPDATE "Product" SET stock = 100 WHERE id = $1`, [id])
    const pending = settle(write())
    try {
      // Until a backend waits for the holder's lock: the interleaving is in place.
      const deadline = performance.now() + 10_000
      while ((await t.admin.query(`SELECT 1 FROM pg_stat_activity WHERE $1 = ANY (pg_blocking_pids(pid))`, [pid])).rows.length === 0) {
        if (performance.now() > deadline) throw new Error('the write never waited for the holder’s row lock')
        await new Promise((resolve) => setTimeout(resolve, 5))
      }
    } finally {
      await holder.query('COMMIT')
    }
    return await pending
  } finally {
    await holder.end()
  }
}

const row = (t: TestDatabase, id: number) => t.base.product.findUniqueOrThrow({ where: { id } })

describe('withFence', () => {
  it('refuses a token that is not a positive bigint, a pool, and a missing fn before any I/O', async () => {
    const sent: string[] = []
    const client = { query: async (text: string) => void sent.push(text) }
    for (const [label, bad] of [...BAD_TOKENS, ['zero', 0n] as const, ['zero as digits', '0'] as const]) {
      expect((await settle(withFence(client, bad as bigint, async () => 1))).error, label).toBeInstanceOf(InvalidFenceTokenError)
    }
    const pool = new pg.Pool({ connectionString: databaseTarget().connectionString })
    try {
      expect((await settle(withFence(pool, 5n, async () => 1))).error).toMatchObject({ name: 'InvalidFencingOptionError', field: 'client' })
      expect(pool.totalCount).toBe(0)
    } finally {
      await pool.end()
    }
    expect((await settle(withFence({} as never, 5n, async () => 1))).error).toBeInstanceOf(InvalidFencingOptionError)
    expect((await settle(withFence(client, 5n, 'nope' as never))).error).toMatchObject({ field: 'fn' })
    expect(sent).toEqual([])
  })

  it('a current token writes, and the fence follows it without the SQL naming it; a stale one is refused and keeps nothing', async () => {
    const p = await seedProduct(g.base, 10n)
    const client = await clientOn(g)
    try {
      await withFence(client, 12n, (c) => c.query(`UPDATE "Product" SET stock = stock - 1 WHERE id = $1`, [p.id]))
      expect(await row(g, p.id)).toMatchObject({ stock: 9, fenceToken: 12n })
      const stale = await settle(
        withFence(client, 11n, async (c) => {
          await c.query(`INSERT INTO "Order" ("productId", "buyerId", quantity) VALUES ($1, 'stale', 1)`, [p.id])
          await c.query(`UPDATE "Product" SET stock = 0 WHERE id = $1`, [p.id])
        }),
      )
      expect(stale.error).toBeInstanceOf(StaleFencingTokenError)
      expect(stale.error).toMatchObject({ model: 'Product', operation: 'update', token: 11n, storedToken: 12n })
      expect(isFenceGuardError((stale.error as Error).cause)).toBe(true)
      expect(await row(g, p.id)).toMatchObject({ stock: 9, fenceToken: 12n })
      // The order written before the refusal was rolled back with it; the order it inserted under 12 carries 12.
      expect(await g.base.order.count({ where: { productId: p.id } })).toBe(0)
      // The client is usable again, outside any transaction and without a token.
      expect((await client.query(`SELECT current_setting('fencelock.token', true) AS t`)).rows).toEqual([{ t: '' }])
    } finally {
      await client.end()
    }
  })

  it('race: a write under 15 that waited for holder 20’s row lock is refused once 20 commits', async () => {
    const p = await seedProduct(g.base, 10n)
    const client = await clientOn(g)
    try {
      const stale = await behindNewerHolder(g, p.id, () => withFence(client, 15n, (c) => c.query(`UPDATE "Product" SET stock = 1 WHERE id = $1`, [p.id])))
      expect(stale.error).toMatchObject({ name: 'StaleFencingTokenError', token: 15n, storedToken: 20n })
      expect(await row(g, p.id)).toMatchObject({ stock: 100, fenceToken: 20n })
    } finally {
      await client.end()
    }
  })

  it('race, control: without the guard the same write overwrites holder 20’s', async () => {
    const p = await seedProduct(u.base, 10n)
    const client = await clientOn(u)
    try {
      const stale = await behindNewerHolder(u, p.id, () => withFence(client, 15n, (c) => c.query(`UPDATE "Product" SET stock = 1 WHERE id = $1`, [p.id])))
      expect(stale.error).toBeUndefined()
      expect(await row(u, p.id)).toMatchObject({ stock: 1 })
    } finally {
      await client.end()
    }
  })
})

/** The demo's Product table, as Drizzle declares it. */
const products = pgTable('Product', {
  id: serial('id').primaryKey(),
  sku: text('sku').notNull(),
  stock: integer('stock').notNull(),
  fenceToken: bigint('fenceToken', { mode: 'bigint' }).notNull(),
})

describe('Drizzle (node-postgres) inside withFence', () => {
  const sell = (client: pg.Client, token: bigint, sku: string) =>
    withFence(client, token, async (c) => {
      const db = drizzle(c)
      await db.update(products).set({ stock: drizzleSql`${products.stock} - 1` }).where(eq(products.sku, sku))
    })

  it.each([
    ['guarded: refused, holder 20’s stock kept', () => g, (error: unknown) => expect(error).toBeInstanceOf(StaleFencingTokenError), 100],
    ['control, unguarded: the older write lands on holder 20’s', () => u, (error: unknown) => expect(error).toBeUndefined(), 99],
  ] as const)('race: %s', async (_label, database, outcome, stock) => {
    const t = database()
    const p = await seedProduct(t.base, 10n)
    const client = await clientOn(t)
    try {
      const stale = await behindNewerHolder(t, p.id, () => sell(client, 15n, p.sku))
      outcome(stale.error)
      expect(await row(t, p.id)).toMatchObject({ stock })
    } finally {
      await client.end()
    }
  })
})

interface KyselyDatabase {
  Product: { id: number; sku: string; stock: number; fenceToken: string }
}

describe('Kysely: its own transaction, the token set in it', () => {
  const kyselyOn = (t: TestDatabase) =>
    new Kysely<KyselyDatabase>({ dialect: new PostgresDialect({ pool: new pg.Pool({ connectionString: databaseTarget().connectionString, options: `-c search_path="${t.schema}"` }) }) })

  const sell = (db: Kysely<KyselyDatabase>, token: bigint, sku: string) =>
    db.transaction().execute(async (trx) => {
      await sql`SELECT set_config('fencelock.token', ${token.toString()}, true)`.execute(trx)
      await trx
        .updateTable('Product')
        .set((eb) => ({ stock: eb('stock', '-', 1) }))
        .where('sku', '=', sku)
        .execute()
    })

  it.each([
    ['guarded: refused (isFenceGuardError), holder 20’s stock kept', () => g, (error: unknown) => expect(isFenceGuardError(error)).toBe(true), 100],
    ['control, unguarded: the older write lands on holder 20’s', () => u, (error: unknown) => expect(error).toBeUndefined(), 99],
  ] as const)('race: %s', async (_label, database, outcome, stock) => {
    const t = database()
    const p = await seedProduct(t.base, 10n)
    const db = kyselyOn(t)
    try {
      const stale = await behindNewerHolder(t, p.id, () => sell(db, 15n, p.sku))
      outcome(stale.error)
      expect(await row(t, p.id)).toMatchObject({ stock })
      // A current token writes, and the fence follows it.
      await sell(db, 21n, p.sku)
      expect(await row(t, p.id)).toMatchObject({ stock: stock - 1, fenceToken: t === g ? 21n : 10n })
    } finally {
      await db.destroy()
    }
  })
})
