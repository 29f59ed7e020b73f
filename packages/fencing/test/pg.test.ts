/**
 * Fencing beyond Prisma (@fencelock/fencing/pg): the transaction's token (fencelock.token) read by
 * the database guard, through `withFence` on a raw `pg` client, Drizzle and Kysely. Each is raced
 * the way it breaks — a newer holder's session holds the row lock with its write while the older
 * token's write waits on it, then commits — and each runs against the unguarded control too.
 */
import { eq, sql as drizzleSql } from 'drizzle-orm'
import { drizzle } from 'drizzle-orm/node-postgres'
import { bigint, integer, pgTable, serial, text } from 'drizzle-orm/pg-core'
import { CompiledQuery, Kysely, PostgresDialect } from 'kysely'
import pg from 'pg'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { databaseTarget } from '@fencelock/devkit/database-url'
import { fenceGuardSql } from '../src/index.js'
import { FENCE_TOKEN_SCOPE_SQLSTATE, FenceTransactionLostError, InvalidFenceTokenError, SET_FENCE_TOKEN_SQL, InvalidFencingOptionError, isFenceGuardError, StaleFencingTokenError, UnsupportedFencedWriteError, withFence } from '../src/pg.js'
import { BAD_TOKENS } from './support/bad-tokens.js'
import { createTestDatabase, GUARD_ROUND4_MIGRATION, openSession, seedProduct, settle, type TestDatabase } from './support/database.js'

let g: TestDatabase
let u: TestDatabase
/** The guard as round 3 left it (without the round-4 upgrade): the control of the token's transaction. */
let r3: TestDatabase

beforeAll(async () => {
  ;[g, u, r3] = await Promise.all([
    createTestDatabase('pg'),
    createTestDatabase('pg_unguarded', { guard: false }),
    createTestDatabase('pg_round3', { leaveOut: [GUARD_ROUND4_MIGRATION] }),
  ])
})

