/**
 * Raw SQL on a `$fenced(token)` view ($executeRaw, $executeRawUnsafe, $queryRaw, $queryRawUnsafe)
 * runs under the token: in a transaction that set it (SET_FENCE_TOKEN_SQL), so the database guard
 * decides — a row whose fence is newer is refused, a row written gets the token as its fence.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { StaleFencingTokenError, UnsupportedFencedWriteError } from '../src/index.js'
import { Prisma } from '../../../generated/prisma/client.js'
import { createTestDatabase, seedProduct, settle, type TestDatabase } from './support/database.js'

let t: TestDatabase

beforeAll(async () => {
  t = await createTestDatabase('raw')
})

afterAll(async () => {
  await t?.close()
})

/** Raw SQL does not get the adapter's schema: the table by its full name. */
const table = () => `"${t.schema}"."Product"`
const product = () => Prisma.raw(table())
const row = (id: number) => t.base.product.findUniqueOrThrow({ where: { id } })

/** The four raw methods, each sending `UPDATE "Product" SET stock = <stock> WHERE id = <id>`. */
const RAW = [
  ['$executeRaw', (c: typeof t.base, id: number, stock: number) => c.$executeRaw`UPDATE ${product()} SET stock = ${stock} WHERE id = ${id}`],
  ['$executeRawUnsafe', (c: typeof t.base, id: number, stock: number) => c.$executeRawUnsafe(`UPDATE ${table()} SET stock = $1 WHERE id = $2`, stock, id)],
  ['$queryRaw', (c: typeof t.base, id: number, stock: number) => c.$queryRaw`UPDATE ${product()} SET stock = ${stock} WHERE id = ${id} RETURNING id`],
  ['$queryRawUnsafe', (c: typeof t.base, id: number, stock: number) => c.$queryRawUnsafe(`UPDATE ${table()} SET stock = $1 WHERE id = $2 RETURNING id`, stock, id)],
] as const

describe('raw SQL on a $fenced view runs under its token', () => {
  it.each(RAW)('%s: token 10 on a row at fence 11 is refused (StaleFencingTokenError), the row kept; token 12 writes and raises the fence', async (_method, send) => {
    const p = await seedProduct(t.base, 11n)
    const stale = await settle(send(t.db.$fenced(10n) as unknown as typeof t.base, p.id, 0))
    expect(stale.error).toBeInstanceOf(StaleFencingTokenError)
    expect(stale.error).toMatchObject({ model: 'Product', token: 10n, storedToken: 11n })
    expect(await row(p.id)).toMatchObject({ stock: 10, fenceToken: 11n })
    await send(t.db.$fenced(12n) as unknown as typeof t.base, p.id, 3)
    expect(await row(p.id)).toMatchObject({ stock: 3, fenceToken: 12n })
  })

  it.each(RAW)('control, %s on the client without $fenced: the stale write lands', async (_method, send) => {
    const p = await seedProduct(t.base, 11n)
    await send(t.db as unknown as typeof t.base, p.id, 0)
    expect(await row(p.id)).toMatchObject({ stock: 0, fenceToken: 11n })
  })

  it('inside your transaction: refused under a stale token; under a current one the token covers that statement only', async () => {
    const p = await seedProduct(t.base, 11n)
    const other = await seedProduct(t.base, 5n)
    const stale = await settle(t.db.$transaction(async (tx) => tx.$fenced(10n).$executeRaw`UPDATE ${product()} SET stock = 0 WHERE id = ${p.id}`))
    expect(stale.error).toBeInstanceOf(StaleFencingTokenError)
    expect(await row(p.id)).toMatchObject({ stock: 10, fenceToken: 11n })
    await t.db.$transaction(async (tx) => {
      await tx.$fenced(12n).$executeRaw`UPDATE ${product()} SET stock = 1 WHERE id = ${p.id}`
      // A plain write of the same transaction afterwards: not under the token.
      await tx.$executeRaw`UPDATE ${product()} SET stock = 2 WHERE id = ${other.id}`
    })
    expect(await row(p.id)).toMatchObject({ stock: 1, fenceToken: 12n })
    expect(await row(other.id)).toMatchObject({ stock: 2, fenceToken: 5n })
  })

  it('in the array form of $transaction: refused before the batch starts (it takes more than one statement)', async () => {
    const p = await seedProduct(t.base, 11n)
    const batch = await settle(t.db.$transaction([t.db.$fenced(12n).$executeRaw`UPDATE ${product()} SET stock = 0 WHERE id = ${p.id}`, t.base.product.update({ where: { id: p.id }, data: { stock: 4 } })]))
    expect(batch.error).toBeInstanceOf(UnsupportedFencedWriteError)
    expect(await row(p.id)).toMatchObject({ stock: 10, fenceToken: 11n })
  })
})
