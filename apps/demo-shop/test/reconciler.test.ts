// Issue 26, on the real database, the real gateway (its app and ledger) and the real lock: money
// that moved and was never recorded. Each case is what today's shop got wrong, counted in the
// gateway's ledger and the shop's tables, with the reconciler that repairs it and a control.
import { Locker } from '@fencelock/lock'
import { Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createPrisma, dropShopSchema, prepareShopSchema, type DatabaseLocation } from '../src/database.js'
import { GatewayError, httpGateway, type PaymentGateway } from '../src/payment-gateway.js'
import {
  createProtection,
  fencedShopClient,
  shopStores,
  type Protection,
  type ProtectionMode,
} from '../src/protection.js'
import { Reconciler } from '../src/reconciler.js'
import { countShop } from '../src/shop-counts.js'
import { ShopService } from '../src/shop-service.js'
import { startTestGateway, type TestGateway } from './gateway-server.js'
import { REDIS_URL, testDatabase, uniqueRun } from './services.js'

const PRICE = 4_999
const { runId, schema } = uniqueRun('reconcile')
const database = testDatabase(schema)
let gateway: TestGateway
let prisma: ReturnType<typeof createPrisma>
let redis: Redis
let locker: Locker
let skuCount = 0

beforeAll(async () => {
  await prepareShopSchema(database, [])
  prisma = createPrisma(database, 8)
  gateway = await startTestGateway(database)
  redis = new Redis(REDIS_URL)
  locker = new Locker(redis, { prefix: `${runId}:`, ttlMs: 1_000, waitMs: 10_000 })
})

afterAll(async () => {
  await locker?.close()
  redis?.disconnect()
  await gateway?.close()
  await prisma?.$disconnect()
  await dropShopSchema(database)
})

function protection(mode: ProtectionMode, db = prisma, lockerOf = locker): Protection {
  const stores = shopStores(db, fencedShopClient(db), { maxWait: 5_000, timeout: 5_000 })
  return createProtection(mode, { stores, locker: lockerOf, ttlMs: 1_000, waitMs: 10_000 })
}

/** The real gateway, or one whose charge "dies" (throws) before it is sent or right after its answer — the process is gone. */
function gatewayDying(where?: 'before-charge' | 'after-charge', url = gateway.url): PaymentGateway {
  const real = httpGateway({ url })
  return {
    authorize: (r) => real.authorize(r),
    findCharge: (k, f) => real.findCharge(k, f),
    async charge(request, protect) {
      if (where === 'before-charge') throw new Error('killed before the charge was sent')
      const answer = await real.charge(request, protect)
      if (where === 'after-charge') throw new Error('killed after the gateway answered, before the payment row')
      return answer
    },
  }
}

/** A product of its own per test (the counts below are per schema, so each test reads its own order's rows). */
async function newProduct(stock = 10): Promise<string> {
  const sku = `sku-${++skuCount}`
  await prisma.product.create({ data: { sku, name: sku, priceCents: PRICE, stock } })
  return sku
}

async function ordered(shop: ShopService, sku: string): Promise<number> {
  const bought = await shop.purchase(sku, 'buyer-1')
  if (bought.kind !== 'ordered') throw new Error(`purchase: ${bought.kind}`)
  return bought.orderId
}

const reconcilerOf = (mode: ProtectionMode = 'fenced') =>
  new Reconciler({ db: prisma, protection: protection(mode), gateway: gatewayDying(), instanceId: 'test', minAgeMs: 0 })

const money = async (orderId: number) => ({
  order: await prisma.order.findUniqueOrThrow({ where: { id: orderId } }),
  charges: await prisma.gatewayCharge.findMany({ where: { orderId } }),
  payments: await prisma.payment.findMany({ where: { orderId } }),
})

