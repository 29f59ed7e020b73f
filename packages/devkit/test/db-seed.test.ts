/**
 * `npm run db:seed` (scripts/db-seed.ts) on a migrated, guarded schema: creates the demo's
 * products, keeps them on a second run, and with --reset deletes their orders and payments and
 * restores stock and price — leaving the fence tokens where a run raised them (the database guard
 * refuses to lower them, and nothing needs them lower).
 */
import { execFile } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { join } from 'node:path'
import { promisify } from 'node:util'
import pg from 'pg'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { databaseTarget } from '../src/database-url.js'
import { applyMigrations } from '../src/migrations.js'

const root = join(import.meta.dirname, '..', '..', '..')
const { connectionString } = databaseTarget()
const schema = `devkit_seed_${process.pid}_${randomBytes(4).toString('hex')}`
let admin: pg.Client

beforeAll(async () => {
  admin = new pg.Client({ connectionString })
  await admin.connect()
  await applyMigrations(admin, { schema })
})

afterAll(async () => {
  await admin?.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`)
  await admin?.end()
})

const seed = (...args: string[]) =>
  promisify(execFile)(process.execPath, ['--import', 'tsx', 'scripts/db-seed.ts', '--schema', schema, ...args], { cwd: root, env: { ...process.env, DATABASE_URL: connectionString } })
const products = async () =>
  (await admin.query(`SELECT sku, stock, "fenceToken"::text AS fence FROM "${schema}"."Product" ORDER BY sku`)).rows as { sku: string; stock: number; fence: string }[]

describe('db:seed', () => {
  it('creates, keeps, and --reset restores stock while the fences stay where a run left them', async () => {
    expect((await seed()).stdout).toContain('FLASH-WATCH: created (stock 5)')
    expect((await seed()).stdout).toContain('FLASH-WATCH: kept (stock 5)')
    // A demo run: a holder with token 5000 sold a watch and was paid.
    const [watch] = (await admin.query(`UPDATE "${schema}"."Product" SET stock = stock - 1, "fenceToken" = 5000 WHERE sku = 'FLASH-WATCH' RETURNING id`)).rows as { id: number }[]
    const [order] = (await admin.query(`INSERT INTO "${schema}"."Order" ("productId", "buyerId", quantity, "fenceToken") VALUES ($1, 'b', 1, 5000) RETURNING id`, [watch!.id])).rows as { id: number }[]
    await admin.query(`INSERT INTO "${schema}"."Payment" ("orderId", "amountCents", instance) VALUES ($1, 49900, 'shop-1')`, [order!.id])

    const reset = await seed('--reset')
    expect(reset.stdout).toContain('FLASH-WATCH: reset (stock 5)')
    expect((await products()).find((p) => p.sku === 'FLASH-WATCH')).toEqual({ sku: 'FLASH-WATCH', stock: 5, fence: '5000' })
    expect((await admin.query(`SELECT count(*)::int AS n FROM "${schema}"."Order"`)).rows).toEqual([{ n: 0 }])
    expect((await admin.query(`SELECT count(*)::int AS n FROM "${schema}"."Payment"`)).rows).toEqual([{ n: 0 }])
  })

  it('refuses an unknown flag with exit 2', async () => {
    await expect(seed('--rest')).rejects.toMatchObject({ code: 2 })
  })
})
