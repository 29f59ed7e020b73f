/**
 * fenceGuardSql: the SQL it generates, installed on tables of the tests' own in a schema of
 * their own, attacked with plain SQL from several sessions. No Prisma here: the guard must hold
 * whatever client writes.
 */
import { readFile } from 'node:fs/promises'
import { join } from 'node:path'
import pg from 'pg'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { databaseTarget } from '@fencelock/devkit/database-url'
import { FENCE_GUARD_SQLSTATE, fenceGuardObjects, fenceGuardSql, InvalidFencingOptionError, isFenceGuardError } from '../src/index.js'
import { GUARD_MIGRATION, holdTransaction, openSession, settle, uniqueName } from './support/database.js'

const schema = uniqueName('fencing_guard')
let admin: pg.Client

beforeAll(async () => {
  admin = new pg.Client({ connectionString: databaseTarget().connectionString })
  await admin.connect()
  await admin.query(`CREATE SCHEMA "${schema}"`)
  await admin.query(`SET search_path TO "${schema}"`)
})

afterAll(async () => {
  await admin?.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`)
  await admin?.end()
})

let tables = 0
/** A fresh table `item_<n>` (composite key region + code), guarded in one transaction as a migration would be. */
async function guardedTable(options: { schema?: boolean } = {}): Promise<string> {
  tables += 1
  const table = `item_${tables}`
  await admin.query(`CREATE TABLE "${table}" (region text, code int, qty int NOT NULL DEFAULT 0, fence bigint NOT NULL DEFAULT 0, PRIMARY KEY (region, code))`)
  const sql = fenceGuardSql({ table, column: 'fence', key: ['region', 'code'], ...(options.schema === true ? { schema } : {}) })
  await admin.query(`BEGIN; ${sql}; COMMIT`)
  return table
}

const code = (error: unknown) => (error as { code?: string } | undefined)?.code

describe('fenceGuardSql', () => {
  it('refuses an UPDATE that lowers the fence, from any session; equal and higher pass', async () => {
    const t = await guardedTable()
    await admin.query(`INSERT INTO "${t}" VALUES ('eu', 1, 5, 10)`)
    const lower = await settle(admin.query(`UPDATE "${t}" SET fence = 9, qty = 0`))
    expect(code(lower.error)).toBe(FENCE_GUARD_SQLSTATE)
    expect(isFenceGuardError(lower.error)).toBe(true)
    expect(JSON.parse((lower.error as { detail: string }).detail)).toMatchObject({ table: t, column: 'fence', stored: '10', token: '9' })
    await admin.query(`UPDATE "${t}" SET qty = 1`)
    await admin.query(`UPDATE "${t}" SET fence = 10, qty = 2`)
    await admin.query(`UPDATE "${t}" SET fence = 11, qty = 3`)
    expect((await admin.query(`SELECT qty, fence FROM "${t}"`)).rows).toEqual([{ qty: 3, fence: '11' }])
  })

  it('keeps a deleted row’s fence: the key cannot come back under an older token, per composite key', async () => {
    const t = await guardedTable()
    await admin.query(`INSERT INTO "${t}" VALUES ('eu', 1, 5, 30), ('us', 1, 5, 30)`)
    await admin.query(`DELETE FROM "${t}" WHERE region = 'eu'`)
    expect(code((await settle(admin.query(`INSERT INTO "${t}" VALUES ('eu', 1, 0, 29)`))).error)).toBe(FENCE_GUARD_SQLSTATE)
    expect(code((await settle(admin.query(`INSERT INTO "${t}" (region, code) VALUES ('eu', 1)`))).error)).toBe(FENCE_GUARD_SQLSTATE)
    // Another key is another row; a never-used key starts from nothing.
    await admin.query(`INSERT INTO "${t}" VALUES ('eu', 2, 0, 0)`)
    await admin.query(`INSERT INTO "${t}" VALUES ('eu', 1, 0, 30)`)
    const tombstones = fenceGuardObjects({ table: t, column: 'fence', key: ['region', 'code'] }).tombstoneTable
    expect((await admin.query(`SELECT region, code, fence FROM "${tombstones}" ORDER BY region, code`)).rows).toEqual([
      { region: 'eu', code: 1, fence: '30' },
      { region: 'eu', code: 2, fence: '0' },
      { region: 'us', code: 1, fence: '30' },
    ])
  })

  it('INSERT ... ON CONFLICT DO UPDATE on a live row is an update, not a recreation', async () => {
    const t = await guardedTable()
    await admin.query(`INSERT INTO "${t}" VALUES ('eu', 1, 5, 10)`)
    await admin.query(`UPDATE "${t}" SET fence = 20`)
    await admin.query(`INSERT INTO "${t}" VALUES ('eu', 1, 7, 0) ON CONFLICT (region, code) DO UPDATE SET qty = EXCLUDED.qty`)
    expect((await admin.query(`SELECT qty, fence FROM "${t}"`)).rows).toEqual([{ qty: 7, fence: '20' }])
  })

  it('a re-key leaves the old key its fence and checks the new key', async () => {
    const t = await guardedTable()
    await admin.query(`INSERT INTO "${t}" VALUES ('eu', 1, 5, 10)`)
    await admin.query(`DELETE FROM "${t}" WHERE code = 1`)
    await admin.query(`INSERT INTO "${t}" VALUES ('eu', 2, 5, 5)`)
    // Moving row 2 onto key 1 would recreate key 1 under 5 < 10.
    expect(code((await settle(admin.query(`UPDATE "${t}" SET code = 1 WHERE code = 2`))).error)).toBe(FENCE_GUARD_SQLSTATE)
    // Moving it elsewhere leaves key 2 the fence it had (5).
    await admin.query(`UPDATE "${t}" SET code = 3, fence = 12 WHERE code = 2`)
    expect(code((await settle(admin.query(`INSERT INTO "${t}" VALUES ('eu', 2, 0, 4)`))).error)).toBe(FENCE_GUARD_SQLSTATE)
    await admin.query(`INSERT INTO "${t}" VALUES ('eu', 2, 0, 5)`)
  })

  it('TRUNCATE keeps the fences of the rows it removes; truncating the tombstones too is the deliberate reset', async () => {
    const t = await guardedTable()
    const tombstones = fenceGuardObjects({ table: t, column: 'fence', key: ['region', 'code'] }).tombstoneTable
    await admin.query(`INSERT INTO "${t}" VALUES ('eu', 1, 5, 10)`)
    await admin.query(`UPDATE "${t}" SET fence = 50`)
    await admin.query(`TRUNCATE "${t}"`)
    expect(code((await settle(admin.query(`INSERT INTO "${t}" VALUES ('eu', 1, 0, 49)`))).error)).toBe(FENCE_GUARD_SQLSTATE)
    await admin.query(`TRUNCATE "${t}", "${tombstones}"`)
    await admin.query(`INSERT INTO "${t}" VALUES ('eu', 1, 0, 0)`)
  })

  it('the tombstones are never lowered, re-keyed nor deleted row by row', async () => {
    const t = await guardedTable()
    const tombstones = fenceGuardObjects({ table: t, column: 'fence', key: ['region', 'code'] }).tombstoneTable
    await admin.query(`INSERT INTO "${t}" VALUES ('eu', 1, 5, 10)`)
    for (const sql of [`DELETE FROM "${tombstones}"`, `UPDATE "${tombstones}" SET fence = 0`, `UPDATE "${tombstones}" SET code = 9`]) {
      expect(code((await settle(admin.query(sql))).error), sql).toBe(FENCE_GUARD_SQLSTATE)
    }
    await admin.query(`UPDATE "${tombstones}" SET fence = 11`)
  })

  it('a delete and an older re-create racing in two sessions: refused under READ COMMITTED, a serialization failure under REPEATABLE READ', async () => {
    const t = await guardedTable()
    for (const [n, isolation, expected] of [
      [1, 'READ COMMITTED', FENCE_GUARD_SQLSTATE],
      [2, 'REPEATABLE READ', '40001'],
    ] as const) {
      await admin.query(`INSERT INTO "${t}" VALUES ('eu', ${n}, 5, 20)`)
      const creator = await openSession(schema)
      try {
        await creator.query(`BEGIN ISOLATION LEVEL ${isolation}`)
        await creator.query('SELECT 1') // its snapshot is taken before the delete commits
        const deleter = await holdTransaction(schema, [`UPDATE "${t}" SET fence = 30 WHERE code = ${n}`], [`DELETE FROM "${t}" WHERE code = ${n}`])
        const create = settle(creator.query(`INSERT INTO "${t}" VALUES ('eu', ${n}, 0, 29)`))
        await new Promise((resolve) => setTimeout(resolve, 200))
        await deleter.commit()
        expect(code((await create).error), isolation).toBe(expected)
        await creator.query('ROLLBACK')
      } finally {
        await creator.end()
      }
      expect((await admin.query(`SELECT count(*)::int AS n FROM "${t}" WHERE code = ${n}`)).rows).toEqual([{ n: 0 }])
    }
  })

  it('control: without the guard, that race recreates the row under the older token', async () => {
    await admin.query(`CREATE TABLE plain_item (code int PRIMARY KEY, fence bigint NOT NULL DEFAULT 0)`)
    await admin.query(`INSERT INTO plain_item VALUES (1, 20)`)
    const deleter = await holdTransaction(schema, [`UPDATE plain_item SET fence = 30 WHERE code = 1`], [`DELETE FROM plain_item WHERE code = 1`])
    const create = settle(admin.query(`INSERT INTO plain_item VALUES (1, 29)`))
    await new Promise((resolve) => setTimeout(resolve, 200))
    await deleter.commit()
    expect((await create).error).toBeUndefined()
    expect((await admin.query(`SELECT fence FROM plain_item`)).rows).toEqual([{ fence: '29' }])
  })

  it('with schema: names every object in it, and works from a session whose search_path is elsewhere', async () => {
    const t = await guardedTable({ schema: true })
    const sql = fenceGuardSql({ table: t, column: 'fence', key: ['region', 'code'], schema })
    expect(sql).toContain(`"${schema}"."${t}"`)
    const elsewhere = new pg.Client({ connectionString: databaseTarget().connectionString })
    await elsewhere.connect()
    try {
      await elsewhere.query(`INSERT INTO "${schema}"."${t}" VALUES ('eu', 1, 5, 10)`)
      await elsewhere.query(`DELETE FROM "${schema}"."${t}"`)
      expect(code((await settle(elsewhere.query(`INSERT INTO "${schema}"."${t}" VALUES ('eu', 1, 5, 9)`))).error)).toBe(FENCE_GUARD_SQLSTATE)
    } finally {
      await elsewhere.end()
    }
  })

  it('without schema, its functions keep using the schema they were created in', async () => {
    const t = await guardedTable()
    const elsewhere = new pg.Client({ connectionString: databaseTarget().connectionString })
    await elsewhere.connect()
    try {
      await elsewhere.query(`SET search_path TO public`)
      await elsewhere.query(`INSERT INTO "${schema}"."${t}" VALUES ('eu', 1, 5, 10)`)
      await elsewhere.query(`DELETE FROM "${schema}"."${t}"`)
      expect(code((await settle(elsewhere.query(`INSERT INTO "${schema}"."${t}" VALUES ('eu', 1, 5, 9)`))).error)).toBe(FENCE_GUARD_SQLSTATE)
    } finally {
      await elsewhere.end()
    }
  })

  it('quotes names: a table and columns with capitals, spaces and quotes', async () => {
    await admin.query(`CREATE TABLE "Odd ""Table""" ("Key Col" text PRIMARY KEY, "Fence""Col" bigint NOT NULL DEFAULT 0)`)
    await admin.query(`BEGIN; ${fenceGuardSql({ table: 'Odd "Table"', column: 'Fence"Col', key: 'Key Col', name: 'odd' })}; COMMIT`)
    await admin.query(`INSERT INTO "Odd ""Table""" VALUES ('a', 3)`)
    expect(code((await settle(admin.query(`UPDATE "Odd ""Table""" SET "Fence""Col" = 2`))).error)).toBe(FENCE_GUARD_SQLSTATE)
    expect(fenceGuardObjects({ table: 'Odd "Table"', column: 'c', key: 'k', name: 'odd' }).tombstoneTable).toBe('odd_tombstones')
  })

  it('refuses bad options before producing anything, naming the field and the rule', () => {
    const ok = { table: 'Product', column: 'fenceToken', key: 'sku' }
    const cases: [unknown, string][] = [
      [null, 'options'],
      [{ ...ok, table: '' }, 'table'],
      [{ ...ok, table: 7 }, 'table'],
      [{ ...ok, column: undefined }, 'column'],
      [{ ...ok, key: [] }, 'key'],
      [{ ...ok, key: ['sku', 'sku'] }, 'key'],
      [{ ...ok, key: ['fenceToken'] }, 'key'],
      [{ ...ok, key: [''] }, 'key[0]'],
      [{ ...ok, schema: 'a\0b' }, 'schema'],
      [{ ...ok, table: 'x'.repeat(60) }, 'table'],
      [{ ...ok, name: 'y'.repeat(60) }, 'name'],
    ]
    for (const [options, field] of cases) {
      let error: unknown
      try {
        fenceGuardSql(options as never)
      } catch (e) {
        error = e
      }
      expect(error, field).toBeInstanceOf(InvalidFencingOptionError)
      expect(error).toMatchObject({ field })
    }
  })

  it('the demo’s guard migration is exactly what fenceGuardSql produces for Product and Order', async () => {
    const file = await readFile(join(import.meta.dirname, '..', '..', '..', 'prisma', 'migrations', GUARD_MIGRATION, 'migration.sql'), 'utf8')
    const expected = `${fenceGuardSql({ table: 'Product', column: 'fenceToken', key: 'sku' })}\n${fenceGuardSql({ table: 'Order', column: 'fenceToken', key: 'id' })}`
    // On a mismatch, regenerate the file from these two calls (and add a new migration if the old one was applied anywhere).
    expect(file).toBe(expected)
    const gateway = await readFile(join(import.meta.dirname, '..', '..', '..', 'prisma', 'migrations', '20261126000100_payment_gateway', 'migration.sql'), 'utf8')
    expect(gateway.endsWith(fenceGuardSql({ table: 'GatewayFence', column: 'fenceToken', key: 'resource' }))).toBe(true)
  })
})