describe('1. an instance killed after the charge (fenced)', () => {
  it('is counted (charged, order not paid), and the reconciler records the charge as the payment', async () => {
    const sku = await newProduct()
    const dying = new ShopService({
      db: prisma,
      protection: protection('fenced'),
      gateway: gatewayDying('after-charge'),
      instanceId: 'a',
    })
    const orderId = await ordered(dying, sku)
    await expect(dying.pay(orderId)).rejects.toThrow(/killed after/)

    const before = await money(orderId)
    expect(before.charges).toHaveLength(1)
    expect(before.order).toMatchObject({ status: 'pending', paymentKey: before.order.reference })
    // Today's report said "no violation" here: the ledger against the orders says otherwise.
    const counted = await countShop(prisma, schema)
    expect(counted.chargedUnpaidOrders).toBeGreaterThanOrEqual(1)
    expect(counted.violations).toBeGreaterThanOrEqual(1)

    expect(await reconcilerOf().settle(orderId)).toBe('paid')
    const after = await money(orderId)
    expect(after.order.status).toBe('paid')
    expect(after.charges).toHaveLength(1)
    expect(after.payments).toHaveLength(1)
    expect(after.payments[0]).toMatchObject({
      gatewayChargeId: after.charges[0]?.chargeId,
      amountCents: PRICE,
      instance: 'test/reconciler',
    })
  })

  it('an intent with no charge: the order is cancelled and its unit returned to the stock', async () => {
    const sku = await newProduct(10)
    const dying = new ShopService({
      db: prisma,
      protection: protection('fenced'),
      gateway: gatewayDying('before-charge'),
      instanceId: 'a',
    })
    const orderId = await ordered(dying, sku)
    await expect(dying.pay(orderId)).rejects.toThrow(/killed before/)
    expect((await prisma.product.findUniqueOrThrow({ where: { sku } })).stock).toBe(9)

    const pass = await reconcilerOf().runOnce()
    expect(pass.cancelled).toBeGreaterThanOrEqual(1)
    expect((await money(orderId)).order.status).toBe('cancelled')
    expect((await prisma.product.findUniqueOrThrow({ where: { sku } })).stock).toBe(10)
    // The buyer's retry finds a cancelled order: nothing is charged.
    const shop = new ShopService({
      db: prisma,
      protection: protection('fenced'),
      gateway: gatewayDying(),
      instanceId: 'b',
    })
    expect(await shop.pay(orderId)).toEqual({ kind: 'cancelled', orderId })
    expect((await money(orderId)).charges).toHaveLength(0)
  })

  it('leaves a young intent alone (a live payer may still hold it) and settles nothing twice', async () => {
    const sku = await newProduct()
    const dying = new ShopService({
      db: prisma,
      protection: protection('fenced'),
      gateway: gatewayDying('after-charge'),
      instanceId: 'a',
    })
    const orderId = await ordered(dying, sku)
    await expect(dying.pay(orderId)).rejects.toThrow()
    const young = new Reconciler({
      db: prisma,
      protection: protection('fenced'),
      gateway: gatewayDying(),
      instanceId: 'test',
      minAgeMs: 60_000,
    })
    await young.runOnce()
    expect((await money(orderId)).order.status).toBe('pending')
    expect(await reconcilerOf().settle(orderId)).toBe('paid')
    expect(await reconcilerOf().settle(orderId)).toBe('already-settled')
    expect((await money(orderId)).payments).toHaveLength(1)
  })
})

/** A holder of the order's lock with an older token, frozen before its charge reaches the gateway, while the reconciler settles the order (cancels it, by default). */
async function staleChargeAfterCancel(mode: 'fenced' | 'lock', reconciler = reconcilerOf(mode)) {
  const sku = await newProduct()
  const shop = new ShopService({ db: prisma, protection: protection(mode), gateway: gatewayDying(), instanceId: 'a' })
  const orderId = await ordered(shop, sku)
  const old = await locker.acquire(`order:${orderId}`)
  await old.release()
  const stores = shopStores(prisma, fencedShopClient(prisma), { maxWait: 5_000, timeout: 5_000 })
  const granted = {
    using: (resource: string, fn: (lock: { token: bigint; resource: string }) => Promise<unknown>) =>
      fn({ token: old.token, resource }),
  }
  let reached!: () => void
  const atCharge = new Promise<void>((r) => (reached = r))
  let resume!: () => void
  const resumed = new Promise<void>((r) => (resume = r))
  const real = httpGateway({ url: gateway.url })
  const frozen: PaymentGateway = {
    ...real,
    async charge(request, protect) {
      reached()
      await resumed
      return real.charge(request, protect)
    },
  }
  const holder = new ShopService({
    db: prisma,
    protection: createProtection(mode, { stores, locker: granted as never, ttlMs: 1_000, waitMs: 1_000 }),
    gateway: frozen,
    instanceId: 'old',
  })
  const paying = holder.pay(orderId).catch((error: unknown) => error)
  await atCharge
  const settled = await reconciler.settle(orderId)
  resume()
  return { orderId, shop, settled, holder: await paying, ...(await money(orderId)) }
}

