import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { MissingFenceTokenError, StaleFencingTokenError, UnsupportedFencedWriteError, withFenceToken } from '../src/index.js'
import { createTestDatabase, seedProduct, settle, uniqueSku, type TestDatabase } from './support/database.js'

let t: TestDatabase

beforeAll(async () => {
  t = await createTestDatabase('write')
})

afterAll(async () => {
  await t?.close()
})

const row = (id: number) => t.base.product.findUniqueOrThrow({ where: { id } })

describe('update', () => {
  it('refuses a stale token with StaleFencingTokenError and leaves the row unchanged', async () => {
    const before = await seedProduct(t.base, 7n)
    const result = await settle(t.db.$fenced(5n).product.update({ where: { id: before.id }, data: { stock: 0, name: 'stale' } }))
    expect(result.error).toBeInstanceOf(StaleFencingTokenError)
    expect(result.error).toMatchObject({ name: 'StaleFencingTokenError', model: 'Product', operation: 'update', token: 5n, storedToken: 7n })
    expect(await row(before.id)).toEqual(before)
  })

  it('control: the same stale write goes through without the extension (and through the plain client)', async () => {
    const before = await seedProduct(t.base, 7n)
    await t.base.product.update({ where: { id: before.id }, data: { stock: 0 } })
    await t.db.product.update({ where: { id: before.id }, data: { name: 'unfenced' } })
    expect(await row(before.id)).toEqual({ ...before, stock: 0, name: 'unfenced' })
  })

  it('accepts an equal token (the same holder writing again) and keeps the fence', async () => {
    const before = await seedProduct(t.base, 7n)
    const after = await t.db.$fenced(7n).product.update({ where: { id: before.id }, data: { stock: { decrement: 1 } } })
    expect(after).toEqual({ ...before, stock: 9, fenceToken: 7n })
    expect(await row(before.id)).toEqual(after)
  })

  it('accepts a newer token and stores it', async () => {
    const before = await seedProduct(t.base, 7n)
    const after = await t.db.$fenced('8').product.update({ where: { sku: before.sku }, data: { stock: 3 } })
    expect(after).toEqual({ ...before, stock: 3, fenceToken: 8n })
    expect((await row(before.id)).fenceToken).toBe(8n)
    expect(await settle(t.db.$fenced(7n).product.update({ where: { id: before.id }, data: { stock: 4 } }))).toMatchObject({
      error: { storedToken: 8n },
    })
  })

  it('keeps select and the caller’s own filters, which still decide as without the extension', async () => {
    const before = await seedProduct(t.base, 1n)
    expect(await t.db.$fenced(2n).product.update({ where: { id: before.id, stock: { gte: 5 } }, data: { stock: 4 }, select: { stock: true } })).toEqual({
      stock: 4,
    })
    // Own filter fails with a fresh token: Prisma's not-found error, not a stale token.
    const plain = await settle(t.base.product.update({ where: { id: before.id, stock: { gte: 5 } }, data: { stock: 0 } }))
    const fenced = await settle(t.db.$fenced(3n).product.update({ where: { id: before.id, stock: { gte: 5 } }, data: { stock: 0 } }))
    expect(fenced.error).not.toBeInstanceOf(StaleFencingTokenError)
    expect(fenced.error?.constructor).toBe(plain.error?.constructor)
    expect(fenced.error).toMatchObject({ code: 'P2025' })
    // A caller's AND is kept next to the fence condition.
    const and = await settle(t.db.$fenced(3n).product.update({ where: { id: before.id, AND: { stock: { lt: 0 } } }, data: { stock: 0 } }))
    expect(and.error).toMatchObject({ code: 'P2025' })
    expect(await row(before.id)).toMatchObject({ stock: 4, fenceToken: 2n })
    // A caller filtering on the fence column itself keeps its condition next to ours.
    const own = await settle(t.db.$fenced(3n).product.update({ where: { id: before.id, fenceToken: { gt: 2n } }, data: { stock: 0 } }))
    expect(own.error).toMatchObject({ code: 'P2025' })
    expect(await t.db.$fenced(3n).product.update({ where: { id: before.id, fenceToken: { lte: 2n } }, data: { stock: 1 } })).toMatchObject({
      stock: 1,
      fenceToken: 3n,
    })
    const stale = await settle(t.db.$fenced(2n).product.update({ where: { id: before.id, fenceToken: { gte: 0n } }, data: { stock: 0 } }))
    expect(stale.error).toMatchObject({ name: 'StaleFencingTokenError', storedToken: 3n })
  })

  it('a missing row fails exactly as without the extension (P2025), and is no rejection', async () => {
    const rejectionsBefore = t.rejections.length
    const plain = await settle(t.base.product.update({ where: { sku: uniqueSku('missing') }, data: { stock: 1 } }))
    const fenced = await settle(t.db.$fenced(1n).product.update({ where: { sku: uniqueSku('missing') }, data: { stock: 1 } }))
    expect(plain.error).toMatchObject({ code: 'P2025' })
    expect(fenced.error?.constructor).toBe(plain.error?.constructor)
    expect(fenced.error).toMatchObject({ code: 'P2025', name: (plain.error as Error).name })
    expect(t.rejections.length).toBe(rejectionsBefore)
  })
})

