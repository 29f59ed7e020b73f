import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { fencedTransaction, fencing, InvalidFenceTokenError, StaleFencingTokenError, type FencedWriteReport, type FencingRejection } from '../src/index.js'
import { BAD_TOKENS } from './support/bad-tokens.js'
import { createTestDatabase, FENCED_MODELS, seedProduct, settle, type TestDatabase } from './support/database.js'

let t: TestDatabase

beforeAll(async () => {
  t = await createTestDatabase('ext')
})

afterAll(async () => {
  await t?.close()
})

/**
 * The fenced client over a client that records every operation Prisma runs (model operations,
 * raw queries) and every `$transaction` call: what the extension sends, seen from below it.
 */
function recorded() {
  const operations: string[] = []
  let transactions = 0
  const logged = t.base.$extends({
    query: {
      $allOperations({ model, operation, args, query }) {
        operations.push(model === undefined ? operation : `${model}.${operation}`)
        return query(args)
      },
    },
  })
  const db = logged.$extends(fencing({ models: FENCED_MODELS }))
  const counted = new Proxy(db, {
    get(target, prop) {
      if (prop === '$transaction') transactions += 1
      return Reflect.get(target, prop) as unknown
    },
  })
  return { db: counted, operations, transactions: () => transactions }
}

describe('what the extension sends', () => {
  it('only model operations on the caller’s client, no raw query; a one-statement write opens no transaction, a many-row write runs in one', async () => {
    const p = await seedProduct(t.base, 7n)
    const { db, operations, transactions } = recorded()
    await db.$fenced(8n).product.update({ where: { id: p.id }, data: { stock: 1 } })
    await settle(db.$fenced(5n).product.update({ where: { id: p.id }, data: { stock: 2 } }))
    await settle(db.$fenced(5n).product.updateMany({ where: { id: p.id }, data: { stock: 2 } }))
    await db.$fenced(9n).product.upsert({ where: { id: p.id }, create: { sku: 'never', name: 'n', priceCents: 1, stock: 1 }, update: { stock: 3 } })
    expect(operations).toEqual([
      'Product.update',
      'Product.update',
      'Product.findUnique', // the stored token, to tell a stale token from a missing row
      'Product.updateMany',
      'Product.findFirst', // a matched row with a newer token
      'Product.update',
    ])
    // The updateMany: its write and its check run in one transaction, so a refusal keeps nothing.
    expect(transactions()).toBe(1)
  })
})

describe('bad tokens', () => {
  it.each(BAD_TOKENS)('%s: InvalidFenceTokenError before any query, from $fenced, withFenceToken and fencedTransaction', async (_label, value) => {
    const p = await seedProduct(t.base, 1n)
    const { db, operations, transactions } = recorded()
    expect(() => db.$fenced(value as bigint)).toThrow(InvalidFenceTokenError)
    const tx = await settle(fencedTransaction(db, value as bigint, { model: 'Product', where: { id: p.id } }, async () => 'ran'))
    expect(tx.error).toBeInstanceOf(InvalidFenceTokenError)
    expect(operations).toEqual([])
    expect(transactions()).toBe(0)
    expect(await t.base.product.findUniqueOrThrow({ where: { id: p.id } })).toEqual(p)
  })
})