describe('a stale holder’s charge landing after the reconciler cancelled the order', () => {
  it('fenced: the reconciler’s lookup raised the gateway’s fence, the late charge is refused (409), nothing is charged', async () => {
    const r = await staleChargeAfterCancel('fenced')
    expect(r.settled).toBe('cancelled')
    expect(r.holder).toBeInstanceOf(GatewayError)
    expect((r.holder as GatewayError).isStaleToken).toBe(true)
    expect(r.charges).toHaveLength(0)
    expect(r.order.status).toBe('cancelled')
  })

  it('control, lock only: the late charge lands after the cancel, and the stale holder marks the cancelled order paid — its unit returned to the stock and sold', async () => {
    const r = await staleChargeAfterCancel('lock')
    expect(r.settled).toBe('cancelled')
    expect(r.charges).toHaveLength(1)
    expect(r.order.status).toBe('paid')
    const product = await prisma.product.findUniqueOrThrow({ where: { id: r.order.productId } })
    expect(product.stock).toBe(10)
  })
})

describe('a payer frozen past its lease, its intent recorded and its charge not sent (fenced)', () => {
  // The queue delivers the payment again (another instance, a newer token) after the lease: the
  // reconciler must not take the order from under that delivery.
  const patient = () =>
    new Reconciler({ db: prisma, protection: protection('fenced'), gateway: gatewayDying(), instanceId: 'test', minAgeMs: 0, cancelIntentAfterMs: 60_000 })

  it('the reconciler leaves the young intent to the redelivery, which pays it; the frozen payer’s charge is refused when it wakes', async () => {
    const r = await staleChargeAfterCancel('fenced', patient())
    expect(r.settled).toBe('waiting')
    expect(r.order.status).toBe('pending')
    // The reconciler's lock and lookup raised both fences: the frozen payer charges nothing.
    expect((r.holder as GatewayError).isStaleToken).toBe(true)
    expect(r.charges).toHaveLength(0)
    // The queue's redelivery pays it: one charge, one payment, the unit stays sold.
    expect(await r.shop.pay(r.orderId)).toMatchObject({ kind: 'paid', orderId: r.orderId })
    const after = await money(r.orderId)
    expect(after.order.status).toBe('paid')
    expect(after.charges).toHaveLength(1)
    expect(after.payments).toHaveLength(1)
    expect((await prisma.product.findUniqueOrThrow({ where: { id: r.order.productId } })).stock).toBe(9)
    // A pass that cancels every intent (the end of a sale's, age 0) finds nothing left to do.
    expect(await patient().settle(r.orderId)).toBe('already-settled')
  })

  it('control, cancelled after one lease (the earlier rule): the redelivery finds the order cancelled, the buyer told "ordered" loses the unit', async () => {
    const r = await staleChargeAfterCancel('fenced')
    expect(r.settled).toBe('cancelled')
    expect(await r.shop.pay(r.orderId)).toEqual({ kind: 'cancelled', orderId: r.orderId })
    expect((await money(r.orderId)).charges).toHaveLength(0)
    expect((await prisma.product.findUniqueOrThrow({ where: { id: r.order.productId } })).stock).toBe(10)
  })

  it('an intent older than cancelIntentAfterMs is cancelled, and a pass of age 0 cancels every one', async () => {
    const sku = await newProduct(10)
    const dying = new ShopService({ db: prisma, protection: protection('fenced'), gateway: gatewayDying('before-charge'), instanceId: 'a' })
    const orderId = await ordered(dying, sku)
    await expect(dying.pay(orderId)).rejects.toThrow(/killed before/)
    const reconciler = new Reconciler({ db: prisma, protection: protection('fenced'), gateway: gatewayDying(), instanceId: 'test', minAgeMs: 1, cancelIntentAfterMs: 60_000 })
    await new Promise((r) => setTimeout(r, 5))
    const pass = await reconciler.runOnce()
    expect(pass.waiting).toBeGreaterThanOrEqual(1)
    expect((await money(orderId)).order.status).toBe('pending')
    const last = await reconciler.runOnce(0)
    expect(last.cancelled).toBeGreaterThanOrEqual(1)
    expect((await money(orderId)).order.status).toBe('cancelled')
    expect((await prisma.product.findUniqueOrThrow({ where: { sku } })).stock).toBe(10)
  })
})

