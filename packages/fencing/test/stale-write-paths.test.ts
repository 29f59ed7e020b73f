/**
 * The write paths that once let a stale token through, each reproduced the way it breaks: a
 * second session is a newer holder whose write holds the row lock while the older token's call
 * waits on it, then commits. Every case also runs unprotected (plain Prisma, or a schema without
 * the database guard) to show the failure it closes.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { fencing, isFenceGuardError, StaleFencingTokenError, UnsupportedFencedWriteError, type FencingRejection } from '../src/index.js'
import {
  createTestDatabase,
  FENCED_MODELS,
  gate,
  holdTransaction,
  openSession,
  seedProduct,
  settle,
  uniqueSku,
  waitForLockWait,
  type FencedDb,
  type TestDatabase,
} from './support/database.js'

/** Guarded schema (the demo's migrations) and unguarded one (the guard's migration left out). */
let g: TestDatabase
let u: TestDatabase

beforeAll(async () => {
  ;[g, u] = await Promise.all([createTestDatabase('paths'), createTestDatabase('paths_unguarded', { guard: false })])
})

afterAll(async () => {
  await Promise.all([g?.close(), u?.close()])
})

/**
 * Runs `write` while another session holds a transaction that ran `statements` (a newer holder's
 * uncommitted write), waits until `write` is blocked on that session's lock, then commits it.
 */
async function behindNewerHolder<T>(t: TestDatabase, statements: [string, unknown[]][], write: () => Promise<T>) {
  const holder = await holdTransaction(t.schema, ...statements)
  const pending = settle(write())
  try {
    await waitForLockWait(t.admin, t.schema)
  } finally {
    await holder.commit()
  }
  return pending
}

const raiseTo = (token: bigint, id: number, table = 'Product'): [string, unknown[]] => [
  `UPDATE "${table}" SET "fenceToken" = $2, ${table === 'Product' ? 'stock = 100' : `"buyerId" = 'newer'`} WHERE id = $1`,
  [id, token],
]

/** A client whose Prisma operations are recorded below the fencing extension. */
function recorded(t: TestDatabase) {
  const operations: string[] = []
  const db = t.base
    .$extends({
      query: {
        $allOperations({ model, operation, args, query }) {
          operations.push(model === undefined ? operation : `${model}.${operation}`)
          return query(args)
        },
      },
    })
    .$extends(fencing({ models: FENCED_MODELS }))
  return { db, operations }
}

describe('1. limit', () => {
  it('is refused before any query on updateMany, updateManyAndReturn and deleteMany, naming the argument', async () => {
    const p = await seedProduct(g.base, 1n)
    const { db, operations } = recorded(g)
    const fenced = db.$fenced(5n).product
    const calls: (() => Promise<unknown>)[] = [
      () => fenced.updateMany({ where: { id: p.id }, data: { stock: 1 }, limit: 1 }),
      () => fenced.updateManyAndReturn({ where: { id: p.id }, data: { stock: 1 }, limit: 1 }),
      () => fenced.deleteMany({ where: { id: p.id }, limit: 1 }),
    ]
    for (const call of calls) {
      const result = await settle(call())
      expect(result.error).toBeInstanceOf(UnsupportedFencedWriteError)
      expect(result.error).toMatchObject({ reason: 'limit', field: 'limit', model: 'Product' })
      expect((result.error as Error).message).toMatch(/"limit"/)
    }
    expect(operations).toEqual([])
    expect(await g.base.product.findUniqueOrThrow({ where: { id: p.id } })).toEqual(p)
  })

  it('control: a fence inside Prisma’s limit subquery lets an older token overwrite the newer holder’s committed write', async () => {
    const p = await seedProduct(u.base, 0n)
    const stale = await behindNewerHolder(u, [raiseTo(6n, p.id)], () =>
      u.base.product.updateMany({ where: { id: p.id, fenceToken: { lte: 5n } }, data: { stock: 1, fenceToken: 5n }, limit: 1 }),
    )
    expect(stale.value).toEqual({ count: 1 })
    // The fence went backwards and holder 6's stock of 100 is lost.
    expect(await u.base.product.findUniqueOrThrow({ where: { id: p.id } })).toMatchObject({ stock: 1, fenceToken: 5n })
  })

  it('control: deleteMany with limit deletes the row the newer holder just wrote', async () => {
    const p = await seedProduct(u.base, 0n)
    const stale = await behindNewerHolder(u, [raiseTo(6n, p.id)], () => u.base.product.deleteMany({ where: { id: p.id, fenceToken: { lte: 5n } }, limit: 1 }))
    expect(stale.value).toEqual({ count: 1 })
    expect(await u.base.product.findUnique({ where: { id: p.id } })).toBeNull()
  })

  it('the database guard refuses the same stale write, whichever client sends it', async () => {
    const p = await seedProduct(g.base, 0n)
    const stale = await behindNewerHolder(g, [raiseTo(6n, p.id)], () =>
      g.base.product.updateMany({ where: { id: p.id, fenceToken: { lte: 5n } }, data: { stock: 1, fenceToken: 5n }, limit: 1 }),
    )
    expect(isFenceGuardError(stale.error)).toBe(true)
    expect(await g.base.product.findUniqueOrThrow({ where: { id: p.id } })).toMatchObject({ stock: 100, fenceToken: 6n })
  })
})

/** A filter as a class instance, as NestJS DTOs and validated query objects are. */
class NameAndId {
  constructor(
    readonly name: string,
    readonly id: number,
  ) {}

  describe(): string {
    return `${this.name}#${this.id}`
  }
}

class StockPatch {
  readonly stock: number
  constructor(stock: number) {
    this.stock = stock
  }
}

/**
 * The unprotected variant of reading an argument, as the extension once did: anything but a plain
 * object became `{}`.
 */
function plainOrEmpty(value: object): Record<string, unknown> {
  return Object.getPrototypeOf(value) === Object.prototype ? { ...value } : {}
}

