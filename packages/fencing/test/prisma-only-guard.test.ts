/**
 * The guard without the token path (`fenceGuardSql({ ..., tokenPath: false })`), for a table written
 * only through the Prisma extension: it keeps every check of the Prisma path (a lowered fence, a key
 * recreated under an older token, both refused) and has no BEFORE row trigger — the trigger that
 * makes PostgreSQL lock and WAL-log each row before an UPDATE or DELETE — while a write under the
 * transaction's token, which nothing would fence there, is refused (FL005), not let through.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { assertFenceGuard, FENCE_GUARD_SQLSTATE, FENCE_NO_TOKEN_PATH_SQLSTATE, FENCE_STRICT_SQLSTATE, fenceGuardSql, fenceGuardUpgradeSql, InvalidFencingOptionError, StaleFencingTokenError } from '../src/index.js'
import { withFence } from '../src/pg.js'
import { createTestDatabase, FENCED_MODELS, openSession, seedProduct, settle, uniqueSku, type TestDatabase } from './support/database.js'

const PRODUCT = { table: 'Product', column: 'fenceToken', key: 'sku' } as const
const ORDER = { table: 'Order', column: 'fenceToken', key: 'id' } as const

let prismaOnly: TestDatabase
let tokenPath: TestDatabase

/** Installs (as an upgrade of the shop's guard) the guard of Product and Order with `options`. */
async function upgrade(t: TestDatabase, options: { tokenPath?: boolean; strict?: boolean }): Promise<void> {
  await t.admin.query(`BEGIN; SET LOCAL search_path TO "${t.schema}"; ${fenceGuardUpgradeSql({ ...PRODUCT, ...options })}; ${fenceGuardUpgradeSql({ ...ORDER, ...options })}; COMMIT`)
}

/** The row-level BEFORE triggers of UPDATE or DELETE on Product: what makes PostgreSQL lock each row before writing it. */
async function rowTriggersBeforeUpdateOrDelete(t: TestDatabase): Promise<string[]> {
  // tgtype bits: 1 row, 2 before, 8 delete, 16 update.
  const r = await t.admin.query<{ name: string }>(
    `SELECT t.tgname AS name FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid JOIN pg_namespace n ON n.oid = c.relnamespace
      WHERE n.nspname = $1 AND c.relname = 'Product' AND NOT t.tgisinternal AND t.tgtype & 1 = 1 AND t.tgtype & 2 = 2 AND t.tgtype & 24 <> 0 ORDER BY 1`,
    [t.schema],
  )
  return r.rows.map((row) => row.name)
}

function code(error: unknown): string | undefined {
  return (error as { code?: string } | undefined)?.code
}

beforeAll(async () => {
  ;[prismaOnly, tokenPath] = await Promise.all([createTestDatabase('prisma_only'), createTestDatabase('prisma_only_control')])
  await upgrade(prismaOnly, { tokenPath: false })
})

afterAll(async () => {
  await Promise.all([prismaOnly?.close(), tokenPath?.close()])
})

