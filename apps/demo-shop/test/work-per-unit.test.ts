// The work a sale does per unit, counted on the real services (issue 34): the statements the
// shop's Prisma client sends (its query events; Prisma logs COMMIT, not BEGIN) and the lock
// cycles its Locker runs. A buyer the stock cannot serve takes no lock and writes nothing; a
// repeated payment of a paid order is answered from the order, before any lock, and a duplicate
// that meets the first delivery's hold after one try of the lock; a payment runs one statement
// before the lock, one for its intent and one transaction for its payment.
import type { LockEvent } from '@fencelock/lock'
import { Locker } from '@fencelock/lock'
import { PrismaPg } from '@prisma/adapter-pg'
import { Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { PrismaClient } from '../../../generated/prisma/client.js'
import { dropShopSchema, prepareShopSchema } from '../src/database.js'
import { httpGateway, type PaymentGateway } from '../src/payment-gateway.js'
import { createProtection, fencedShopClient, shopStores, type ProtectionMode } from '../src/protection.js'
import { ShopService, type PaymentResult } from '../src/shop-service.js'
import { startTestGateway, type TestGateway } from './gateway-server.js'
import { REDIS_URL, testDatabase, uniqueRun } from './services.js'

const { runId, schema } = uniqueRun('work-unit')
const database = testDatabase(schema)
let gateway: TestGateway
let redis: Redis
let locker: Locker
let prisma: PrismaClient
let statements: string[] = []
let acquires: string[] = []

beforeAll(async () => {
  await prepareShopSchema(database, [
    { sku: 'w-1', name: 'W', priceCents: 100, stock: 2 },
    { sku: 'w-seg', name: 'W segmented', priceCents: 100, stock: 2, segments: 2 },
    { sku: 'w-pay', name: 'W paid', priceCents: 250, stock: 10 },
  ])
  const adapter = new PrismaPg({ connectionString: database.connectionString, max: 3 }, { schema })
  const client = new PrismaClient({ adapter, log: [{ emit: 'event', level: 'query' }] })
  client.$on('query', (event) => statements.push(event.query.replaceAll(`"${schema}".`, '')))
  prisma = client
  gateway = await startTestGateway(database)
  redis = new Redis(REDIS_URL)
  locker = new Locker(redis, { prefix: `${runId}:` })
  locker.listen((event: LockEvent) => {
    if (event.type === 'acquired') acquires.push(event.resource)
  })
})

afterAll(async () => {
  await locker?.close()
  redis?.disconnect()
  await gateway?.close()
  await prisma?.$disconnect()
  await dropShopSchema(database)
})

function shopOf(mode: ProtectionMode): ShopService {
  const stores = shopStores(prisma, fencedShopClient(prisma), { maxWait: 5_000, timeout: 5_000 })
  const protection = createProtection(mode, { stores, locker, ttlMs: 5_000, waitMs: 5_000 })
  return new ShopService({ db: prisma, protection, gateway: httpGateway({ url: gateway.url }), instanceId: `work-${mode}` })
}

/** What `work` sent and locked. */
async function counted<T>(work: () => Promise<T>): Promise<{ result: T; statements: string[]; acquires: string[] }> {
  statements = []
  acquires = []
  const result = await work()
  return { result, statements, acquires }
}

const writes = (list: readonly string[]) => list.filter((s) => /^(UPDATE|INSERT|DELETE)\b/.test(s))
const fenceOf = async (sku: string) => (await prisma.product.findUniqueOrThrow({ where: { sku } })).fenceToken

describe('a buyer the stock cannot serve', () => {
  it('takes no lock and writes nothing once the instance saw the stock run out; before that, the lock but no write', async () => {
    const shop = shopOf('fenced')
    expect((await shop.purchase('w-1', 'a')).kind).toBe('ordered')
    const last = await counted(() => shop.purchase('w-1', 'b'))
    expect(last.result).toMatchObject({ kind: 'ordered', stockLeft: 0 })
    const fence = await fenceOf('w-1')

    // This instance sold the last unit: a read decides, before any lock.
    for (const buyer of ['c', 'd', 'e']) {
      const lost = await counted(() => shop.purchase('w-1', buyer))
      expect(lost.result.kind).toBe('sold-out')
      expect(lost.acquires, 'no lock').toEqual([])
      expect(lost.statements, lost.statements.join('\n')).toHaveLength(1)
      expect(lost.statements[0]).toMatch(/^SELECT .*"Product"\."stock"/)
    }
    // Another instance that has not seen it run out takes the lock once: its fenced read matches
    // no row (stock > 0 is its condition), so the product's fence is not raised, nothing written.
    const other = shopOf('fenced')
    const first = await counted(() => other.purchase('w-1', 'f'))
    expect(first.result.kind).toBe('sold-out')
    expect(first.acquires).toEqual(['product:w-1'])
    expect(await fenceOf('w-1'), 'the fence was not raised: no row version written').toBe(fence)
    const second = await counted(() => other.purchase('w-1', 'g'))
    expect(second.acquires).toEqual([])
    expect(writes(second.statements)).toEqual([])
    expect(await prisma.order.count({ where: { product: { sku: 'w-1' } } })).toBe(2)
  })

  it('of a segmented product: no lock once the instance found every segment empty', async () => {
    const shop = shopOf('fenced')
    expect((await shop.purchase('w-seg', 'a')).kind).toBe('ordered')
    expect((await shop.purchase('w-seg', 'b')).kind).toBe('ordered')
    expect((await shop.purchase('w-seg', 'c')).kind).toBe('sold-out')
    const lost = await counted(() => shop.purchase('w-seg', 'd'))
    expect(lost.result.kind).toBe('sold-out')
    expect(lost.acquires).toEqual([])
    expect(writes(lost.statements)).toEqual([])
  })

  it('a unit returned to the stock is sold again: the read finds it, the sale goes under the lock', async () => {
    const shop = shopOf('fenced')
    expect((await shop.purchase('w-1', 'h')).kind).toBe('sold-out')
    await prisma.product.update({ where: { sku: 'w-1' }, data: { stock: { increment: 1 } } })
    const again = await counted(() => shop.purchase('w-1', 'i'))
    expect(again.result).toMatchObject({ kind: 'ordered', stockLeft: 0 })
    expect(again.acquires).toEqual(['product:w-1'])
  })
})

describe('a payment', () => {
  it.each(['fenced', 'lock'] as const)('%s: a repeat of a paid order is answered from the order: one SELECT, no lock', async (mode) => {
    const shop = shopOf(mode)
    const bought = await shop.purchase('w-pay', `p-${mode}`)
    if (bought.kind !== 'ordered') throw new Error(bought.kind)
    expect(await shop.pay(bought.orderId)).toMatchObject({ kind: 'paid', amountCents: 250 })
    const repeat = await counted(() => shop.pay(bought.orderId))
    expect(repeat.result).toEqual({ kind: 'already-paid', orderId: bought.orderId })
    expect(repeat.acquires).toEqual([])
    expect(repeat.statements, repeat.statements.join('\n')).toHaveLength(1)
    expect(repeat.statements[0]).toMatch(/^SELECT /)
  })

  it.each(['fenced', 'lock'] as const)('%s: one SELECT, the intent in one UPDATE outside a transaction, the payment in one transaction; the product is not read', async (mode) => {
    const shop = shopOf(mode)
    const bought = await shop.purchase('w-pay', `q-${mode}`)
    if (bought.kind !== 'ordered') throw new Error(bought.kind)
    const paid = await counted(() => shop.pay(bought.orderId))
    expect(paid.result).toMatchObject({ kind: 'paid', amountCents: 250 })
    expect(paid.acquires).toEqual([`order:${bought.orderId}`])
    const kinds = paid.statements.map((s) => /^\w+/.exec(s)?.[0])
    expect(kinds, paid.statements.join('\n')).toEqual(['SELECT', 'UPDATE', 'UPDATE', 'INSERT', 'COMMIT'])
    expect(paid.statements.filter((s) => s.includes('FROM "Product"'))).toEqual([])
    const order = await prisma.order.findUniqueOrThrow({ where: { id: bought.orderId } })
    expect(order).toMatchObject({ status: 'paid', paymentKey: order.reference, amountCents: 250 })
    expect(order.paymentIntentAt).not.toBeNull()
  })

  /**
   * The first delivery holds the order's lock, its intent recorded, and calls the gateway: there,
   * before its charge is sent, the duplicate is delivered to another instance (its own client and
   * Locker) and answered. What the duplicate sent, and what was charged and recorded.
   */
  async function duplicateDuringTheCharge(mode: ProtectionMode) {
    const dupStatements: string[] = []
    const dupLockEvents: string[] = []
    const adapter = new PrismaPg({ connectionString: database.connectionString, max: 2 }, { schema })
    const dupClient = new PrismaClient({ adapter, log: [{ emit: 'event', level: 'query' }] })
    dupClient.$on('query', (event) => dupStatements.push(event.query.replaceAll(`"${schema}".`, '')))
    const dupLocker = new Locker(redis, { prefix: `${runId}:` })
    dupLocker.listen((event: LockEvent) => void dupLockEvents.push(event.type))
    try {
      const limits = { maxWait: 5_000, timeout: 5_000 }
      const stores = shopStores(dupClient, fencedShopClient(dupClient), limits)
      const dup = new ShopService({ db: dupClient, protection: createProtection(mode, { stores, locker: dupLocker, ttlMs: 5_000, waitMs: 5_000 }), gateway: httpGateway({ url: gateway.url }), instanceId: 'dup' })
      const bought = await shopOf(mode).purchase('w-pay', `dup-${mode}`)
      if (bought.kind !== 'ordered') throw new Error(bought.kind)
      const real = httpGateway({ url: gateway.url })
      let duplicate: PaymentResult | undefined
      const holding: PaymentGateway = {
        ...real,
        async charge(request, protect) {
          duplicate = await dup.pay(bought.orderId)
          return real.charge(request, protect)
        },
      }
      const first = new ShopService({
        db: prisma,
        protection: createProtection(mode, { stores: shopStores(prisma, fencedShopClient(prisma), limits), locker, ttlMs: 5_000, waitMs: 5_000 }),
        gateway: holding,
        instanceId: 'first',
      })
      const paid = await first.pay(bought.orderId)
      const { orderId } = bought
      return {
        orderId,
        paid,
        duplicate,
        dupKinds: dupStatements.map((q) => /^\w+/.exec(q)?.[0]),
        dupLockEvents,
        charges: await prisma.gatewayCharge.count({ where: { orderId } }),
        payments: await prisma.payment.count({ where: { orderId } }),
      }
    } finally {
      await dupLocker.close()
      await dupClient.$disconnect()
    }
  }

  it.each(['fenced', 'lock'] as const)('%s: a duplicate delivered while the first holds the order’s lock is answered in-progress after one SELECT and one try of the lock: nothing charged, nothing written by it; the first pays once', async (mode) => {
    const r = await duplicateDuringTheCharge(mode)
    expect(r.duplicate).toEqual({ kind: 'in-progress', orderId: r.orderId })
    expect(r.dupKinds).toEqual(['SELECT'])
    // One try: found held, given up at once (no wait, no grant, no release).
    expect(r.dupLockEvents).toEqual(['contended', 'timeout'])
    expect(r.paid).toMatchObject({ kind: 'paid', orderId: r.orderId })
    expect(r.charges).toBe(1)
    expect(r.payments).toBe(1)
  })

  it('control: unsafe (no lock) — the same duplicate pays the order again, the buyer is charged twice', async () => {
    const r = await duplicateDuringTheCharge('unsafe')
    expect(r.duplicate).toMatchObject({ kind: 'paid' })
    expect(r.paid).toMatchObject({ kind: 'paid' })
    expect(r.charges).toBe(2)
    expect(r.payments).toBe(2)
  })

  it('fenced: the intent of an order whose fence holds a newer token is refused, nothing written', async () => {
    const shop = shopOf('fenced')
    const bought = await shop.purchase('w-pay', 'r')
    if (bought.kind !== 'ordered') throw new Error(bought.kind)
    // A newer holder raised the order's fence meanwhile (a token no lock of this test reaches).
    await prisma.order.update({ where: { id: bought.orderId }, data: { fenceToken: 1n << 60n } })
    await expect(shop.pay(bought.orderId)).rejects.toMatchObject({ name: 'StaleFencingTokenError' })
    expect(await prisma.order.findUniqueOrThrow({ where: { id: bought.orderId } })).toMatchObject({ status: 'pending', paymentKey: null })
  })
})