/** Runs `fn` in a transaction that is rolled back afterwards, and returns what it returned: a write seen, then undone. */
async function rolledBack<T>(fn: (tx: TestDatabase['base']) => Promise<T>): Promise<T> {
  const undo = new Error('roll back')
  let seen: T | undefined
  const outcome = await settle(
    g.base.$transaction(async (tx) => {
      seen = await fn(tx as TestDatabase['base'])
      throw undo
    }),
  )
  expect(outcome.error).toBe(undo)
  return seen as T
}

describe('2. arguments that are not plain objects', () => {
  it('a class-instance where filters as Prisma reads it: one row of three, the same as plain Prisma; read as {}, it matched all three', async () => {
    const name = uniqueSku('dto')
    const create = () => g.base.product.create({ data: { sku: uniqueSku('dto'), name, priceCents: 1, stock: 9, fenceToken: 1n } })
    const a = await create()
    const b = await create()
    const c = await create()
    // The unprotected variant, fenced by hand as the extension once sent it (in a transaction
    // rolled back, so the widened write touches no other test's rows): every row under the token.
    const widened = await rolledBack(async (tx) => {
      const { count } = await tx.product.updateMany({ where: { ...plainOrEmpty(new NameAndId(name, b.id)), fenceToken: { lte: 5n } }, data: { stock: 0, fenceToken: 5n } })
      return { count, mine: await tx.product.findMany({ where: { name }, select: { stock: true } }) }
    })
    expect(widened.count).toBeGreaterThanOrEqual(3)
    expect(widened.mine).toEqual([{ stock: 0 }, { stock: 0 }, { stock: 0 }])

    expect(await g.base.product.updateMany({ where: new NameAndId(name, a.id), data: { stock: 0 } })).toEqual({ count: 1 })
    expect(await g.db.$fenced(5n).product.updateMany({ where: new NameAndId(name, b.id), data: { stock: 0 } })).toEqual({ count: 1 })
    expect(await g.db.$fenced(5n).product.update({ where: new NameAndId(name, c.id), data: { stock: 3 } })).toMatchObject({ stock: 3, fenceToken: 5n })
    const after = await g.base.product.findMany({ where: { name }, orderBy: { id: 'asc' } })
    expect(after.map((r) => [r.stock, r.fenceToken])).toEqual([
      [0, 1n],
      [0, 5n],
      [3, 5n],
    ])
  })

  it('class-instance data is written, as plain Prisma writes it (update, create, createMany, upsert); read as {}, the update reported success and wrote nothing', async () => {
    // The unprotected variant: the data read as {}, only the fence written, and the call "succeeds".
    const q = await seedProduct(g.base, 1n)
    expect(await g.base.product.update({ where: { id: q.id, fenceToken: { lte: 5n } }, data: { ...plainOrEmpty(new StockPatch(42)), fenceToken: 5n } })).toMatchObject({
      stock: q.stock,
      fenceToken: 5n,
    })

    const p = await seedProduct(g.base, 1n)
    expect(await g.db.$fenced(5n).product.update({ where: { id: p.id }, data: new StockPatch(42) })).toMatchObject({ stock: 42, fenceToken: 5n })
    class NewProduct {
      name = 'dto'
      priceCents = 1
      stock = 7
      constructor(readonly sku: string) {}
    }
    expect(await g.db.$fenced(6n).product.create({ data: new NewProduct(uniqueSku('dto')) })).toMatchObject({ stock: 7, fenceToken: 6n })
    expect(await g.db.$fenced(6n).product.createMany({ data: [new NewProduct(uniqueSku('dto')), new NewProduct(uniqueSku('dto'))] })).toEqual({ count: 2 })
    const sku = uniqueSku('dto')
    expect(await g.db.$fenced(7n).product.upsert({ where: { sku }, create: new NewProduct(sku), update: new StockPatch(1) })).toMatchObject({ stock: 7 })
    expect(await g.db.$fenced(8n).product.upsert({ where: { sku }, create: new NewProduct(sku), update: new StockPatch(1) })).toMatchObject({ stock: 1, fenceToken: 8n })
  })

  it('inherited enumerable properties count, as Prisma reads them (for...in)', async () => {
    const p = await seedProduct(g.base, 1n)
    const where = Object.create({ id: p.id }) as { id: number }
    const data = Object.create({ stock: 11 }) as { stock: number }
    expect(await g.base.product.findFirst({ where })).toMatchObject({ id: p.id })
    expect(await g.db.$fenced(2n).product.update({ where, data })).toMatchObject({ id: p.id, stock: 11, fenceToken: 2n })
  })

  it('what Prisma would not read as fields is refused before any query, naming the argument', async () => {
    const p = await seedProduct(g.base, 1n)
    const { db, operations } = recorded(g)
    const fenced = db.$fenced(5n).product
    const cases: [string, () => Promise<unknown>][] = [
      ['where', () => fenced.update({ where: [{ id: p.id }] as never, data: { stock: 0 } })],
      ['data', () => fenced.update({ where: { id: p.id }, data: undefined as never })],
      ['data', () => fenced.update({ where: { id: p.id }, data: new Date() as never })],
      ['data', () => fenced.update({ where: { id: p.id }, data: { toJSON: () => ({ stock: 0 }) } as never })],
      ['where', () => fenced.updateMany({ where: 'all' as never, data: { stock: 0 } })],
      ['data[1]', () => fenced.createMany({ data: [{ sku: uniqueSku('x'), name: 'n', priceCents: 1, stock: 1 }, 7 as never] })],
      ['create', () => fenced.upsert({ where: { id: p.id }, create: null as never, update: { stock: 1 } })],
      ['args', () => fenced.update(42 as never)],
    ]
    for (const [field, call] of cases) {
      const result = await settle(call())
      expect(result.error, field).toBeInstanceOf(UnsupportedFencedWriteError)
      expect(result.error, field).toMatchObject({ reason: 'argument', field })
    }
    expect(operations).toEqual([])
    expect(await g.base.product.findUniqueOrThrow({ where: { id: p.id } })).toEqual(p)
  })

  it('a nested write inside a class instance is refused, on fenced and unfenced models', async () => {
    const p = await seedProduct(g.base, 1n)
    const order = await g.base.order.create({ data: { productId: p.id, buyerId: 'b', quantity: 1 } })
    const payment = await g.base.payment.create({ data: { orderId: order.id, amountCents: 1, instance: 'i' } })
    class MarkPaid {
      order = { update: { status: 'paid' as const } }
    }
    class NestedOrders {
      orders = { create: { buyerId: 'x', quantity: 1 } }
    }
    const viaPayment = await settle(g.db.$fenced(5n).payment.update({ where: { id: payment.id }, data: new MarkPaid() }))
    expect(viaPayment.error).toMatchObject({ name: 'UnsupportedFencedWriteError', reason: 'nested-write', field: 'order' })
    const viaProduct = await settle(g.db.$fenced(5n).product.update({ where: { id: p.id }, data: new NestedOrders() }))
    expect(viaProduct.error).toMatchObject({ name: 'UnsupportedFencedWriteError', reason: 'nested-write', field: 'orders' })
    expect(await g.base.order.findUniqueOrThrow({ where: { id: order.id } })).toEqual(order)
  })
})