describe('the guard without the token path (tokenPath: false)', () => {
  it('has no BEFORE row trigger on UPDATE or DELETE; the guard with the token path has one (the token trigger)', async () => {
    expect(await rowTriggersBeforeUpdateOrDelete(prismaOnly)).toEqual([])
    expect(await rowTriggersBeforeUpdateOrDelete(tokenPath)).toEqual(['Product_fence_token'])
  })

  it('the Prisma path is fenced as before: $fenced writes land, a stale one is refused, a lowered fence and a recreated key are refused', async () => {
    const p = await seedProduct(prismaOnly.base, 5n, 'po')
    await prismaOnly.db.$fenced(7n).product.update({ where: { id: p.id }, data: { stock: 9 } })
    expect((await settle(prismaOnly.db.$fenced(6n).product.update({ where: { id: p.id }, data: { stock: 1 } }))).error).toBeInstanceOf(StaleFencingTokenError)
    const lowered = await settle(prismaOnly.base.product.update({ where: { id: p.id }, data: { fenceToken: 3n } }))
    expect(String((lowered.error as Error | undefined)?.message)).toMatch(/cannot go down/)
    await prismaOnly.db.$fenced(8n).product.delete({ where: { id: p.id } })
    const session = await openSession(prismaOnly.schema)
    try {
      const recreated = await settle(session.query(`INSERT INTO "Product" (sku, name, "priceCents", stock, "fenceToken") VALUES ($1, 'x', 1, 1, 7)`, [p.sku]))
      expect(code(recreated.error)).toBe(FENCE_GUARD_SQLSTATE)
    } finally {
      await session.end()
    }
    expect(await prismaOnly.base.product.findFirst({ where: { sku: p.sku } })).toBeNull()
  })

  it('refuses a write under the transaction’s token (FL005, naming the table): withFence and raw SQL on $fenced; with the token path they land', async () => {
    const p = await seedProduct(prismaOnly.base, 5n, 'po')
    const q = await seedProduct(tokenPath.base, 5n, 'po')
    const refused = async (t: TestDatabase, id: number) => {
      const client = await openSession(t.schema)
      try {
        return await settle(withFence(client, 9n, (c) => c.query(`UPDATE "Product" SET stock = 0 WHERE id = $1`, [id])))
      } finally {
        await client.end()
      }
    }
    const viaPg = await refused(prismaOnly, p.id)
    expect(code(viaPg.error)).toBe(FENCE_NO_TOKEN_PATH_SQLSTATE)
    expect(JSON.parse((viaPg.error as { detail: string }).detail)).toMatchObject({ table: 'Product', operation: 'update' })
    const viaRaw = await settle(prismaOnly.db.$fenced(9n).$executeRawUnsafe(`UPDATE "${prismaOnly.schema}"."Product" SET stock = 0 WHERE id = $1`, p.id))
    expect(JSON.stringify(viaRaw.error, Object.getOwnPropertyNames(viaRaw.error))).toContain(FENCE_NO_TOKEN_PATH_SQLSTATE)
    // INSERT and DELETE too: the statement trigger covers every write.
    const session = await openSession(prismaOnly.schema)
    try {
      const insert = await settle(withFence(session, 9n, (c) => c.query(`INSERT INTO "Product" (sku, name, "priceCents", stock) VALUES ($1, 'x', 1, 1)`, [uniqueSku('po')])))
      const remove = await settle(withFence(session, 9n, (c) => c.query(`DELETE FROM "Product" WHERE id = $1`, [p.id])))
      expect([code(insert.error), code(remove.error)]).toEqual([FENCE_NO_TOKEN_PATH_SQLSTATE, FENCE_NO_TOKEN_PATH_SQLSTATE])
    } finally {
      await session.end()
    }
    expect(await prismaOnly.base.product.findUniqueOrThrow({ where: { id: p.id } })).toMatchObject({ stock: 10, fenceToken: 5n })
    // Control: the guard with the token path fences the same write and lets it land, raising the fence.
    expect((await refused(tokenPath, q.id)).error).toBeUndefined()
    expect(await tokenPath.base.product.findUniqueOrThrow({ where: { id: q.id } })).toMatchObject({ stock: 0, fenceToken: 9n })
  })

  it('assertFenceGuard finds it complete; an upgrade with the token path brings the token trigger back', async () => {
    await assertFenceGuard(prismaOnly.base, { models: FENCED_MODELS })
    const t = await createTestDatabase('prisma_only_up')
    try {
      await upgrade(t, { tokenPath: false })
      expect(await rowTriggersBeforeUpdateOrDelete(t)).toEqual([])
      await upgrade(t, {})
      expect(await rowTriggersBeforeUpdateOrDelete(t)).toEqual(['Product_fence_token'])
      const p = await seedProduct(t.base, 5n, 'po')
      const client = await openSession(t.schema)
      try {
        await withFence(client, 9n, (c) => c.query(`UPDATE "Product" SET stock = 0 WHERE id = $1`, [p.id]))
      } finally {
        await client.end()
      }
      expect(await t.base.product.findUniqueOrThrow({ where: { id: p.id } })).toMatchObject({ stock: 0, fenceToken: 9n })
    } finally {
      await t.close()
    }
  })

  it('strict and without the token path: the plain client refused (FL004), $fenced writes land, a token refused (FL005)', async () => {
    const t = await createTestDatabase('prisma_only_strict')
    try {
      await upgrade(t, { tokenPath: false, strict: true })
      const p = await t.db.$fenced(5n).product.create({ data: { sku: uniqueSku('po'), name: 'x', priceCents: 1, stock: 10 } })
      await t.db.$fenced(6n).product.update({ where: { id: p.id }, data: { stock: 9 } })
      const session = await openSession(t.schema)
      try {
        expect(code((await settle(session.query(`UPDATE "Product" SET stock = 0 WHERE id = $1`, [p.id]))).error)).toBe(FENCE_STRICT_SQLSTATE)
        expect(code((await settle(withFence(session, 9n, (c) => c.query(`UPDATE "Product" SET stock = 0 WHERE id = $1`, [p.id])))).error)).toBe(FENCE_NO_TOKEN_PATH_SQLSTATE)
      } finally {
        await session.end()
      }
      expect(await t.base.product.findUniqueOrThrow({ where: { id: p.id } })).toMatchObject({ stock: 9, fenceToken: 6n })
    } finally {
      await t.close()
    }
  })

  it('fenceGuardSql refuses a tokenPath that is not a boolean, naming the option', () => {
    expect(() => fenceGuardSql({ ...PRODUCT, tokenPath: 'no' as never })).toThrow(InvalidFencingOptionError)
    expect(() => fenceGuardSql({ ...PRODUCT, tokenPath: 'no' as never })).toThrow(/tokenPath/)
  })
})