describe('models that are not fenced', () => {
  it('pass through untouched: no condition, no token, the same result as the plain client', async () => {
    const p = await seedProduct(t.base, 9n)
    const order = await t.base.order.create({ data: { productId: p.id, buyerId: 'b', quantity: 1, fenceToken: 9n } })
    // Payment has no fence column: a token added to its data would fail Prisma's validation.
    const viaFenced = await t.db.$fenced(1n).payment.create({ data: { orderId: order.id, amountCents: 500, instance: 'fenced' } })
    const viaPlain = await t.base.payment.create({ data: { orderId: order.id, amountCents: 500, instance: 'plain' } })
    expect(Object.keys(viaFenced)).toEqual(Object.keys(viaPlain))
    // A token older than everything around it changes nothing for them.
    expect(await t.db.$fenced(1n).payment.updateMany({ where: { orderId: order.id }, data: { amountCents: 600 } })).toEqual({ count: 2 })
    expect(await t.db.$fenced(1n).payment.delete({ where: { id: viaPlain.id } })).toMatchObject({ amountCents: 600 })
    // And a write to them leaves the fenced rows alone.
    expect(await t.base.order.findUniqueOrThrow({ where: { id: order.id } })).toEqual(order)
    expect(await t.base.product.findUniqueOrThrow({ where: { id: p.id } })).toEqual(p)
  })

  it('reads of fenced models pass through too, and keep their PrismaPromise (fit for batch transactions)', async () => {
    const p = await seedProduct(t.base, 3n)
    const fenced = t.db.$fenced(1n)
    const [read, count] = await t.db.$transaction([fenced.product.findUnique({ where: { id: p.id } }), fenced.payment.count()])
    expect(read).toEqual(p)
    expect(typeof count).toBe('number')
  })
})

describe('onRejection', () => {
  it('is called once per refused write with model, operation, token and stored token; its exceptions are swallowed', async () => {
    const seen: FencingRejection[] = []
    const db = t.base.$extends(
      fencing({
        models: FENCED_MODELS,
        onRejection: (r) => {
          seen.push(r)
          throw new Error('a broken observer')
        },
      }),
    )
    const p = await seedProduct(t.base, 7n)
    const first = await settle(db.$fenced(5n).product.update({ where: { id: p.id }, data: { stock: 0 } }))
    const second = await settle(fencedTransaction(db, 6n, { model: 'Product', where: { id: p.id } }, async () => 'ran'))
    await db.$fenced(7n).product.update({ where: { id: p.id }, data: { stock: 1 } })
    expect(first.error).toBeInstanceOf(StaleFencingTokenError)
    expect(second.error).toBeInstanceOf(StaleFencingTokenError)
    expect(seen).toEqual([
      { model: 'Product', operation: 'update', token: 5n, storedToken: 7n },
      { model: 'Product', operation: 'update', token: 6n, storedToken: 7n },
    ])
  })
})

describe('onFencedWrite', () => {
  it('is called once per fenced write as it settles — accepted, refused with the stored token — with its duration; never for a write refused before any query; its exceptions and rejections are swallowed', async () => {
    const seen: FencedWriteReport[] = []
    let calls = 0
    const db = t.base.$extends(
      fencing({
        models: FENCED_MODELS,
        onFencedWrite: (w) => {
          seen.push(w)
          calls++
          if (calls % 2 === 0) return Promise.reject(new Error('a broken async observer'))
          throw new Error('a broken observer')
        },
      }),
    )
    const p = await seedProduct(t.base, 7n)
    const accepted = await db.$fenced(8n).product.update({ where: { id: p.id }, data: { stock: 3 } })
    const refused = await settle(db.$fenced(5n).product.update({ where: { id: p.id }, data: { stock: 0 } }))
    // An unsupported shape is refused before any query: not a fenced write's outcome.
    const unsupported = await settle(db.$fenced(9n).product.update({ where: { id: p.id }, data: { fenceToken: 1n } }))
    const batch = await db.$transaction([db.$fenced(9n).product.update({ where: { id: p.id }, data: { stock: 4 } })])
    expect(accepted.stock).toBe(3)
    expect(refused.error).toBeInstanceOf(StaleFencingTokenError)
    expect(unsupported.error).toBeDefined()
    expect(batch[0]?.stock).toBe(4)
    expect(seen.map(({ durationMs, ...w }) => ({ ...w, measured: durationMs >= 0 && durationMs < 60_000 }))).toEqual([
      { model: 'Product', operation: 'update', token: 8n, outcome: 'accepted', storedToken: undefined, measured: true },
      { model: 'Product', operation: 'update', token: 5n, outcome: 'refused', storedToken: 8n, measured: true },
      { model: 'Product', operation: 'update', token: 9n, outcome: 'accepted', storedToken: undefined, measured: true },
    ])
    expect(await t.base.product.findUniqueOrThrow({ where: { id: p.id } })).toMatchObject({ stock: 4, fenceToken: 9n })
  })
})