describe('3. a deleted row keeps its fence (the database guard)', () => {
  it('an older token cannot recreate a row a newer token deleted (create, createMany, upsert); an equal or newer one can', async () => {
    const sku = uniqueSku('tomb')
    const data = { sku, name: 'n', priceCents: 1, stock: 1 }
    await g.db.$fenced(30n).product.create({ data })
    await g.db.$fenced(30n).product.delete({ where: { sku } })
    const fenced: (() => Promise<unknown>)[] = [
      () => g.db.$fenced(29n).product.create({ data }),
      () => g.db.$fenced(29n).product.createMany({ data: [data] }),
      () => g.db.$fenced(29n).product.upsert({ where: { sku }, create: data, update: { stock: 2 } }),
    ]
    for (const call of fenced) {
      const result = await settle(call())
      expect(result.error).toBeInstanceOf(StaleFencingTokenError)
      expect(result.error).toMatchObject({ token: 29n, storedToken: 30n })
    }
    // The plain client (fence 0) gets the guard's own error: nothing maps it there.
    const plain = await settle(g.base.product.create({ data }))
    expect(plain.error).not.toBeInstanceOf(StaleFencingTokenError)
    expect(isFenceGuardError(plain.error)).toBe(true)
    expect(await g.base.product.findUnique({ where: { sku } })).toBeNull()
    expect(await g.db.$fenced(31n).product.create({ data })).toMatchObject({ sku, fenceToken: 31n })
  })

  /**
   * The deletes under test: the fenced call, and the unprotected variant — the statement a fenced
   * delete used to be (`fenceToken <= t` in its WHERE, the fence never raised first).
   */
  const deletes: [string, (db: FencedDb, token: bigint, sku: string) => Promise<unknown>, (token: bigint, sku: string) => Promise<unknown>][] = [
    ['delete', (db, token, sku) => db.$fenced(token).product.delete({ where: { sku } }), (token, sku) => g.base.product.delete({ where: { sku, fenceToken: { lte: token } } })],
    [
      'delete with include',
      (db, token, sku) => db.$fenced(token).product.delete({ where: { sku }, include: { orders: true } }),
      (token, sku) => g.base.product.delete({ where: { sku, fenceToken: { lte: token } }, include: { orders: true } }),
    ],
    ['deleteMany', (db, token, sku) => db.$fenced(token).product.deleteMany({ where: { sku } }), (token, sku) => g.base.product.deleteMany({ where: { sku, fenceToken: { lte: token } } })],
  ]
  const productData = (sku: string) => ({ sku, name: 'n', priceCents: 1, stock: 1 })

  it.each(deletes)('%s: a row written under 20 and deleted under 30 cannot be recreated under 25, only above 30; unraised, the tombstone keeps 20 and 25 recreates it', async (_label, remove, unprotected) => {
    const sku = uniqueSku('tomb')
    await g.db.$fenced(20n).product.create({ data: productData(sku) })
    await remove(g.db, 30n, sku)
    expect(await g.base.productFenceTombstone.findUnique({ where: { sku } })).toEqual({ sku, fenceToken: 30n })
    const stale = await settle(g.db.$fenced(25n).product.create({ data: productData(sku) }))
    expect(stale.error).toBeInstanceOf(StaleFencingTokenError)
    expect(stale.error).toMatchObject({ operation: 'create', token: 25n, storedToken: 30n })
    expect(await g.base.product.findUnique({ where: { sku } })).toBeNull()
    expect(await g.db.$fenced(31n).product.create({ data: productData(sku) })).toMatchObject({ sku, fenceToken: 31n })

    // The unprotected variant: the guard sees only the row's own fence, 20, and keeps that.
    const other = uniqueSku('tomb')
    await g.db.$fenced(20n).product.create({ data: productData(other) })
    await unprotected(30n, other)
    expect(await g.base.productFenceTombstone.findUnique({ where: { sku: other } })).toEqual({ sku: other, fenceToken: 20n })
    expect(await g.db.$fenced(25n).product.create({ data: productData(other) })).toMatchObject({ sku: other, fenceToken: 25n })
  })

  it.each(deletes)('%s, control: without the guard a deleted row’s fence is gone, whichever token deleted it, and 25 recreates it', async (_label, remove) => {
    const sku = uniqueSku('tomb')
    await u.db.$fenced(20n).product.create({ data: productData(sku) })
    await remove(u.db, 30n, sku)
    expect(await u.db.$fenced(25n).product.create({ data: productData(sku) })).toMatchObject({ sku, fenceToken: 25n })
  })

  it.each(deletes)('%s, race: a fenced delete that waited for another holder’s write of the row still leaves its own token in the tombstone', async (_label, remove) => {
    const p = await seedProduct(g.base, 20n, 'tomb')
    // Holder 22 writes the row (uncommitted); the delete under 30 waits for it, then deletes.
    const deleted = await behindNewerHolder(g, [raiseTo(22n, p.id)], () => remove(g.db, 30n, p.sku))
    expect(deleted.error).toBeUndefined()
    expect(await g.base.productFenceTombstone.findUnique({ where: { sku: p.sku } })).toEqual({ sku: p.sku, fenceToken: 30n })
    const stale = await settle(g.db.$fenced(25n).product.create({ data: productData(p.sku) }))
    expect(stale.error).toBeInstanceOf(StaleFencingTokenError)
  })

  it.each(['delete', 'deleteMany'] as const)('%s, race: an older create from another session, sent while the fenced delete’s transaction is open, is refused once it commits', async (operation) => {
    const p = await seedProduct(g.base, 20n, 'tomb')
    const paused = gate()
    const release = gate()
    let armed = true
    // Below the extension: hold the fenced delete's transaction open right after its DELETE.
    const db = g.base
      .$extends({
        query: {
          product: {
            async $allOperations({ operation: called, args, query }) {
              const result = await query(args)
              if (armed && called === operation) {
                armed = false
                paused.open()
                await release.promise
              }
              return result
            },
          },
        },
      })
      .$extends(fencing({ models: FENCED_MODELS }))
    const fenced = db.$fenced(30n).product
    const removing = settle<unknown>(operation === 'delete' ? fenced.delete({ where: { sku: p.sku } }) : fenced.deleteMany({ where: { sku: p.sku } }))
    await paused.promise
    const session = await openSession(g.schema)
    try {
      const recreate = settle(session.query(`INSERT INTO "${g.schema}"."Product" (sku, name, "priceCents", stock, "fenceToken") VALUES ($1, 'older', 1, 1, 25)`, [p.sku]))
      try {
        // The INSERT waits for the delete's transaction (the key is still taken there), unless nothing holds it.
        await Promise.race([waitForLockWait(g.admin, g.schema), recreate])
      } finally {
        release.open()
      }
      expect((await removing).error).toBeUndefined()
      const refused = await recreate
      expect(isFenceGuardError(refused.error)).toBe(true)
      expect(JSON.parse((refused.error as { detail: string }).detail)).toMatchObject({ stored: '30', token: '25' })
    } finally {
      await session.end()
    }
    expect(await g.base.product.findUnique({ where: { sku: p.sku } })).toBeNull()
  })

  it('race: a newer holder’s delete is still open when the older create arrives; the create is refused once it commits', async () => {
    const p = await seedProduct(g.base, 20n, 'tomb')
    const stale = await behindNewerHolder(
      g,
      [
        [`UPDATE "Product" SET "fenceToken" = 30 WHERE id = $1`, [p.id]],
        [`DELETE FROM "Product" WHERE id = $1`, [p.id]],
      ],
      () => g.db.$fenced(29n).product.create({ data: { sku: p.sku, name: 'again', priceCents: 1, stock: 1 } }),
    )
    expect(stale.error).toBeInstanceOf(StaleFencingTokenError)
    expect(stale.error).toMatchObject({ operation: 'create', token: 29n, storedToken: 30n })
    expect(await g.base.product.findUnique({ where: { sku: p.sku } })).toBeNull()
  })
})