describe('delete', () => {
  it('refuses a stale token (row kept) and deletes with a current one; a missing row fails as without the extension', async () => {
    const before = await seedProduct(t.base, 7n)
    expect((await settle(t.db.$fenced(6n).product.delete({ where: { id: before.id } }))).error).toBeInstanceOf(StaleFencingTokenError)
    expect(await row(before.id)).toEqual(before)
    expect(await t.db.$fenced(7n).product.delete({ where: { id: before.id } })).toEqual(before)
    expect(await t.base.product.findUnique({ where: { id: before.id } })).toBeNull()
    const missing = await settle(t.db.$fenced(7n).product.delete({ where: { id: before.id } }))
    expect(missing.error).toMatchObject({ code: 'P2025' })
    expect(missing.error).not.toBeInstanceOf(StaleFencingTokenError)
  })

  it('returns the row as it was deleted, its fence raised to the token (which the guard keeps), with the caller’s selection', async () => {
    const before = await seedProduct(t.base, 3n)
    expect(await t.db.$fenced(8n).product.delete({ where: { id: before.id }, select: { sku: true, fenceToken: true } })).toEqual({ sku: before.sku, fenceToken: 8n })
    expect(await t.base.productFenceTombstone.findUnique({ where: { sku: before.sku } })).toEqual({ sku: before.sku, fenceToken: 8n })
  })

  it('the caller’s filters decide as without the extension, on the fence column too (read before the fence is raised)', async () => {
    const p = await seedProduct(t.base, 3n)
    // Filters that fail: Prisma's not-found error, and the row stays with its fence.
    for (const where of [{ id: p.id, stock: 0 }, { id: p.id, AND: [{ fenceToken: { gt: 3n } }] }, { id: p.id, NOT: { sku: p.sku } }]) {
      expect((await settle(t.db.$fenced(8n).product.delete({ where }))).error).toMatchObject({ code: 'P2025' })
    }
    expect(await row(p.id)).toEqual(p)
    // Filters on the fence column that hold on the stored fence, not on the raised one.
    expect(await t.db.$fenced(8n).product.delete({ where: { id: p.id, fenceToken: 3n, AND: [{ fenceToken: { lt: 4n } }], OR: [{ stock: 10 }, { fenceToken: 3n }] } })).toMatchObject({
      id: p.id,
      fenceToken: 8n,
    })
    // A relation filter, met when the fence was raised.
    const q = await seedProduct(t.base, 0n)
    const order = await t.base.order.create({ data: { productId: q.id, buyerId: 'b', quantity: 1, fenceToken: 1n } })
    expect(await t.db.$fenced(2n).order.delete({ where: { id: order.id, product: { is: { stock: 10 } } } })).toMatchObject({ id: order.id, fenceToken: 2n })
  })

  it('inside the caller’s transaction a refused delete rolls back to its savepoint: the caller may catch it and commit the rest', async () => {
    const kept = await seedProduct(t.base, 9n)
    const gone = await seedProduct(t.base, 1n)
    const caught = await t.db.$transaction(async (tx) => {
      const refused = await settle(tx.$fenced(5n).product.delete({ where: { id: kept.id } }))
      await tx.$fenced(5n).product.delete({ where: { id: gone.id } })
      return refused.error
    })
    expect(caught).toMatchObject({ name: 'StaleFencingTokenError', operation: 'delete', storedToken: 9n })
    expect(await row(kept.id)).toEqual(kept)
    expect(await t.base.product.findUnique({ where: { id: gone.id } })).toBeNull()
    expect(await t.base.productFenceTombstone.findUnique({ where: { sku: gone.sku } })).toEqual({ sku: gone.sku, fenceToken: 5n })
  })
})

