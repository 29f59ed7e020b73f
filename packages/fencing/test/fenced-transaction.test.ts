import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { currentFenceToken, fencedTransaction, InvalidFencingOptionError, StaleFencingTokenError } from '../src/index.js'
import { createTestDatabase, gate, seedProduct, settle, uniqueSku, waitForLockWait, waitForRowLocked, type TestDatabase } from './support/database.js'

let t: TestDatabase

beforeAll(async () => {
  t = await createTestDatabase('ftx')
})

afterAll(async () => {
  await t?.close()
})

const product = (id: number) => t.base.product.findUniqueOrThrow({ where: { id } })

/** The demo's purchase: read the stock, decrement it, create the order — a read-modify-write. */
function buy(token: bigint, productId: number, buyerId: string, beforeRead?: Promise<void>) {
  return fencedTransaction(t.db, token, { model: 'Product', where: { id: productId } }, async (tx) => {
    await beforeRead
    const p = await tx.product.findUniqueOrThrow({ where: { id: productId } })
    await tx.product.update({ where: { id: productId }, data: { stock: p.stock - 1 } })
    return tx.order.create({ data: { productId, buyerId, quantity: 1 } })
  })
}

describe('fencedTransaction', () => {
  it('raises the fence first, then runs the callback with a fenced client and the ambient token', async () => {
    const p = await seedProduct(t.base, 3n)
    let fenceSeen: bigint | undefined
    let ambient: bigint | undefined
    const order = await fencedTransaction(t.db, 5n, { model: 'Product', where: { sku: p.sku } }, async (tx) => {
      fenceSeen = (await tx.product.findUniqueOrThrow({ where: { id: p.id } })).fenceToken
      ambient = currentFenceToken()
      return tx.order.create({ data: { productId: p.id, buyerId: 'b', quantity: 1 } })
    })
    expect(fenceSeen).toBe(5n)
    expect(ambient).toBe(5n)
    expect(order.fenceToken).toBe(5n)
    expect(await product(p.id)).toEqual({ ...p, fenceToken: 5n })
  })

  it('hands the callback the row its first statement locked, its fence raised (no second read needed)', async () => {
    const p = await seedProduct(t.base, 3n)
    const seen = await fencedTransaction(t.db, 5n, { model: 'Product', where: { sku: p.sku } }, async (_tx, product) => {
      // Typed from the client: product.stock is a number, product.fenceToken a bigint.
      const stock: number = product.stock
      const fence: bigint = product.fenceToken
      return { stock, fence, sku: product.sku }
    })
    expect(seen).toEqual({ stock: p.stock, fence: 5n, sku: p.sku })
  })

  it('a read-modify-write under a stale token changes nothing: it fails at the first statement, the callback never runs', async () => {
    const p = await seedProduct(t.base, 7n)
    let ran = false
    const result = await settle(
      fencedTransaction(t.db, 5n, { model: 'Product', where: { id: p.id } }, async (tx) => {
        ran = true
        const current = await tx.product.findUniqueOrThrow({ where: { id: p.id } })
        await tx.product.update({ where: { id: p.id }, data: { stock: current.stock - 1 } })
        return tx.order.create({ data: { productId: p.id, buyerId: 'stale', quantity: 1 } })
      }),
    )
    expect(result.error).toBeInstanceOf(StaleFencingTokenError)
    expect(result.error).toMatchObject({ model: 'Product', token: 5n, storedToken: 7n })
    expect(ran).toBe(false)
    expect(await product(p.id)).toEqual(p)
    expect(await t.base.order.count({ where: { productId: p.id } })).toBe(0)
  })

  it('control: the same read-modify-write in a plain transaction goes through', async () => {
    const p = await seedProduct(t.base, 7n)
    await t.base.$transaction(async (tx) => {
      const current = await tx.product.findUniqueOrThrow({ where: { id: p.id } })
      await tx.product.update({ where: { id: p.id }, data: { stock: current.stock - 1 } })
      await tx.order.create({ data: { productId: p.id, buyerId: 'stale', quantity: 1 } })
    })
    expect(await product(p.id)).toMatchObject({ stock: p.stock - 1 })
    expect(await t.base.order.count({ where: { productId: p.id } })).toBe(1)
  })

  it('a missing row fails as Prisma’s update does (P2025); a bad model or option fails before any query', async () => {
    let ran = false
    const missing = await settle(
      fencedTransaction(t.db, 1n, { model: 'Product', where: { sku: uniqueSku('none') } }, async () => {
        ran = true
      }),
    )
    expect(missing.error).toMatchObject({ code: 'P2025' })
    expect(ran).toBe(false)
    const p = await seedProduct(t.base, 1n)
    for (const options of [
      { model: 'Payment', where: { id: 1 } },
      { model: 'Nope', where: { id: 1 } },
      { model: 'Product', where: null },
      { model: 'Product', where: { id: p.id }, timeoutMs: 0 },
      { model: 'Product', where: { id: p.id }, isolationLevel: 'Chaos' },
    ]) {
      expect((await settle(fencedTransaction(t.db, 2n, options as never, async () => 'ran'))).error).toBeInstanceOf(InvalidFencingOptionError)
    }
    expect((await settle(fencedTransaction(t.base as unknown as typeof t.db, 2n, { model: 'Product', where: { id: p.id } }, async () => 'ran'))).error).toBeInstanceOf(
      InvalidFencingOptionError,
    )
    expect(await product(p.id)).toEqual(p)
  })
})