describe('4. delete returning relations', () => {
  /** The three ways a delete returns relations: include, a relation in select, _count in select. */
  const deletes = (t: TestDatabase, token: bigint): ((id: number) => Promise<unknown>)[] => [
    (id: number) => t.db.$fenced(token).order.delete({ where: { id }, include: { product: true } }),
    (id: number) => t.db.$fenced(token).order.delete({ where: { id }, select: { id: true, product: true } }),
    (id: number) => t.db.$fenced(token).order.delete({ where: { id }, select: { id: true, _count: true } }),
  ]

  it('a stale one is refused once the newer holder commits, and the row stays (without the guard too)', async () => {
    for (const t of [g, u]) {
      for (const [i, remove] of deletes(t, 5n).entries()) {
        const p = await seedProduct(t.base, 0n)
        const order = await t.base.order.create({ data: { productId: p.id, buyerId: 'b', quantity: 1 } })
        const stale = await behindNewerHolder(t, [raiseTo(6n, order.id, 'Order')], () => remove(order.id))
        expect(stale.error, `${t.schema} #${i}`).toBeInstanceOf(StaleFencingTokenError)
        expect(stale.error).toMatchObject({ model: 'Order', operation: 'delete', token: 5n, storedToken: 6n })
        expect(await t.base.order.findUniqueOrThrow({ where: { id: order.id } })).toMatchObject({ fenceToken: 6n, buyerId: 'newer' })
      }
    }
  })

  it('control: Prisma’s own delete with include, fenced by hand, reports success and deletes nothing', async () => {
    const p = await seedProduct(u.base, 0n)
    const order = await u.base.order.create({ data: { productId: p.id, buyerId: 'b', quantity: 1 } })
    const stale = await behindNewerHolder(u, [raiseTo(6n, order.id, 'Order')], () =>
      u.base.order.delete({ where: { id: order.id, fenceToken: { lte: 5n } }, include: { product: true } }),
    )
    expect(stale.value).toMatchObject({ id: order.id, product: { id: p.id } })
    expect(await u.base.order.findUniqueOrThrow({ where: { id: order.id } })).toMatchObject({ fenceToken: 6n })
  })

  it('a current token deletes the row and returns it with its relations', async () => {
    const p = await seedProduct(g.base, 0n)
    const order = await g.base.order.create({ data: { productId: p.id, buyerId: 'b', quantity: 1, fenceToken: 3n } })
    const deleted = await g.db.$fenced(4n).order.delete({ where: { id: order.id }, include: { product: true } })
    expect(deleted).toMatchObject({ id: order.id, fenceToken: 4n, product: { id: p.id } })
    expect(await g.base.order.findUnique({ where: { id: order.id } })).toBeNull()
    // The guard keeps the fence the row was deleted with.
    expect(await g.base.orderFenceTombstone.findUnique({ where: { id: order.id } })).toEqual({ id: order.id, fenceToken: 4n })
  })
})