describe('3. the amount is part of the recorded intent', () => {
  it('a price change after the order: the retry replays the first charge (no 422), the order is paid its own amount', async () => {
    const sku = await newProduct()
    const dying = new ShopService({
      db: prisma,
      protection: protection('fenced'),
      gateway: gatewayDying('after-charge'),
      instanceId: 'a',
    })
    const orderId = await ordered(dying, sku)
    await expect(dying.pay(orderId)).rejects.toThrow()
    await prisma.product.update({ where: { sku }, data: { priceCents: 5_999 } })
    const shop = new ShopService({
      db: prisma,
      protection: protection('fenced'),
      gateway: gatewayDying(),
      instanceId: 'b',
    })
    expect(await shop.pay(orderId)).toMatchObject({ kind: 'paid', amountCents: PRICE })
    const r = await money(orderId)
    expect(r.charges.map((c) => c.amountCents)).toEqual([PRICE])
    expect(r.payments.map((p) => p.amountCents)).toEqual([PRICE])
  })

  it('a 422 idempotency_key_reused is a reconcile case, not a retry: the reconciler records what the gateway holds, and the other amount is counted', async () => {
    const sku = await newProduct()
    const shop = new ShopService({
      db: prisma,
      protection: protection('fenced'),
      gateway: gatewayDying(),
      instanceId: 'b',
    })
    const orderId = await ordered(shop, sku)
    const { reference } = await prisma.order.findUniqueOrThrow({ where: { id: orderId } })
    // The gateway already holds another call under the order's key (another amount).
    await httpGateway({ url: gateway.url }).charge({ orderId, amountCents: 1_234 }, { idempotencyKey: reference })
    expect(await shop.pay(orderId)).toEqual({ kind: 'reconciling', orderId })
    expect(await reconcilerOf().settle(orderId)).toBe('paid')
    const r = await money(orderId)
    expect(r.payments.map((p) => p.amountCents)).toEqual([1_234])
    expect((await countShop(prisma, schema)).amountMismatchOrders).toBeGreaterThanOrEqual(1)
  })
})

describe('2. keys are never reused after a schema reset', () => {
  it('an old charge that lands after the reset (long-lived gateway) does not pay the new order 1', async () => {
    const own = uniqueRun('reconcile-reset')
    const location: DatabaseLocation = testDatabase(own.schema)
    await prepareShopSchema(location, [{ sku: 'p', name: 'P', priceCents: PRICE, stock: 5 }])
    const db = createPrisma(location, 4)
    const gw = await startTestGateway(location)
    const ownLocker = new Locker(redis, { prefix: `${own.runId}:`, ttlMs: 1_000, waitMs: 10_000 })
    try {
      const shop = new ShopService({
        db,
        protection: protection('fenced', db, ownLocker),
        gateway: gatewayDying(undefined, gw.url),
        instanceId: 'x',
      })
      const first = await ordered(shop, 'p')
      const oldOrder = await db.order.findUniqueOrThrow({ where: { id: first } })
      await prepareShopSchema(location, [{ sku: 'p', name: 'P', priceCents: PRICE, stock: 5 }])
      // The killed shop's charge, in flight during the reset, lands now under the old order's key.
      const late = await httpGateway({ url: gw.url }).charge(
        { orderId: oldOrder.id, amountCents: PRICE },
        { idempotencyKey: oldOrder.paymentKey ?? oldOrder.reference },
      )
      const again = await ordered(shop, 'p')
      expect(again).toBe(oldOrder.id)
      const paid = await shop.pay(again)
      expect(paid).toMatchObject({ kind: 'paid' })
      expect(paid.kind === 'paid' && paid.chargeId).not.toBe(late.chargeId)
      const charges = await db.gatewayCharge.findMany({ where: { orderId: again }, orderBy: { id: 'asc' } })
      expect(charges).toHaveLength(2)
      // The old charge belongs to no order of the new shop: counted, never taken for the new buyer's payment.
      const counted = await countShop(db, own.schema)
      expect(counted.unmatchedCharges).toBe(1)
      expect(counted.doubleChargedOrders).toBe(1)
    } finally {
      await ownLocker.close()
      await gw.close()
      await db.$disconnect()
      await dropShopSchema(location)
    }
  })
})