describe('updateMany / deleteMany', () => {
  it('writes the rows it may, stores the token on them, and rejects when the filter matched a newer row (nothing kept)', async () => {
    const name = uniqueSku('batch')
    const older = await t.base.product.create({ data: { sku: uniqueSku('m'), name, priceCents: 1, stock: 1, fenceToken: 3n } })
    const newer = await t.base.product.create({ data: { sku: uniqueSku('m'), name, priceCents: 1, stock: 1, fenceToken: 9n } })
    expect(await t.db.$fenced(9n).product.updateMany({ where: { name }, data: { stock: 2 } })).toEqual({ count: 2 })
    expect(await row(older.id)).toMatchObject({ stock: 2, fenceToken: 9n })

    const stale = await settle(t.db.$fenced(5n).product.updateMany({ where: { name }, data: { stock: 0 } }))
    expect(stale.error).toMatchObject({ name: 'StaleFencingTokenError', operation: 'updateMany', token: 5n, storedToken: 9n })
    expect(await row(newer.id)).toMatchObject({ stock: 2, fenceToken: 9n })

    // No match at all is not a rejection: count 0, as without the extension.
    expect(await t.db.$fenced(1n).product.updateMany({ where: { name: uniqueSku('none') }, data: { stock: 0 } })).toEqual({ count: 0 })
  })

  it('inside a transaction the rejection rolls back the rows that were written', async () => {
    const name = uniqueSku('batch-tx')
    const older = await t.base.product.create({ data: { sku: uniqueSku('m'), name, priceCents: 1, stock: 1, fenceToken: 3n } })
    await t.base.product.create({ data: { sku: uniqueSku('m'), name, priceCents: 1, stock: 1, fenceToken: 9n } })
    const result = await settle(t.db.$transaction((tx) => tx.$fenced(5n).product.updateMany({ where: { name }, data: { stock: 0 } })))
    expect(result.error).toBeInstanceOf(StaleFencingTokenError)
    expect(await row(older.id)).toEqual(older)
  })

  it('deleteMany rejects when the filter matched a row with a newer token, and then keeps nothing (outside a transaction too)', async () => {
    const name = uniqueSku('del')
    const older = await t.base.product.create({ data: { sku: uniqueSku('d'), name, priceCents: 1, stock: 1, fenceToken: 3n } })
    const newer = await t.base.product.create({ data: { sku: uniqueSku('d'), name, priceCents: 1, stock: 1, fenceToken: 9n } })
    const result = await settle(t.db.$fenced(5n).product.deleteMany({ where: { name } }))
    expect(result.error).toMatchObject({ name: 'StaleFencingTokenError', operation: 'deleteMany', storedToken: 9n })
    expect(await row(older.id)).toEqual(older)
    expect(await row(newer.id)).toEqual(newer)
    expect(await t.db.$fenced(9n).product.deleteMany({ where: { name } })).toEqual({ count: 2 })
  })

  it('deleteMany raises the fence of its rows before it deletes them: the guard keeps the deleting token for each', async () => {
    const name = uniqueSku('del')
    const rows = await Promise.all([2n, 4n].map((fenceToken) => t.base.product.create({ data: { sku: uniqueSku('d'), name, priceCents: 1, stock: 1, fenceToken } })))
    expect(await t.db.$fenced(6n).product.deleteMany({ where: { name } })).toEqual({ count: 2 })
    expect(await t.base.productFenceTombstone.findMany({ where: { sku: { in: rows.map((r) => r.sku) } }, select: { fenceToken: true } })).toEqual([
      { fenceToken: 6n },
      { fenceToken: 6n },
    ])
  })

  it('deleteMany with a filter on the fence column reads it once, before the raise: the rows it matched are deleted by key', async () => {
    // Once refused (reason fence-filter): the rows were deleted by the filter read again after the
    // raise. They are deleted by the primary key the raise returned now.
    const wheres = (id: number) => [{ id, fenceToken: { lt: 5n } }, { id, AND: [{ fenceToken: 2n }] }, { AND: [{ id }, { NOT: { fenceToken: 0n } }] }]
    for (const [i, where] of wheres(0).entries()) {
      const p = await seedProduct(t.base, 2n)
      expect(await t.db.$fenced(5n).product.deleteMany({ where: wheres(p.id)[i] ?? where }), `filter ${i}`).toEqual({ count: 1 })
      expect(await t.base.product.findUnique({ where: { id: p.id } })).toBeNull()
    }
    // A filter on the fence that matches a newer row: stale, and nothing kept.
    const newer = await seedProduct(t.base, 9n)
    const stale = await settle(t.db.$fenced(5n).product.deleteMany({ where: { id: newer.id, fenceToken: { gte: 9n } } }))
    expect(stale.error).toMatchObject({ name: 'StaleFencingTokenError', storedToken: 9n })
    expect(await row(newer.id)).toEqual(newer)
    // A relation's fence column is another model's.
    const p = await seedProduct(t.base, 2n)
    const order = await t.base.order.create({ data: { productId: p.id, buyerId: 'b', quantity: 1 } })
    expect(await t.db.$fenced(5n).order.deleteMany({ where: { id: order.id, product: { fenceToken: 2n } } })).toEqual({ count: 1 })
  })
})