describe('5. upsert racing a newer holder’s create', () => {
  const insert = (sku: string, token: bigint): [string, unknown[]] => [
    `INSERT INTO "Product" (sku, name, "priceCents", stock, "fenceToken") VALUES ($1, 'newer', 1, 100, $2)`,
    [sku, token],
  ]
  const upsert = (t: TestDatabase, token: bigint, sku: string) =>
    t.db.$fenced(token).product.upsert({ where: { sku }, create: { sku, name: 'mine', priceCents: 1, stock: 1 }, update: { stock: 1 } })

  it('an older token is refused (StaleFencingTokenError, not P2002) and the newer row stays', async () => {
    for (const t of [g, u]) {
      const sku = uniqueSku('race')
      const stale = await behindNewerHolder(t, [insert(sku, 6n)], () => upsert(t, 5n, sku))
      expect(stale.error, t.schema).toBeInstanceOf(StaleFencingTokenError)
      expect(stale.error).toMatchObject({ operation: 'upsert', token: 5n, storedToken: 6n })
      expect(await t.base.product.findUniqueOrThrow({ where: { sku } })).toMatchObject({ name: 'newer', stock: 100, fenceToken: 6n })
    }
  })

  it('a current token updates the row the other holder created', async () => {
    const sku = uniqueSku('race')
    const current = await behindNewerHolder(g, [insert(sku, 6n)], () => upsert(g, 7n, sku))
    expect(current.value).toMatchObject({ name: 'newer', stock: 1, fenceToken: 7n })
  })

  it('inside the caller’s transaction, the lost create is rolled back to a savepoint and the transaction goes on', async () => {
    const sku = uniqueSku('race')
    const p = await seedProduct(g.base, 0n)
    const result = await behindNewerHolder(g, [insert(sku, 6n)], () =>
      g.db.$transaction(async (tx) => {
        const row = await tx.$fenced(7n).product.upsert({ where: { sku }, create: { sku, name: 'mine', priceCents: 1, stock: 1 }, update: { stock: 2 } })
        await tx.$fenced(7n).product.update({ where: { id: p.id }, data: { stock: 3 } })
        return row
      }),
    )
    expect(result.value).toMatchObject({ stock: 2, fenceToken: 7n })
    expect(await g.base.product.findUniqueOrThrow({ where: { id: p.id } })).toMatchObject({ stock: 3, fenceToken: 7n })
  })

  it('control: Prisma’s own upsert, fenced by hand, overwrites the newer holder’s row with the older token', async () => {
    const sku = uniqueSku('race')
    const stale = await behindNewerHolder(u, [insert(sku, 6n)], () =>
      u.base.product.upsert({ where: { sku }, create: { sku, name: 'mine', priceCents: 1, stock: 1, fenceToken: 5n }, update: { stock: 1, fenceToken: 5n } }),
    )
    expect(stale.value).toMatchObject({ stock: 1, fenceToken: 5n })
  })
})

/**
 * Unhandled rejections while `fn` runs, and then for a moment (or until `expected` of them were
 * seen). The test runner's own listeners are set aside meanwhile, so that an unprotected variant
 * that does reject unhandled is counted here instead of failing the run.
 */
async function unhandledDuring(fn: () => Promise<unknown>, options: { expected?: number } = {}): Promise<unknown[]> {
  const seen: unknown[] = []
  const listener = (reason: unknown) => {
    seen.push(reason)
  }
  const runners = process.listeners('unhandledRejection')
  process.removeAllListeners('unhandledRejection')
  process.on('unhandledRejection', listener)
  try {
    await fn()
    const deadline = performance.now() + (options.expected === undefined ? 100 : 10_000)
    while (performance.now() < deadline && seen.length < (options.expected ?? Number.POSITIVE_INFINITY)) await new Promise((resolve) => setTimeout(resolve, 10))
  } finally {
    process.off('unhandledRejection', listener)
    for (const runner of runners) process.on('unhandledRejection', runner)
  }
  return seen
}

