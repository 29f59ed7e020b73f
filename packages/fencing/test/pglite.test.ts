/**
 * The same promises on PGlite (PostgreSQL compiled to WASM, in this process), the embedded
 * database a user gets without a server. One instance for the whole file: each costs 2-4 s and
 * most of a gigabyte. PGlite is a single session: a second writer cannot hold a row lock while
 * ours waits, so no race of stale-write-paths.test.ts or fence-guard.test.ts can be shown here
 * (they stay on the server tests). Everything else the fence and the database guard promise is
 * checked here too.
 */
import { PGlite } from '@electric-sql/pglite'
import { PrismaPGlite } from 'pglite-prisma-adapter'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { applyMigrations, readMigrations, type MigrationConnection } from '@fencelock/devkit/migrations'
import { fencedTransaction, InvalidFenceTokenError, isFenceGuardError, StaleFencingTokenError } from '../src/index.js'
import { BAD_TOKENS } from './support/bad-tokens.js'
import { fencedClient, PrismaClient, settle, uniqueSku, type FencedDb } from './support/database.js'

let pglite: PGlite
let base: PrismaClient
let db: FencedDb

beforeAll(async () => {
  pglite = await PGlite.create()
  // Our runner, through PGlite: `exec` for a whole migration file, `query` for one statement with values.
  const connection: MigrationConnection = {
    async query(text, values) {
      if (values !== undefined) return pglite.query<Record<string, unknown>>(text, values)
      const results = await pglite.exec(text)
      return { rows: (results.at(-1)?.rows ?? []) as Record<string, unknown>[] }
    },
  }
  const report = await applyMigrations(connection)
  expect(report.applied).toEqual((await readMigrations()).map((m) => m.name))
  expect((await applyMigrations(connection)).applied).toEqual([])
  base = new PrismaClient({ adapter: new PrismaPGlite(pglite) })
  db = fencedClient(base)
})

afterAll(async () => {
  await base?.$disconnect()
  await pglite?.close()
})

const seed = (fenceToken: bigint) => base.product.create({ data: { sku: uniqueSku('pgl'), name: 'p', priceCents: 100, stock: 10, fenceToken } })