describe('create / createMany / upsert', () => {
  it('create and createMany store the token', async () => {
    const created = await t.db.$fenced(11n).product.create({ data: { sku: uniqueSku('c'), name: 'n', priceCents: 1, stock: 1 } })
    expect(created.fenceToken).toBe(11n)
    const name = uniqueSku('many')
    await t.db.$fenced('12').product.createMany({
      data: [
        { sku: uniqueSku('c'), name, priceCents: 1, stock: 1 },
        { sku: uniqueSku('c'), name, priceCents: 1, stock: 1 },
      ],
    })
    const rows = await t.db.$fenced(13n).product.createManyAndReturn({ data: { sku: uniqueSku('c'), name, priceCents: 1, stock: 1 } })
    expect(rows.map((r) => r.fenceToken)).toEqual([13n])
    expect((await t.base.product.findMany({ where: { name }, orderBy: { id: 'asc' } })).map((r) => r.fenceToken)).toEqual([12n, 12n, 13n])
  })

  it('upsert creates with the token, updates under the condition, and refuses a stale token (row unchanged)', async () => {
    const sku = uniqueSku('up')
    const args = (stock: number) => ({ where: { sku }, create: { sku, name: 'u', priceCents: 1, stock }, update: { stock } })
    expect(await t.db.$fenced(5n).product.upsert(args(1))).toMatchObject({ sku, stock: 1, fenceToken: 5n })
    expect(await t.db.$fenced(6n).product.upsert(args(2))).toMatchObject({ sku, stock: 2, fenceToken: 6n })
    const before = await t.base.product.findUniqueOrThrow({ where: { sku } })
    const stale = await settle(t.db.$fenced(5n).product.upsert(args(3)))
    expect(stale.error).toMatchObject({ name: 'StaleFencingTokenError', operation: 'upsert', token: 5n, storedToken: 6n })
    expect(await t.base.product.findUniqueOrThrow({ where: { sku } })).toEqual(before)
    expect(await t.db.$fenced(6n).product.upsert({ ...args(4), select: { stock: true } })).toEqual({ stock: 4 })
  })
})

describe('tokens beyond 2^53', () => {
  it('2^53 + 1 and 2^63 − 1 round-trip exactly, and 2^53 is refused after 2^53 + 1', async () => {
    const product = await seedProduct(t.base, 0n)
    const big = 2n ** 53n + 1n
    expect((await t.db.$fenced(big).product.update({ where: { id: product.id }, data: { stock: 1 } })).fenceToken).toBe(big)
    expect((await row(product.id)).fenceToken).toBe(9_007_199_254_740_993n)
    // As a double, 2^53 and 2^53 + 1 are the same number: only exact integers can tell them apart.
    expect((await settle(t.db.$fenced(2n ** 53n).product.update({ where: { id: product.id }, data: { stock: 2 } }))).error).toMatchObject({
      name: 'StaleFencingTokenError',
      storedToken: big,
    })
    const max = 2n ** 63n - 1n
    expect((await t.db.$fenced('9223372036854775807').product.update({ where: { id: product.id }, data: { stock: 3 } })).fenceToken).toBe(max)
    expect((await row(product.id)).fenceToken).toBe(max)
    expect((await settle(t.db.$fenced(max - 1n).product.update({ where: { id: product.id }, data: { stock: 4 } }))).error).toMatchObject({
      storedToken: max,
    })
    expect(await row(product.id)).toMatchObject({ stock: 3, fenceToken: max })
  })
})