describe('6. the array form of $transaction', () => {
  /**
   * The unprotected variant of a fenced write, as the extension once made it: an async function,
   * which runs (and commits) the moment it is called, whatever batch it is then handed to.
   */
  async function eagerFencedUpdate(id: number, token: bigint, stock: number): Promise<number> {
    const { count } = await g.base.product.updateMany({ where: { id, fenceToken: { lte: token } }, data: { stock, fenceToken: token } })
    if (count === 0) throw new StaleFencingTokenError('Product', 'update', token, undefined)
    return count
  }

  /** `$transaction([...])` with the eager write as its second element, after a plain payment. */
  const batchWithEager = (orderId: number, eager: Promise<number>) =>
    settle((async () => g.db.$transaction([g.db.payment.create({ data: { orderId, amountCents: 1, instance: 'batch' } }), eager as never]))())

  it('a stale fenced write fails the whole batch: the plain write before it is rolled back, no unhandled rejection; an eager one rejects unhandled', async () => {
    const p = await seedProduct(g.base, 7n)
    const order = await g.base.order.create({ data: { productId: p.id, buyerId: 'b', quantity: 1 } })
    let result: { error?: unknown } = {}
    const unhandled = await unhandledDuring(async () => {
      result = await settle(
        g.db.$transaction([
          g.db.payment.create({ data: { orderId: order.id, amountCents: 1, instance: 'batch' } }),
          g.db.$fenced(5n).product.update({ where: { id: p.id }, data: { stock: 0 } }),
        ]),
      )
    })
    expect(result.error).toBeInstanceOf(StaleFencingTokenError)
    expect(result.error).toMatchObject({ token: 5n, storedToken: 7n })
    expect(unhandled).toEqual([])
    expect(await g.base.payment.count({ where: { orderId: order.id } })).toBe(0)
    expect(await g.base.product.findUniqueOrThrow({ where: { id: p.id } })).toEqual(p)

    // The unprotected variant: Prisma refuses the batch (its element is no Prisma promise), and
    // nobody is left to hear the eager write's refusal — in production, the end of the process.
    let refused: { error?: unknown } = {}
    const eager = await unhandledDuring(
      async () => {
        refused = await batchWithEager(order.id, eagerFencedUpdate(p.id, 5n, 0))
      },
      { expected: 1 },
    )
    expect(refused.error).toBeInstanceOf(Error)
    expect(eager).toHaveLength(1)
    expect(eager[0]).toBeInstanceOf(StaleFencingTokenError)
  })

  it('current fenced writes commit with the batch, in one transaction; an eager one commits although its batch never ran', async () => {
    const p = await seedProduct(g.base, 7n)
    const sku = uniqueSku('batch')
    const [updated, created] = await g.db.$transaction([
      g.db.$fenced(8n).product.update({ where: { id: p.id }, data: { stock: 1 } }),
      g.db.$fenced(8n).product.create({ data: { sku, name: 'n', priceCents: 1, stock: 1 } }),
      g.db.$fenced(8n).order.create({ data: { productId: p.id, buyerId: 'b', quantity: 1 } }),
    ])
    expect(updated).toMatchObject({ stock: 1, fenceToken: 8n })
    expect(created).toMatchObject({ sku, fenceToken: 8n })

    // The unprotected variant: half of the batch commits — the fenced write, outside it; the payment, never.
    const q = await seedProduct(g.base, 7n)
    const order = await g.base.order.create({ data: { productId: q.id, buyerId: 'b', quantity: 1 } })
    const eager = eagerFencedUpdate(q.id, 8n, 1)
    expect((await batchWithEager(order.id, eager)).error).toBeInstanceOf(Error)
    expect(await eager).toBe(1)
    expect(await g.base.product.findUniqueOrThrow({ where: { id: q.id } })).toMatchObject({ stock: 1, fenceToken: 8n })
    expect(await g.base.payment.count({ where: { orderId: order.id } })).toBe(0)
  })

  it('a write of several statements refuses before the batch starts: nothing of the batch runs', async () => {
    const p = await seedProduct(g.base, 1n)
    const order = await g.base.order.create({ data: { productId: p.id, buyerId: 'b', quantity: 1 } })
    const { db, operations } = recorded(g)
    const several: (() => Promise<unknown>)[] = [
      () => db.$fenced(9n).product.updateMany({ where: { id: p.id }, data: { stock: 0 } }),
      () => db.$fenced(9n).product.deleteMany({ where: { id: -1 } }),
      () => db.$fenced(9n).product.upsert({ where: { id: p.id }, create: { sku: uniqueSku('x'), name: 'n', priceCents: 1, stock: 1 }, update: { stock: 0 } }),
      () => db.$fenced(9n).order.delete({ where: { id: order.id }, include: { product: true } }),
      // A delete raises the fence before it deletes (so the guard keeps the deleting token): two statements.
      () => db.$fenced(9n).order.delete({ where: { id: order.id } }),
    ]
    for (const call of several) {
      const result = await settle(db.$transaction([db.payment.create({ data: { orderId: order.id, amountCents: 1, instance: 'batch' } }), call() as never]))
      expect(result.error).toBeInstanceOf(UnsupportedFencedWriteError)
      expect(result.error).toMatchObject({ reason: 'batch-transaction' })
    }
    expect(await g.base.payment.count({ where: { orderId: order.id } })).toBe(0)
    expect(await g.base.product.findUniqueOrThrow({ where: { id: p.id } })).toEqual(p)
    expect(operations.filter((o) => o !== 'Payment.create')).toEqual([])
  })

  it('fenced writes are lazy: one never awaited writes nothing and rejects nowhere', async () => {
    const p = await seedProduct(g.base, 7n)
    const unhandled = await unhandledDuring(async () => {
      void g.db.$fenced(9n).product.update({ where: { id: p.id }, data: { stock: 0 } })
      void g.db.$fenced(1n).product.update({ where: { id: p.id }, data: { stock: 0 } })
    })
    expect(unhandled).toEqual([])
    expect(await g.base.product.findUniqueOrThrow({ where: { id: p.id } })).toEqual(p)
  })

  it('a create the guard refuses inside a batch is a StaleFencingTokenError too', async () => {
    const sku = uniqueSku('batch')
    await g.db.$fenced(30n).product.create({ data: { sku, name: 'n', priceCents: 1, stock: 1 } })
    await g.db.$fenced(30n).product.delete({ where: { sku } })
    const result = await settle(g.db.$transaction([g.db.$fenced(29n).product.create({ data: { sku, name: 'n', priceCents: 1, stock: 1 } })]))
    expect(result.error).toMatchObject({ name: 'StaleFencingTokenError', storedToken: 30n })
  })
})