describe('two concurrent transactions with tokens 5 and 6 on one row', () => {
  it('6 raises the fence first: 5 waits for the row lock, then is rejected when 6 commits; 6’s write stands', async () => {
    const p = await seedProduct(t.base, 0n)
    const hold = gate()
    const six = buy(6n, p.id, 'six', hold.promise)
    // 6 holds the row (its fence is raised, the transaction open) before 5 starts.
    await waitForRowLocked(t.admin, t.schema, p.id)
    const five = settle(buy(5n, p.id, 'five'))
    await waitForLockWait(t.admin, t.schema)
    hold.open()
    expect((await six).buyerId).toBe('six')
    const rejected = await five
    expect(rejected.error).toBeInstanceOf(StaleFencingTokenError)
    expect(rejected.error).toMatchObject({ token: 5n, storedToken: 6n })
    expect(await product(p.id)).toMatchObject({ stock: p.stock - 1, fenceToken: 6n })
    expect((await t.base.order.findMany({ where: { productId: p.id } })).map((o) => o.buyerId)).toEqual(['six'])
  })

  it('5 begins first and reads, 6 commits meanwhile: 5’s write is rejected and nothing of 5 commits; 6 wins', async () => {
    const p = await seedProduct(t.base, 0n)
    const read = gate()
    const proceed = gate()
    const five = settle(
      t.db.$transaction(async (tx) => {
        const current = await tx.product.findUniqueOrThrow({ where: { id: p.id } })
        await tx.order.create({ data: { productId: p.id, buyerId: 'five', quantity: 1 } })
        read.open()
        await proceed.promise
        // Fenced only at the last write (what fencedTransaction avoids): still refused.
        await tx.$fenced(5n).product.update({ where: { id: p.id }, data: { stock: current.stock - 1 } })
      }),
    )
    await read.promise
    expect((await buy(6n, p.id, 'six')).buyerId).toBe('six')
    proceed.open()
    const rejected = await five
    expect(rejected.error).toMatchObject({ name: 'StaleFencingTokenError', token: 5n, storedToken: 6n })
    expect(await product(p.id)).toMatchObject({ stock: p.stock - 1, fenceToken: 6n })
    expect((await t.base.order.findMany({ where: { productId: p.id } })).map((o) => o.buyerId)).toEqual(['six'])
  })

  it('5 raises the fence first: 6 waits for it, then wins; every later write of 5 is rejected', async () => {
    const p = await seedProduct(t.base, 0n)
    const hold = gate()
    const five = buy(5n, p.id, 'five', hold.promise)
    await waitForRowLocked(t.admin, t.schema, p.id)
    const six = buy(6n, p.id, 'six')
    await waitForLockWait(t.admin, t.schema)
    hold.open()
    // 5 held the newest token when it wrote, so its purchase stands; 6 then writes on top.
    expect((await five).buyerId).toBe('five')
    expect((await six).buyerId).toBe('six')
    const late = await settle(buy(5n, p.id, 'five-again'))
    expect(late.error).toMatchObject({ name: 'StaleFencingTokenError', token: 5n, storedToken: 6n })
    expect(await product(p.id)).toMatchObject({ stock: p.stock - 2, fenceToken: 6n })
    expect((await t.base.order.findMany({ where: { productId: p.id }, orderBy: { id: 'asc' } })).map((o) => o.buyerId)).toEqual(['five', 'six'])
  })
})

describe('isolation level (what docs/FENCING.md says)', () => {
  it('under RepeatableRead a transaction that waited for the row fails with P2034 whatever its token; nothing of it commits', async () => {
    const p = await seedProduct(t.base, 0n)
    const hold = gate()
    const rr = { model: 'Product' as const, where: { id: p.id }, isolationLevel: 'RepeatableRead' as const }
    const first = fencedTransaction(t.db, 6n, rr, async () => hold.promise)
    await waitForRowLocked(t.admin, t.schema, p.id)
    const newer = settle(fencedTransaction(t.db, 7n, rr, async (tx) => tx.product.update({ where: { id: p.id }, data: { stock: 0 } })))
    await waitForLockWait(t.admin, t.schema)
    hold.open()
    await first
    expect((await newer).error).toMatchObject({ code: 'P2034' })
    expect(await product(p.id)).toMatchObject({ stock: p.stock, fenceToken: 6n })
  })
})

describe('inside the caller’s own transaction (issue 24 case 8)', () => {
  it('isolationLevel, maxWaitMs and timeoutMs are refused there with a typed error, before any query; without them it runs in a savepoint', async () => {
    // Before: fencedTransaction(tx, …, { isolationLevel }) ran, at the caller's level, and said nothing.
    const p = await seedProduct(t.base, 1n)
    for (const option of [{ isolationLevel: 'Serializable' }, { maxWaitMs: 10 }, { timeoutMs: 10 }] as const) {
      const refused = await settle(
        t.db.$transaction((tx) => fencedTransaction(tx as unknown as typeof t.db, 2n, { model: 'Product', where: { id: p.id }, ...option }, async () => 'ran')),
      )
      expect(refused.error).toBeInstanceOf(InvalidFencingOptionError)
      expect(refused.error).toMatchObject({ field: Object.keys(option)[0] })
    }
    expect(await t.base.product.findUniqueOrThrow({ where: { id: p.id } })).toEqual(p)
    expect(await t.db.$transaction((tx) => fencedTransaction(tx as unknown as typeof t.db, 2n, { model: 'Product', where: { id: p.id } }, async () => 'ran'))).toBe('ran')
  })
})
