/**
 * The strict guard (`fenceGuardSql({ ..., strict: true })`): a write of the table that carries no
 * fencing token is refused by PostgreSQL (FL004, naming the table) — the plain client, a `db`
 * without `$fenced` — while every `$fenced` write, `fencedTransaction` and `withFence` go through.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { assertFenceGuard, FENCE_STRICT_SQLSTATE, fencedTransaction, fenceGuardSql, fenceGuardUpgradeSql, MissingFenceGuardError } from '../src/index.js'
import { runGuardCli } from '../src/guard/guard-cli.js'
import { withFence } from '../src/pg.js'
import { createTestDatabase, FENCED_MODELS, openSession, seedProduct, settle, uniqueSku, type TestDatabase } from './support/database.js'

let strict: TestDatabase
let plain: TestDatabase

const PRODUCT = { table: 'Product', column: 'fenceToken', key: 'sku' } as const

beforeAll(async () => {
  ;[strict, plain] = await Promise.all([createTestDatabase('strict'), createTestDatabase('strict_control')])
  // The shop's guard on Product, made strict by an upgrade migration of its own.
  await strict.admin.query(`BEGIN; SET LOCAL search_path TO "${strict.schema}"; ${fenceGuardUpgradeSql({ ...PRODUCT, strict: true })}; COMMIT`)
})

afterAll(async () => {
  await Promise.all([strict?.close(), plain?.close()])
})

/** The product rows, seeded by the admin session under a token (a strict table refuses the plain client's create). */
async function seed(t: TestDatabase, fence: bigint) {
  return t.db.$fenced(fence).product.create({ data: { sku: uniqueSku('strict'), name: 'Strict', priceCents: 1, stock: 10 } })
}

describe('the strict guard', () => {
  it('refuses the plain client’s create, update and delete (FL004, the message names the table); the rows are kept', async () => {
    const p = await seed(strict, 5n)
    const create = await settle(strict.base.product.create({ data: { sku: uniqueSku('strict'), name: 'x', priceCents: 1, stock: 1 } }))
    const update = await settle(strict.base.product.update({ where: { id: p.id }, data: { stock: 0 } }))
    const viaDb = await settle(strict.db.product.update({ where: { id: p.id }, data: { stock: 0 } }))
    const remove = await settle(strict.base.product.delete({ where: { id: p.id } }))
    for (const [label, outcome] of Object.entries({ create, update, viaDb, remove })) {
      expect(outcome.error, label).toBeDefined()
      expect(String((outcome.error as Error).message), label).toMatch(/strict.*Product carries no fencing token/)
    }
    expect(await strict.base.product.findUniqueOrThrow({ where: { id: p.id } })).toMatchObject({ stock: 10, fenceToken: 5n })
    // From pg, the SQLSTATE and the table in the detail.
    const session = await openSession(strict.schema)
    try {
      const refused = await settle(session.query(`UPDATE "Product" SET stock = 0 WHERE id = $1`, [p.id]))
      expect((refused.error as { code?: string }).code).toBe(FENCE_STRICT_SQLSTATE)
      expect(JSON.parse((refused.error as { detail: string }).detail)).toMatchObject({ table: 'Product', operation: 'update' })
    } finally {
      await session.end()
    }
  })

  it('accepts $fenced writes (create, update, updateMany, upsert, delete, deleteMany), fencedTransaction and withFence', async () => {
    const p = await seed(strict, 5n)
    const fenced = strict.db.$fenced(6n)
    await fenced.product.update({ where: { id: p.id }, data: { stock: 9 } })
    await fenced.product.updateMany({ where: { id: p.id }, data: { stock: 8 } })
    await fenced.product.upsert({ where: { sku: p.sku }, create: { sku: p.sku, name: 'x', priceCents: 1, stock: 1 }, update: { stock: 7 } })
    await fencedTransaction(strict.db, 7n, { model: 'Product', where: { id: p.id } }, async (tx, row) => {
      await tx.product.update({ where: { id: p.id }, data: { stock: row.stock - 1 } })
    })
    expect(await strict.base.product.findUniqueOrThrow({ where: { id: p.id } })).toMatchObject({ stock: 6, fenceToken: 7n })
    const client = await openSession(strict.schema)
    try {
      await withFence(client, 8n, (c) => c.query(`UPDATE "Product" SET stock = 5 WHERE id = $1`, [p.id]))
    } finally {
      await client.end()
    }
    expect(await strict.base.product.findUniqueOrThrow({ where: { id: p.id } })).toMatchObject({ stock: 5, fenceToken: 8n })
    await strict.db.$fenced(9n).product.delete({ where: { id: p.id } })
    const q = await seed(strict, 5n)
    await strict.db.$fenced(9n).product.deleteMany({ where: { id: q.id } })
    expect(await strict.base.product.count({ where: { id: { in: [p.id, q.id] } } })).toBe(0)
  })

  it('control, the guard not strict: the same plain writes land', async () => {
    const p = await seedProduct(plain.base, 5n)
    await plain.base.product.update({ where: { id: p.id }, data: { stock: 0 } })
    await plain.base.product.delete({ where: { id: p.id } })
    expect(await plain.base.product.count({ where: { id: p.id } })).toBe(0)
  })

  it('assertFenceGuard({ strict: true }) finds the strict guard on Product, and names what is missing on Order', async () => {
    await assertFenceGuard(strict.base, { models: { Product: 'fenceToken' }, strict: true })
    const missing = await settle(assertFenceGuard(strict.base, { models: FENCED_MODELS, strict: true }))
    expect(missing.error).toBeInstanceOf(MissingFenceGuardError)
    expect((missing.error as MissingFenceGuardError).missing.map((m) => `${m.model} ${m.name}`)).toEqual(['Order Order_fence_strict', 'Order Order_fence_strict_fenced', 'Order Order_fence_strict_refuse'])
    await assertFenceGuard(plain.base, { models: FENCED_MODELS })
  })

  it('fencelock-guard --strict prints the strict guard’s SQL', () => {
    const printed = runGuardCli(['--table', 'Product', '--column', 'fenceToken', '--key', 'sku', '--strict'])
    expect(printed).toMatchObject({ code: 0, stdout: fenceGuardSql({ ...PRODUCT, strict: true }) })
    expect(runGuardCli(['--table', 'Product', '--column', 'fenceToken', '--key', 'sku', '--strict', '--upgrade']).stdout).toBe(fenceGuardUpgradeSql({ ...PRODUCT, strict: true }))
  })

  it('an upgrade without strict turns it off; fenceGuardSql({ strict }) refuses a value that is not a boolean', async () => {
    expect(() => fenceGuardSql({ ...PRODUCT, strict: 'yes' as never })).toThrow(/strict/)
    const t = await createTestDatabase('strict_off')
    try {
      await t.admin.query(`BEGIN; SET LOCAL search_path TO "${t.schema}"; ${fenceGuardUpgradeSql({ ...PRODUCT, strict: true })}; COMMIT`)
      expect((await settle(t.base.product.create({ data: { sku: uniqueSku('s'), name: 'x', priceCents: 1, stock: 1 } }))).error).toBeDefined()
      await t.admin.query(`BEGIN; SET LOCAL search_path TO "${t.schema}"; ${fenceGuardUpgradeSql(PRODUCT)}; COMMIT`)
      await t.base.product.create({ data: { sku: uniqueSku('s'), name: 'x', priceCents: 1, stock: 1 } })
    } finally {
      await t.close()
    }
  })
})