describe('7. many-row writes, observers, and a client without its data model', () => {
  it.each(['updateMany', 'deleteMany'] as const)(
    '%s outside a transaction: a newer row committed between its write and its check makes it keep nothing; without a transaction the write stayed',
    async (operation) => {
      const name = uniqueSku('late')
      const mine = await g.base.product.create({ data: { sku: uniqueSku('late'), name, priceCents: 1, stock: 5, fenceToken: 1n } })
      const other = await openSession(g.schema)
      const newerRow = () => other.query(`INSERT INTO "Product" (sku, name, "priceCents", stock, "fenceToken") VALUES ($1, $2, 1, 1, 9)`, [uniqueSku('late'), name])
      let armed = true
      // Below the extension: right after the conditional write, a newer holder commits a
      // matching row (no lock stands in its way: it is a new row).
      const db = g.base
        .$extends({
          query: {
            product: {
              async $allOperations({ operation: called, args, query }) {
                const result = await query(args)
                if (armed && called === operation) {
                  armed = false
                  await newerRow()
                }
                return result
              },
            },
          },
        })
        .$extends(fencing({ models: FENCED_MODELS }))
      try {
        const fenced = db.$fenced(5n).product
        const stale = await settle(operation === 'updateMany' ? fenced.updateMany({ where: { name }, data: { stock: 0 } }) : fenced.deleteMany({ where: { name } }))
        expect(stale.error).toBeInstanceOf(StaleFencingTokenError)
        expect(stale.error).toMatchObject({ operation, storedToken: 9n })
        // What the error says is true: nothing of the call was kept.
        expect(await g.base.product.findUniqueOrThrow({ where: { id: mine.id } })).toEqual(mine)

        // The unprotected variant, as the extension once ran it: the same write and check, each
        // on its own. The check finds the newer row and would report the token stale — after the
        // write committed.
        const otherName = uniqueSku('late')
        const theirs = await g.base.product.create({ data: { sku: uniqueSku('late'), name: otherName, priceCents: 1, stock: 5, fenceToken: 1n } })
        const where = { name: otherName, fenceToken: { lte: 5n } }
        if (operation === 'updateMany') await g.base.product.updateMany({ where, data: { stock: 0, fenceToken: 5n } })
        else await g.base.product.deleteMany({ where })
        await other.query(`INSERT INTO "Product" (sku, name, "priceCents", stock, "fenceToken") VALUES ($1, $2, 1, 1, 9)`, [uniqueSku('late'), otherName])
        expect(await g.base.product.findFirst({ where: { name: otherName, fenceToken: { gt: 5n } } })).toMatchObject({ fenceToken: 9n })
        const kept = await g.base.product.findUnique({ where: { id: theirs.id } })
        if (operation === 'updateMany') expect(kept).toMatchObject({ stock: 0, fenceToken: 5n })
        else expect(kept).toBeNull()
      } finally {
        await other.end()
      }
    },
  )

  it('inside the caller’s transaction a refused updateMany rolls back to its savepoint: the caller may catch it and commit the rest', async () => {
    const name = uniqueSku('sp')
    const older = await g.base.product.create({ data: { sku: uniqueSku('sp'), name, priceCents: 1, stock: 5, fenceToken: 1n } })
    await g.base.product.create({ data: { sku: uniqueSku('sp'), name, priceCents: 1, stock: 5, fenceToken: 9n } })
    const p = await seedProduct(g.base, 0n)
    const caught = await g.db.$transaction(async (tx) => {
      await tx.$fenced(5n).product.update({ where: { id: p.id }, data: { stock: 1 } })
      const refused = await settle(tx.$fenced(5n).product.updateMany({ where: { name }, data: { stock: 0 } }))
      return refused.error
    })
    expect(caught).toBeInstanceOf(StaleFencingTokenError)
    expect(await g.base.product.findUniqueOrThrow({ where: { id: older.id } })).toEqual(older)
    expect(await g.base.product.findUniqueOrThrow({ where: { id: p.id } })).toMatchObject({ stock: 1, fenceToken: 5n })
  })

  it('several many-row writes at once inside one transaction take their savepoints in turn (Prisma allows one at a time)', async () => {
    const a = await seedProduct(g.base, 1n)
    const b = await seedProduct(g.base, 1n)
    const sku = uniqueSku('par')
    const results = await g.db.$transaction(async (tx) =>
      Promise.all([
        tx.$fenced(5n).product.updateMany({ where: { id: a.id }, data: { stock: 1 } }),
        tx.$fenced(5n).product.updateMany({ where: { id: b.id }, data: { stock: 2 } }),
        tx.$fenced(5n).product.upsert({ where: { sku }, create: { sku, name: 'n', priceCents: 1, stock: 3 }, update: {} }),
      ]),
    )
    expect(results.slice(0, 2)).toEqual([{ count: 1 }, { count: 1 }])
    expect(await g.base.product.findMany({ where: { id: { in: [a.id, b.id] } }, orderBy: { id: 'asc' }, select: { stock: true, fenceToken: true } })).toEqual([
      { stock: 1, fenceToken: 5n },
      { stock: 2, fenceToken: 5n },
    ])
    expect(await g.base.product.findUniqueOrThrow({ where: { sku } })).toMatchObject({ stock: 3, fenceToken: 5n })
  })

  it('an async onRejection that rejects is no unhandled rejection; called as the extension once called it, it is one', async () => {
    const seen: FencingRejection[] = []
    const observer = async (r: FencingRejection) => {
      seen.push(r)
      throw new Error('an async observer that fails')
    }
    const db = g.base.$extends(fencing({ models: FENCED_MODELS, onRejection: observer }))
    const p = await seedProduct(g.base, 7n)
    const unhandled = await unhandledDuring(async () => {
      const stale = await settle(db.$fenced(5n).product.update({ where: { id: p.id }, data: { stock: 0 } }))
      expect(stale.error).toBeInstanceOf(StaleFencingTokenError)
    })
    expect(seen).toHaveLength(1)
    expect(unhandled).toEqual([])

    // The unprotected variant: the observer called in a try/catch, which catches a throw but not
    // the rejection of the promise it returns.
    const notifyUnprotected = (rejection: FencingRejection) => {
      try {
        void observer(rejection)
      } catch {
        // a synchronous throw only
      }
    }
    const escaped = await unhandledDuring(async () => notifyUnprotected(seen[0]!), { expected: 1 })
    expect(escaped).toHaveLength(1)
    expect(escaped[0]).toMatchObject({ message: 'an async observer that fails' })
  })

  it('without Prisma’s runtime data model the nested-write check fails closed, on models not named in models too', async () => {
    const hidden = new Proxy(g.base, {
      get: (target, prop) => (prop === '_runtimeDataModel' ? undefined : (Reflect.get(target, prop) as unknown)),
    })
    const db = hidden.$extends(fencing({ models: FENCED_MODELS }))
    const p = await seedProduct(g.base, 1n)
    const order = await g.base.order.create({ data: { productId: p.id, buyerId: 'b', quantity: 1 } })
    const payment = await g.base.payment.create({ data: { orderId: order.id, amountCents: 1, instance: 'i' } })
    const viaPayment = await settle(db.$fenced(5n).payment.update({ where: { id: payment.id }, data: { order: { update: { status: 'paid' } } } }))
    expect(viaPayment.error).toMatchObject({ name: 'UnsupportedFencedWriteError', reason: 'nested-write', model: 'Payment', field: 'order' })
    const viaOrder = await settle(db.$fenced(5n).order.update({ where: { id: order.id }, data: { product: { update: { stock: 0 } } } }))
    expect(viaOrder.error).toMatchObject({ name: 'UnsupportedFencedWriteError', reason: 'nested-write', field: 'product' })
    expect(await g.base.order.findUniqueOrThrow({ where: { id: order.id } })).toEqual(order)
    expect(await g.base.product.findUniqueOrThrow({ where: { id: p.id } })).toEqual(p)
    // Scalar writes still work.
    expect(await db.$fenced(5n).payment.update({ where: { id: payment.id }, data: { amountCents: 2 } })).toMatchObject({ amountCents: 2 })
  })
})