describe('6. an order left pending without an intent (issue 34 item 3)', () => {
  it('is unsettled past its abandon age, a violation until the reconciler cancels it and returns its unit; a young one is left alone', async () => {
    const sku = await newProduct(3)
    const shop = new ShopService({ db: prisma, protection: protection('fenced'), gateway: gatewayDying(), instanceId: 'a' })
    // Ordered, and the instance died before the payment's intent: nothing more happens to it.
    const orderId = await ordered(shop, sku)
    const others = (await countShop(prisma, schema, { abandonedAfterMs: 0 })).unsettledOrders - 1
    expect((await countShop(prisma, schema, { abandonedAfterMs: 3_600_000 })).unsettledOrders, 'young: not abandoned yet').toBe(0)
    const counted = await countShop(prisma, schema)
    expect(counted.unsettledOrders).toBe(others + 1)
    expect(counted.violations).toBeGreaterThanOrEqual(1)

    const patient = new Reconciler({ db: prisma, protection: protection('fenced'), gateway: gatewayDying(), instanceId: 'test', minAgeMs: 1_000, abandonedAfterMs: 3_600_000 })
    expect((await patient.runOnce()).cancelled).toBe(0)
    expect((await money(orderId)).order.status).toBe('pending')

    const pass = await reconcilerOf().runOnce()
    expect(pass.cancelled).toBeGreaterThanOrEqual(1)
    expect((await money(orderId)).order).toMatchObject({ status: 'cancelled', paymentKey: null })
    expect((await prisma.product.findUniqueOrThrow({ where: { sku } })).stock).toBe(3)
    expect((await countShop(prisma, schema)).unsettledOrders).toBe(0)
    // The buyer's late payment finds it cancelled: no lock, nothing charged.
    expect(await shop.pay(orderId)).toEqual({ kind: 'cancelled', orderId })
    expect((await money(orderId)).charges).toHaveLength(0)
  })

  it('a payer that had the lock before the cancel and records its intent after it is refused by the fence', async () => {
    const sku = await newProduct(3)
    const shop = new ShopService({ db: prisma, protection: protection('fenced'), gateway: gatewayDying(), instanceId: 'a' })
    const orderId = await ordered(shop, sku)
    // An older holder of the order's lock (its token minted before the reconciler's).
    // Its lease runs out; the reconciler's acquire waits for that, then takes a newer token.
    const stale = await locker.acquire(`order:${orderId}`, { ttlMs: 50 })
    expect(await reconcilerOf().settle(orderId)).toBe('cancelled')
    const late = fencedShopClient(prisma).$fenced(stale.token)
    await expect(late.order.update({ where: { id: orderId }, data: { paymentKey: 'late', paymentIntentAt: new Date() } })).rejects.toMatchObject({ name: 'StaleFencingTokenError' })
    await stale.release().catch(() => {})
  })
})