afterAll(async () => {
  await Promise.all([g?.close(), u?.close(), r3?.close()])
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
    await holder.query(SET_FENCE_TOKEN_SQL, ['20'])
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

describe('withFence knows its transaction is still the one it opened when it commits', () => {
  /** What withFence did before it checked: BEGIN, the transaction-local token, fn, COMMIT — the control. */
  const unchecked = async <R>(client: pg.Client, token: bigint, fn: (c: pg.Client) => Promise<R>): Promise<R> => {
    await client.query('BEGIN')
    try {
      await client.query(SET_FENCE_TOKEN_SQL, [token.toString()])
      const result = await fn(client)
      await client.query('COMMIT')
      return result
    } catch (error) {
      await client.query('ROLLBACK').catch(() => {})
      throw error
    }
  }
  // fn opens its ORM's own transaction on the same client: Drizzle sends BEGIN (PostgreSQL only
  // warns) and COMMIT, which ends withFence's transaction and the token with it. The write after it
  // runs outside any transaction of withFence's.
  const ownTransactionThenWrite = (sku: string) => async (c: pg.Client) => {
    const db = drizzle(c)
    await db.transaction(async (tx) => {
      await tx.select().from(products).where(eq(products.sku, sku))
    })
    await db.update(products).set({ stock: 0 }).where(eq(products.sku, sku))
    return 'returned'
  }
  // fn catches the guard's refusal and returns: the transaction is aborted, COMMIT answers ROLLBACK.
  const swallowRefusal = (id: number) => async (c: pg.Client) => {
    await c.query(`INSERT INTO "Order" ("productId", "buyerId", quantity) VALUES ($1, 'lost', 1)`, [id])
    try {
      await c.query(`UPDATE "Product" SET stock = 0 WHERE id = $1`, [id])
    } catch {
      // swallowed
    }
    return 'returned'
  }

  it('fn’s own transaction committed withFence’s: FenceTransactionLostError (ended), not success', async () => {
    const p = await seedProduct(g.base, 11n)
    const client = await clientOn(g)
    try {
      const result = await settle(withFence(client, 10n, ownTransactionThenWrite(p.sku)))
      expect(result.error).toBeInstanceOf(FenceTransactionLostError)
      expect(result.error).toMatchObject({ reason: 'ended', token: 10n })
      // The write fn sent after its COMMIT ran outside withFence's transaction: the token withFence
      // left for the session names that ended transaction, and the guard refused the write (FL002).
      expect((result.error as Error).cause).toMatchObject({ cause: { code: FENCE_TOKEN_SCOPE_SQLSTATE } }) // Drizzle's error, wrapping pg's
      expect(await row(g, p.id)).toMatchObject({ stock: 10, fenceToken: 11n })
      // And withFence cleared the session's settings.
      expect((await client.query(`SELECT current_setting('fencelock.token', true) AS t, current_setting('fencelock.txid', true) AS x`)).rows).toEqual([{ t: '', x: '' }])
      // The client is outside any transaction again.
      expect((await client.query(`SELECT pg_current_xact_id_if_assigned() AS x`)).rows).toEqual([{ x: null }])
    } finally {
      await client.end()
    }
  })

  it('control: unchecked, the same fn returns normally and its stale write under 10 lands on the row at 11', async () => {
    const p = await seedProduct(g.base, 11n)
    const client = await clientOn(g)
    try {
      expect(await unchecked(client, 10n, ownTransactionThenWrite(p.sku))).toBe('returned')
      expect(await row(g, p.id)).toMatchObject({ stock: 0 })
    } finally {
      await client.end()
    }
  })

  it('fn swallowed a refusal: COMMIT answered ROLLBACK, and withFence says so (rolled-back); nothing kept', async () => {
    const p = await seedProduct(g.base, 11n)
    const client = await clientOn(g)
    try {
      const result = await settle(withFence(client, 10n, swallowRefusal(p.id)))
      expect(result.error).toBeInstanceOf(FenceTransactionLostError)
      expect(result.error).toMatchObject({ reason: 'rolled-back', token: 10n })
      expect(await g.base.order.count({ where: { productId: p.id } })).toBe(0)
      expect(await row(g, p.id)).toMatchObject({ stock: 10, fenceToken: 11n })
      // The control: unchecked, the same fn "succeeds" although PostgreSQL rolled it back.
      expect(await unchecked(client, 10n, swallowRefusal(p.id))).toBe('returned')
      expect(await g.base.order.count({ where: { productId: p.id } })).toBe(0)
    } finally {
      await client.end()
    }
  })

  it('fn set another token in withFence’s transaction: refused at commit (token-changed), nothing kept', async () => {
    const p = await seedProduct(g.base, 11n)
    const client = await clientOn(g)
    try {
      const result = await settle(
        withFence(client, 12n, async (c) => {
          await c.query(`SELECT set_config('fencelock.token', '13', true)`)
          await c.query(`UPDATE "Product" SET stock = 1 WHERE id = $1`, [p.id])
        }),
      )
      expect(result.error).toMatchObject({ name: 'FenceTransactionLostError', reason: 'token-changed' })
      expect(await row(g, p.id)).toMatchObject({ stock: 10, fenceToken: 11n })
    } finally {
      await client.end()
    }
  })
})

describe('a token not set by the current transaction is refused by the guard (FL002)', () => {
  const scopeRefusal = (error: unknown) => {
    expect(error).toMatchObject({ code: FENCE_TOKEN_SCOPE_SQLSTATE })
    expect((error as Error).message).toMatch(/was not set by this transaction/)
  }

  it('set for the session (SET, set_config(..., false)), SET LOCAL without the transaction’s id, or left by an earlier transaction: refused, the row untouched', async () => {
    const p = await seedProduct(g.base, 5n)
    const client = await clientOn(g)
    try {
      await client.query(`SET fencelock.token = '10'`)
      scopeRefusal((await settle(client.query(`UPDATE "Product" SET stock = 1 WHERE id = $1`, [p.id]))).error)
      await client.query(`RESET fencelock.token`)
      await client.query(`SELECT set_config('fencelock.token', '10', false)`)
      await client.query('BEGIN')
      scopeRefusal((await settle(client.query(`UPDATE "Product" SET stock = 1 WHERE id = $1`, [p.id]))).error)
      await client.query('ROLLBACK')
      await client.query(`SELECT set_config('fencelock.token', '', false)`)
      await client.query('BEGIN')
      await client.query(`SET LOCAL fencelock.token = '10'`)
      scopeRefusal((await settle(client.query(`DELETE FROM "Product" WHERE id = $1`, [p.id]))).error)
      await client.query('ROLLBACK')
      // Both settings made for the session by an earlier transaction: the id names a transaction that is over.
      await client.query(`SELECT set_config('fencelock.token', '10', false), set_config('fencelock.txid', pg_current_xact_id()::text, false)`)
      scopeRefusal((await settle(client.query(`UPDATE "Product" SET stock = 1 WHERE id = $1`, [p.id]))).error)
      scopeRefusal((await settle(client.query(`TRUNCATE "Product" CASCADE`))).error)
      await client.query(`RESET fencelock.token; RESET fencelock.txid`)
      expect(await row(g, p.id)).toMatchObject({ stock: 10, fenceToken: 5n })
      // SET_FENCE_TOKEN_SQL, in the transaction that writes: accepted, the fence raised to the token.
      await client.query('BEGIN')
      await client.query(SET_FENCE_TOKEN_SQL, ['10'])
      await client.query(`UPDATE "Product" SET stock = 2 WHERE id = $1`, [p.id])
      await client.query('COMMIT')
      expect(await row(g, p.id)).toMatchObject({ stock: 2, fenceToken: 10n })
    } finally {
      await client.end()
    }
  })

  it('control, the round-3 guard: a token set for the session fences the later writes of the connection, and raises the fence to it', async () => {
    const p = await seedProduct(r3.base, 5n)
    const client = await clientOn(r3)
    try {
      await client.query(`SET fencelock.token = '10'`)
      await client.query(`UPDATE "Product" SET stock = 1 WHERE id = $1`, [p.id])
      expect(await row(r3, p.id)).toMatchObject({ stock: 1, fenceToken: 10n })
    } finally {
      await client.end()
    }
  })
})

describe('withFence: a delete that cascades to a guarded table', () => {
  it('is refused as the Prisma path refuses it: UnsupportedFencedWriteError (cascade), nothing kept', async () => {
    const s = `"${g.schema}"`
    await g.admin.query(`CREATE TABLE ${s}.cascade_parent (id int PRIMARY KEY, fence bigint NOT NULL DEFAULT 0)`)
    await g.admin.query(`CREATE TABLE ${s}.cascade_child (id int PRIMARY KEY, parent int NOT NULL REFERENCES ${s}.cascade_parent ON DELETE CASCADE, fence bigint NOT NULL DEFAULT 0)`)
    await g.admin.query(`BEGIN; ${fenceGuardSql({ schema: g.schema, table: 'cascade_parent', column: 'fence', key: 'id' })}; ${fenceGuardSql({ schema: g.schema, table: 'cascade_child', column: 'fence', key: 'id' })}; COMMIT`)
    await g.admin.query(`INSERT INTO ${s}.cascade_parent VALUES (1, 5); INSERT INTO ${s}.cascade_child VALUES (1, 1, 7)`)
    const client = await clientOn(g)
    try {
      const refused = await settle(withFence(client, 1000n, (c) => c.query(`DELETE FROM cascade_parent WHERE id = 1`)))
      expect(refused.error).toBeInstanceOf(UnsupportedFencedWriteError)
      expect(refused.error).toMatchObject({ reason: 'cascade', model: 'cascade_child' })
      expect((await g.admin.query(`SELECT id, fence FROM ${s}.cascade_child`)).rows).toEqual([{ id: 1, fence: '7' }])
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
      await trx.executeQuery(CompiledQuery.raw(SET_FENCE_TOKEN_SQL, [token.toString()]))
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