describe('8. the database backs the extension', () => {
  it('no client lowers a fence: the plain Prisma client, $executeRaw, a plain SQL session', async () => {
    const p = await seedProduct(g.base, 7n)
    const session = await openSession(g.schema)
    try {
      const attempts = [
        settle(g.base.product.update({ where: { id: p.id }, data: { fenceToken: 0n } })),
        settle(g.base.$executeRawUnsafe(`UPDATE "${g.schema}"."Product" SET "fenceToken" = 0 WHERE id = $1`, p.id)),
        settle(session.query(`UPDATE "Product" SET "fenceToken" = 0, stock = 0 WHERE id = $1`, [p.id])),
      ]
      for (const attempt of await Promise.all(attempts)) expect(isFenceGuardError(attempt.error)).toBe(true)
      // NULL is no fence either (here the column's NOT NULL refuses it first; the guard would too).
      expect((await settle(session.query(`UPDATE "Product" SET "fenceToken" = NULL WHERE id = $1`, [p.id]))).error).toMatchObject({ code: '23502' })
      // Raising it, or writing without touching it, is fine.
      await session.query(`UPDATE "Product" SET stock = 3 WHERE id = $1`, [p.id])
      await session.query(`UPDATE "Product" SET "fenceToken" = 8 WHERE id = $1`, [p.id])
    } finally {
      await session.end()
    }
    expect(await g.base.product.findUniqueOrThrow({ where: { id: p.id } })).toMatchObject({ stock: 3, fenceToken: 8n })
  })

  it('control: without the guard they do', async () => {
    const p = await seedProduct(u.base, 7n)
    await u.base.$executeRawUnsafe(`UPDATE "${u.schema}"."Product" SET "fenceToken" = 0 WHERE id = $1`, p.id)
    expect(await u.base.product.findUniqueOrThrow({ where: { id: p.id } })).toMatchObject({ fenceToken: 0n })
  })

  /**
   * A fenced client whose Product writes lose the sight of the fence below the extension: a
   * write path whose WHERE cannot see a newer fence. `update` loses the condition the extension
   * added; `updateMany` gets a `limit`, so Prisma moves the filter, fence and all, into
   * `id IN (SELECT ... LIMIT n)`, which PostgreSQL does not re-check after a row-lock wait.
   */
  function blindToTheFence(t: TestDatabase) {
    return t.base
      .$extends({
        query: {
          product: {
            update({ args, query }) {
              const { fenceToken: _condition, ...where } = args.where
              return query({ ...args, where: where as typeof args.where })
            },
            updateMany({ args, query }) {
              return query({ ...args, limit: 1 })
            },
          },
        },
      })
      .$extends(fencing({ models: FENCED_MODELS }))
  }

  const blindWrites: [string, (db: ReturnType<typeof blindToTheFence>, id: number) => Promise<unknown>][] = [
    ['update', (db, id) => db.$fenced(5n).product.update({ where: { id }, data: { stock: 1 } })],
    ['updateMany', (db, id) => db.$fenced(5n).product.updateMany({ where: { id }, data: { stock: 1 } })],
  ]

  it.each(blindWrites)(
    '%s: the guard, not the extension’s WHERE, refuses a fenced write that would lower the fence a newer holder committed while it waited, and the extension reports StaleFencingTokenError',
    async (operation, write) => {
      const p = await seedProduct(g.base, 0n)
      const stale = await behindNewerHolder(g, [raiseTo(6n, p.id)], () => write(blindToTheFence(g), p.id))
      expect(stale.error).toBeInstanceOf(StaleFencingTokenError)
      expect(stale.error).toMatchObject({ model: 'Product', operation, token: 5n, storedToken: 6n })
      expect(await g.base.product.findUniqueOrThrow({ where: { id: p.id } })).toMatchObject({ stock: 100, fenceToken: 6n })
    },
  )

  it.each(blindWrites)('%s, control: without the guard the same write lowers the fence and reports success', async (_operation, write) => {
    const p = await seedProduct(u.base, 0n)
    const lowered = await behindNewerHolder(u, [raiseTo(6n, p.id)], () => write(blindToTheFence(u), p.id))
    expect(lowered.error).toBeUndefined()
    expect(await u.base.product.findUniqueOrThrow({ where: { id: p.id } })).toMatchObject({ stock: 1, fenceToken: 5n })
  })

  it('a plain write with an older token that waited on the newer holder’s row lock fails once it commits', async () => {
    const p = await seedProduct(g.base, 0n)
    const stale = await behindNewerHolder(g, [raiseTo(6n, p.id)], () =>
      g.base.$executeRawUnsafe(`UPDATE "${g.schema}"."Product" SET stock = 1, "fenceToken" = 5 WHERE id = $1`, p.id),
    )
    expect(isFenceGuardError(stale.error)).toBe(true)
    expect(await g.base.product.findUniqueOrThrow({ where: { id: p.id } })).toMatchObject({ stock: 100, fenceToken: 6n })
  })
})