describe('7. charges whose payment is in flight', () => {
  it('a charged order whose intent is younger than the lease is in flight, not a violation; older, it is charged-not-paid', async () => {
    const sku = await newProduct()
    const dying = new ShopService({ db: prisma, protection: protection('fenced'), gateway: gatewayDying('after-charge'), instanceId: 'a' })
    const orderId = await ordered(dying, sku)
    await expect(dying.pay(orderId)).rejects.toThrow(/killed after/)
    const settled = await countShop(prisma, schema)
    const live = await countShop(prisma, schema, { inFlightMs: 3_600_000 })
    expect(live.chargedUnpaidInFlight).toBeGreaterThanOrEqual(1)
    expect(live.chargedUnpaidOrders).toBe(settled.chargedUnpaidOrders - live.chargedUnpaidInFlight)
    expect(live.violations).toBe(settled.violations - live.chargedUnpaidInFlight)
    expect(settled.chargedUnpaidInFlight).toBe(0)
    expect(await reconcilerOf().settle(orderId)).toBe('paid')
    expect((await countShop(prisma, schema, { inFlightMs: 3_600_000 })).chargedUnpaidInFlight).toBe(0)
  })
})

/**
 * A payer that read the order (pending) before taking the order's lock, frozen between the read and
 * the lock while the reconciler cancels the order. The reconciler's lookup raised the gateway's fence
 * for the order to its token; the payer's lock, taken after the reconciler's, carries a newer one.
 */
async function payerFrozenBeforeItsLock() {
  const sku = await newProduct(5)
  const shop = new ShopService({ db: prisma, protection: protection('fenced'), gateway: gatewayDying(), instanceId: 'a' })
  const orderId = await ordered(shop, sku)
  const real = protection('fenced')
  let reached!: () => void
  const atLock = new Promise<void>((r) => (reached = r))
  let resume!: () => void
  const resumed = new Promise<void>((r) => (resume = r))
  // The same protection, held at the door: the payer has read the order and not yet asked for the lock.
  const held: Protection = {
    mode: real.mode,
    async run(resource, fn, options) {
      reached()
      await resumed
      return real.run(resource, fn, options)
    },
  }
  const payer = new ShopService({ db: prisma, protection: held, gateway: gatewayDying(), instanceId: 'b' })
  const paying = payer.pay(orderId)
  await atLock
  const settled = await reconcilerOf().settle(orderId)
  return { sku, orderId, settled, resume, paying }
}

describe('8. a payer frozen between its read of the order and its lock, while the reconciler cancels the order (issue 34: why the intent stays)', () => {
  it('fenced: the intent, written under the lock, matches no pending order — nothing is charged, the order stays cancelled', async () => {
    const r = await payerFrozenBeforeItsLock()
    expect(r.settled).toBe('cancelled')
    r.resume()
    expect(await r.paying).toEqual({ kind: 'cancelled', orderId: r.orderId })
    const after = await money(r.orderId)
    expect(after.charges).toHaveLength(0)
    expect(after.order.status).toBe('cancelled')
    expect((await prisma.product.findUniqueOrThrow({ where: { sku: r.sku } })).stock).toBe(5)
  })

  it('control, the payment without the intent (its read before the lock, then the charge with the key and its token): the gateway’s fence, raised by the reconciler’s lookup, lets the newer token charge the cancelled order', async () => {
    const r = await payerFrozenBeforeItsLock()
    expect(r.settled).toBe('cancelled')
    // What a payment that kept no intent does next: it takes the lock (a token newer than the
    // reconciler's) and charges the order it read as pending, under the order's key.
    const { reference, amountCents } = await prisma.order.findUniqueOrThrow({ where: { id: r.orderId } })
    const charged = await locker.using(`order:${r.orderId}`, (lock) =>
      httpGateway({ url: gateway.url }).charge({ orderId: r.orderId, amountCents: amountCents ?? PRICE }, { idempotencyKey: reference, fencing: lock }),
    )
    expect(charged.replayed).toBe(false)
    const after = await money(r.orderId)
    expect(after.charges).toHaveLength(1)
    expect(after.order.status).toBe('cancelled')
    // Money moved for an order whose unit went back to the stock: counted.
    expect((await countShop(prisma, schema)).chargedUnpaidOrders).toBeGreaterThanOrEqual(1)
    r.resume()
    await r.paying.catch(() => {})
  })
})