describe('on PGlite', () => {
  it('a stale token is refused and the row unchanged; the same write without the extension goes through', async () => {
    const p = await seed(7n)
    const stale = await settle(db.$fenced(5n).product.update({ where: { id: p.id }, data: { stock: 0 } }))
    expect(stale.error).toBeInstanceOf(StaleFencingTokenError)
    expect(stale.error).toMatchObject({ token: 5n, storedToken: 7n })
    expect(await base.product.findUniqueOrThrow({ where: { id: p.id } })).toEqual(p)
    await base.product.update({ where: { id: p.id }, data: { stock: 0 } })
    expect((await base.product.findUniqueOrThrow({ where: { id: p.id } })).stock).toBe(0)
  })

  it('an equal token is accepted, a newer one accepted and stored', async () => {
    const p = await seed(7n)
    expect(await db.$fenced(7n).product.update({ where: { id: p.id }, data: { stock: 9 } })).toMatchObject({ stock: 9, fenceToken: 7n })
    expect(await db.$fenced('8').product.update({ where: { id: p.id }, data: { stock: 8 } })).toMatchObject({ stock: 8, fenceToken: 8n })
  })

  it('fencedTransaction: a stale read-modify-write changes nothing; a current one commits', async () => {
    const p = await seed(7n)
    const rmw = (token: bigint) =>
      fencedTransaction(db, token, { model: 'Product', where: { id: p.id } }, async (tx) => {
        const current = await tx.product.findUniqueOrThrow({ where: { id: p.id } })
        await tx.product.update({ where: { id: p.id }, data: { stock: current.stock - 1 } })
        return tx.order.create({ data: { productId: p.id, buyerId: `b${token}`, quantity: 1 } })
      })
    expect((await settle(rmw(6n))).error).toBeInstanceOf(StaleFencingTokenError)
    expect(await base.product.findUniqueOrThrow({ where: { id: p.id } })).toEqual(p)
    expect(await base.order.count({ where: { productId: p.id } })).toBe(0)
    expect(await rmw(9n)).toMatchObject({ buyerId: 'b9', fenceToken: 9n })
    expect(await base.product.findUniqueOrThrow({ where: { id: p.id } })).toMatchObject({ stock: 9, fenceToken: 9n })
  })

  it('2^53 + 1 and 2^63 − 1 round-trip exactly', async () => {
    const p = await seed(0n)
    for (const token of [2n ** 53n + 1n, 2n ** 63n - 1n]) {
      expect((await db.$fenced(token).product.update({ where: { id: p.id }, data: { stock: 1 } })).fenceToken).toBe(token)
      expect((await base.product.findUniqueOrThrow({ where: { id: p.id } })).fenceToken).toBe(token)
    }
    expect((await settle(db.$fenced(2n ** 63n - 2n).product.update({ where: { id: p.id }, data: { stock: 2 } }))).error).toBeInstanceOf(
      StaleFencingTokenError,
    )
  })

  it('upsert, a missing row (P2025 as without the extension), and an unfenced model', async () => {
    const sku = uniqueSku('pgl-up')
    const up = (token: bigint, stock: number) =>
      db.$fenced(token).product.upsert({ where: { sku }, create: { sku, name: 'u', priceCents: 1, stock }, update: { stock } })
    expect(await up(4n, 1)).toMatchObject({ stock: 1, fenceToken: 4n })
    expect((await settle(up(3n, 2))).error).toBeInstanceOf(StaleFencingTokenError)
    expect((await settle(db.$fenced(1n).product.update({ where: { sku: uniqueSku('none') }, data: { stock: 1 } }))).error).toMatchObject({
      code: 'P2025',
    })
    const p = await seed(9n)
    const order = await base.order.create({ data: { productId: p.id, buyerId: 'b', quantity: 1, fenceToken: 9n } })
    expect(await db.$fenced(1n).payment.create({ data: { orderId: order.id, amountCents: 5, instance: 'x' } })).toMatchObject({ amountCents: 5 })
    expect(await base.order.findUniqueOrThrow({ where: { id: order.id } })).toEqual(order)
  })

  it('the database guard installs on PGlite: no raw lowering, no recreation under an older token, batches and many-row writes atomic', async () => {
    const p = await seed(7n)
    const lower = await settle(pglite.query(`UPDATE "Product" SET "fenceToken" = 0 WHERE id = $1`, [p.id]))
    expect(isFenceGuardError(lower.error)).toBe(true)
    const sku = uniqueSku('pgl-tomb')
    await db.$fenced(30n).product.create({ data: { sku, name: 't', priceCents: 1, stock: 1 } })
    await db.$fenced(30n).product.delete({ where: { sku } })
    expect((await settle(db.$fenced(29n).product.create({ data: { sku, name: 't', priceCents: 1, stock: 1 } }))).error).toMatchObject({
      name: 'StaleFencingTokenError',
      storedToken: 30n,
    })
    const batch = await settle(base.$transaction([base.product.update({ where: { id: p.id }, data: { stock: 0 } }), db.$fenced(5n).product.update({ where: { id: p.id }, data: { stock: 1 } })]))
    expect(batch.error).toBeInstanceOf(StaleFencingTokenError)
    expect(await base.product.findUniqueOrThrow({ where: { id: p.id } })).toEqual(p)
  })

  it('a row written under 20 and deleted under 30 (delete, deleteMany) cannot be recreated under 25, only above 30', async () => {
    const data = (sku: string) => ({ sku, name: 't', priceCents: 1, stock: 1 })
    const deletes = [(sku: string) => db.$fenced(30n).product.delete({ where: { sku } }), (sku: string) => db.$fenced(30n).product.deleteMany({ where: { sku } })]
    for (const remove of deletes) {
      const sku = uniqueSku('pgl-tomb')
      await db.$fenced(20n).product.create({ data: data(sku) })
      await remove(sku)
      expect(await base.productFenceTombstone.findUnique({ where: { sku } })).toEqual({ sku, fenceToken: 30n })
      expect((await settle(db.$fenced(25n).product.create({ data: data(sku) }))).error).toMatchObject({ name: 'StaleFencingTokenError', token: 25n, storedToken: 30n })
      expect(await db.$fenced(31n).product.create({ data: data(sku) })).toMatchObject({ sku, fenceToken: 31n })
    }
  })

  it.each(BAD_TOKENS)('refuses %s before any query', (_label, value) => {
    expect(() => db.$fenced(value as bigint)).toThrow(InvalidFenceTokenError)
  })
})