describe('inside the caller’s transaction', () => {
  it('a rejection rolls back what the same transaction wrote before it', async () => {
    const a = await seedProduct(t.base, 1n)
    const b = await seedProduct(t.base, 9n)
    const result = await settle(
      t.db.$transaction(async (tx) => {
        await tx.$fenced(5n).product.update({ where: { id: a.id }, data: { stock: 0 } })
        await tx.$fenced(5n).product.update({ where: { id: b.id }, data: { stock: 0 } })
      }),
    )
    expect(result.error).toBeInstanceOf(StaleFencingTokenError)
    expect(await row(a.id)).toEqual(a)
    expect(await row(b.id)).toEqual(b)
  })

  it('current writes commit with the transaction; $fenced(t).$transaction(fn) fences the client it hands out', async () => {
    const a = await seedProduct(t.base, 1n)
    await t.db.$transaction(async (tx) => {
      await tx.$fenced(5n).product.update({ where: { id: a.id }, data: { stock: 5 } })
    })
    expect(await row(a.id)).toMatchObject({ stock: 5, fenceToken: 5n })
    const stale = await settle(t.db.$fenced(4n).$transaction((tx) => tx.product.update({ where: { id: a.id }, data: { stock: 0 } })))
    expect(stale.error).toBeInstanceOf(StaleFencingTokenError)
    expect(await row(a.id)).toMatchObject({ stock: 5, fenceToken: 5n })
  })
})

describe('ambient token', () => {
  it('$fenced() takes the token of the enclosing withFenceToken; an explicit token wins; none is an error', async () => {
    const p = await seedProduct(t.base, 5n)
    const updated = await withFenceToken(6n, () => t.db.$fenced().product.update({ where: { id: p.id }, data: { stock: 1 } }))
    expect(updated.fenceToken).toBe(6n)
    const stale = await withFenceToken(9n, () => settle(t.db.$fenced(5n).product.update({ where: { id: p.id }, data: { stock: 2 } })))
    expect(stale.error).toMatchObject({ token: 5n, storedToken: 6n })
    expect(() => t.db.$fenced()).toThrow(MissingFenceTokenError)
  })
})

describe('writes the extension cannot fence are refused, not run unfenced', () => {
  it('setting the fence column in data, and nested writes into fenced models', async () => {
    const p = await seedProduct(t.base, 1n)
    const fenced = t.db.$fenced(5n)
    expect((await settle(fenced.product.update({ where: { id: p.id }, data: { fenceToken: 99n } }))).error).toMatchObject({
      name: 'UnsupportedFencedWriteError',
      reason: 'fence-column',
      field: 'fenceToken',
    })
    const nested = await settle(fenced.order.create({ data: { product: { connect: { id: p.id } }, buyerId: 'b', quantity: 1 } }))
    expect(nested.error).toBeInstanceOf(UnsupportedFencedWriteError)
    expect(nested.error).toMatchObject({ model: 'Order', reason: 'nested-write', field: 'product' })
    const viaProduct = await settle(fenced.product.update({ where: { id: p.id }, data: { orders: { create: { buyerId: 'b', quantity: 1 } } } }))
    expect(viaProduct.error).toMatchObject({ reason: 'nested-write', field: 'orders' })
    // From a model that is not fenced, into one that is.
    const order = await t.base.order.create({ data: { productId: p.id, buyerId: 'b', quantity: 1 } })
    const payment = await t.base.payment.create({ data: { orderId: order.id, amountCents: 1, instance: 'i' } })
    const viaPayment = await settle(fenced.payment.update({ where: { id: payment.id }, data: { order: { update: { status: 'paid' } } } }))
    expect(viaPayment.error).toMatchObject({ name: 'UnsupportedFencedWriteError', model: 'Payment', field: 'order' })
    const created = await settle(
      fenced.payment.create({ data: { amountCents: 1, instance: 'i', order: { create: { productId: p.id, buyerId: 'c', quantity: 1 } } } }),
    )
    expect(created.error).toMatchObject({ name: 'UnsupportedFencedWriteError', model: 'Payment', field: 'order' })
    expect(await row(p.id)).toEqual(p)
    expect(await t.base.order.findUniqueOrThrow({ where: { id: order.id } })).toEqual(order)
    expect(await t.base.order.count({ where: { productId: p.id } })).toBe(1)
    expect(await t.base.payment.findMany({ where: { order: { productId: p.id } } })).toEqual([payment])
    // The supported spelling: the foreign key as a scalar.
    expect(await fenced.order.create({ data: { productId: p.id, buyerId: 'b', quantity: 1 } })).toMatchObject({ fenceToken: 5n })
  })
})
