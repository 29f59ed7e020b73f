/**
 * A query extension of yours that changes a fenced write's arguments (here: adds a nested
 * `connect` that rewrites a fenced Order's foreign key) runs after `$fenced` checked them. The
 * extension's own query hook checks what is sent again; it sees the arguments after every query
 * extension applied before `fencing()` — the safe order — and not those applied after it, which
 * the docs say not to do (shown here: that order gets through).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { fencing, UnsupportedFencedWriteError } from '../src/index.js'
import { createTestDatabase, FENCED_MODELS, seedProduct, settle, type TestDatabase } from './support/database.js'

let t: TestDatabase

beforeAll(async () => {
  t = await createTestDatabase('query_ext')
})

afterAll(async () => {
  await t?.close()
})

/** Adds `orders: { connect: { id } }` to every Product update: a nested write into the fenced Order. */
const addConnect = (orderId: () => number) => ({
  query: {
    product: {
      update({ args, query }: { args: { data: object }; query: (args: object) => Promise<unknown> }) {
        return query({ ...args, data: { ...args.data, orders: { connect: { id: orderId() } } } })
      },
    },
  },
})

describe('a query extension that adds a nested write to a fenced write', () => {
  let victim = 0
  const beforeFencing = () => t.base.$extends(addConnect(() => victim)).$extends(fencing({ models: FENCED_MODELS }))
  const afterFencing = () => t.base.$extends(fencing({ models: FENCED_MODELS })).$extends(addConnect(() => victim))

  async function setUp() {
    const owner = await seedProduct(t.base, 11n)
    const target = await seedProduct(t.base, 5n)
    const order = await t.base.order.create({ data: { productId: owner.id, buyerId: 'victim', quantity: 1, fenceToken: 11n } })
    victim = order.id
    return { owner, target, order }
  }

  it('applied before fencing() (the safe order): what is sent is checked — refused (nested-write), the fenced Order keeps its product', async () => {
    const { owner, target, order } = await setUp()
    const sent = await settle(beforeFencing().$fenced(10n).product.update({ where: { id: target.id }, data: { stock: 1 } }))
    expect(sent.error).toBeInstanceOf(UnsupportedFencedWriteError)
    expect(sent.error).toMatchObject({ reason: 'nested-write' })
    expect(await t.base.order.findUniqueOrThrow({ where: { id: order.id } })).toMatchObject({ productId: owner.id, fenceToken: 11n })
    expect(await t.base.product.findUniqueOrThrow({ where: { id: target.id } })).toMatchObject({ stock: 10, fenceToken: 5n })
    // A query extension there that adds nothing: fenced writes go through it as before.
    await beforeFencing().$fenced(10n).order.update({ where: { id: order.id }, data: { quantity: 2 } }).then(
      () => expect.unreachable('token 10 on an order at 11'),
      (error: unknown) => expect(error).toMatchObject({ name: 'StaleFencingTokenError' }),
    )
    await beforeFencing().$fenced(12n).order.update({ where: { id: order.id }, data: { quantity: 2 } })
    expect(await t.base.order.findUniqueOrThrow({ where: { id: order.id } })).toMatchObject({ quantity: 2, fenceToken: 12n })
  })

  it('applied after fencing() (documented as unsafe): its hook runs after the check, and the nested connect moves the fenced Order', async () => {
    const { target, order } = await setUp()
    await afterFencing().$fenced(10n).product.update({ where: { id: target.id }, data: { stock: 1 } })
    expect(await t.base.order.findUniqueOrThrow({ where: { id: order.id } })).toMatchObject({ productId: target.id })
  })

  it('control: the same call without that extension writes; with it and without fencing, the fenced Order is moved', async () => {
    const owner = await seedProduct(t.base, 11n)
    const target = await seedProduct(t.base, 5n)
    const order = await t.base.order.create({ data: { productId: owner.id, buyerId: 'victim', quantity: 1, fenceToken: 11n } })
    victim = order.id
    await t.db.$fenced(10n).product.update({ where: { id: target.id }, data: { stock: 1 } })
    await t.base.$extends(addConnect(() => victim)).product.update({ where: { id: target.id }, data: { stock: 2 } })
    expect(await t.base.order.findUniqueOrThrow({ where: { id: order.id } })).toMatchObject({ productId: target.id })
  })
})
