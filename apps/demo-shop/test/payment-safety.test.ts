// The payment's side effect outside the database, step by step, on the real database, the real
// gateway and tokens minted by the real lock. Holder A charges the order and freezes before it
// records the payment; its lease runs out and holder B (a newer token) finds the order unpaid
// and pays it. The test orders the two holders (what a lock hand-over does); the database and the
// gateway decide everything else, and every charge is counted in the gateway's ledger.
import { Locker } from '@fencelock/lock'
import { Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createPrisma, dropShopSchema, prepareShopSchema } from '../src/database.js'
import { GatewayError, httpGateway, type ChargeProtection, type PaymentGateway } from '../src/payment-gateway.js'
import { createProtection, fencedShopClient, shopStores, type Protection } from '../src/protection.js'
import { newOrderReference, ShopService } from '../src/shop-service.js'
import { startTestGateway, type TestGateway } from './gateway-server.js'
import { REDIS_URL, testDatabase, uniqueRun } from './services.js'

const { runId, schema } = uniqueRun('pay-safety')
const database = testDatabase(schema)
let gateway: TestGateway
let prisma: ReturnType<typeof createPrisma>
let redis: Redis
let locker: Locker

beforeAll(async () => {
  await prepareShopSchema(database, [{ sku: 'p-1', name: 'P', priceCents: 4_999, stock: 1_000 }])
  prisma = createPrisma(database, 6)
  gateway = await startTestGateway(database)
  redis = new Redis(REDIS_URL)
  locker = new Locker(redis, { prefix: `${runId}:` })
})

afterAll(async () => {
  await locker?.close()
  redis?.disconnect()
  await gateway?.close()
  await prisma?.$disconnect()
  await dropShopSchema(database)
})

/** Two real tokens of one resource, A's older than B's: a grant to A, its release, a grant to B. */
async function twoTokens(resource: string): Promise<[bigint, bigint]> {
  const a = await locker.acquire(resource)
  await a.release()
  const b = await locker.acquire(resource)
  await b.release()
  expect(b.token).toBeGreaterThan(a.token)
  return [a.token, b.token]
}

/** A holder of `token`: the shop's protection of a mode, handed the lock grant the test decided. */
function protectionWith(
  mode: 'lock' | 'fenced',
  token: bigint,
  outside?: (key: string, resource: string) => ChargeProtection,
): Protection {
  const stores = shopStores(prisma, fencedShopClient(prisma), { maxWait: 5_000, timeout: 5_000 })
  const granted = {
    using: (resource: string, fn: (lock: { token: bigint; resource: string }) => Promise<unknown>) =>
      fn({ token, resource }),
  }
  const inner = createProtection(mode, { stores, locker: granted as never, ttlMs: 1_000, waitMs: 1_000 })
  if (outside === undefined) return inner
  return {
    mode,
    run: (resource, fn) =>
      inner.run(resource, (guard) => fn({ ...guard, outsideCall: (key) => outside(key, resource) })),
  }
}

/** A gateway client that stops `where` the call (before it is sent, or after its answer) until `resume` is called. */
function freezing(where: 'before' | 'after'): { gateway: PaymentGateway; charged: Promise<void>; resume: () => void } {
  const real = httpGateway({ url: gateway.url })
  let resume!: () => void
  const resumed = new Promise<void>((r) => (resume = r))
  let charged!: () => void
  const reached = new Promise<void>((r) => (charged = r))
  return {
    resume,
    charged: reached,
    gateway: {
      authorize: (request) => real.authorize(request),
      findCharge: (key, fencing) => real.findCharge(key, fencing),
      async charge(request, protection) {
        if (where === 'before') {
          charged()
          await resumed
          return real.charge(request, protection)
        }
        const answer = await real.charge(request, protection)
        charged()
        await resumed
        return answer
      },
    },
  }
}

async function newOrder(): Promise<number> {
  const product = await prisma.product.findUniqueOrThrow({ where: { sku: 'p-1' } })
  const data = {
    productId: product.id,
    buyerId: 'b',
    quantity: 1,
    reference: newOrderReference(),
    amountCents: product.priceCents,
  }
  return (await prisma.order.create({ data })).id
}

/** A charges and freezes after the gateway answered; B pays meanwhile; A wakes. What landed where. */
async function chargeFreezeAndPayAgain(
  protections: (orderId: number, a: bigint, b: bigint) => [Protection, Protection],
) {
  const orderId = await newOrder()
  const [tokenA, tokenB] = await twoTokens(`order:${orderId}`)
  const [protectA, protectB] = protections(orderId, tokenA, tokenB)
  const frozen = freezing('after')
  const shopA = new ShopService({ db: prisma, protection: protectA, gateway: frozen.gateway, instanceId: 'a' })
  const shopB = new ShopService({
    db: prisma,
    protection: protectB,
    gateway: httpGateway({ url: gateway.url }),
    instanceId: 'b',
  })
  const payingA = shopA.pay(orderId).then(
    (value) => ({ value, error: undefined }),
    (error: unknown) => ({ value: undefined, error }),
  )
  await frozen.charged
  const b = await shopB.pay(orderId)
  frozen.resume()
  const a = await payingA
  return {
    a,
    b,
    charges: await prisma.gatewayCharge.findMany({ where: { orderId } }),
    payments: await prisma.payment.findMany({ where: { orderId } }),
    order: await prisma.order.findUniqueOrThrow({ where: { id: orderId } }),
  }
}

describe('a holder that charged and froze before recording the payment', () => {
  it('fenced: the newer holder’s charge collapses into the first one (idempotency key); the older holder’s payment row is refused', async () => {
    const r = await chargeFreezeAndPayAgain((_id, a, b) => [protectionWith('fenced', a), protectionWith('fenced', b)])
    expect(r.charges).toHaveLength(1)
    expect(r.b).toMatchObject({ kind: 'paid', chargeId: r.charges[0]?.chargeId })
    expect(r.a.error).toMatchObject({ name: 'StaleFencingTokenError' })
    expect(r.payments).toHaveLength(1)
    expect(r.payments[0]?.gatewayChargeId).toBe(r.charges[0]?.chargeId)
    // The key is the order's random reference, minted with the order (never its id, never the token).
    expect(r.order).toMatchObject({ status: 'paid', paymentKey: r.order.reference })
    expect(r.order.reference).toMatch(/^ord_[A-Za-z0-9_-]{22}$/)
    expect(r.charges[0]?.idempotencyKey).toBe(r.order.reference)
  })

  it('control: the database fence alone (no key, no token at the gateway) — the shop records one payment, the buyer is charged twice', async () => {
    const r = await chargeFreezeAndPayAgain((_id, a, b) => [
      protectionWith('fenced', a, () => ({})),
      protectionWith('fenced', b, () => ({})),
    ])
    expect(r.a.error).toMatchObject({ name: 'StaleFencingTokenError' })
    expect(r.payments).toHaveLength(1)
    expect(r.charges).toHaveLength(2)
  })

  it('control: the fencing token alone at the gateway (no idempotency key) — the newer holder is legitimately newer and charges again', async () => {
    const tokenOnly = (_key: string, resource: string, token: bigint): ChargeProtection => ({
      fencing: { token, resource },
    })
    const r = await chargeFreezeAndPayAgain((_id, a, b) => [
      protectionWith('fenced', a, (k, res) => tokenOnly(k, res, a)),
      protectionWith('fenced', b, (k, res) => tokenOnly(k, res, b)),
    ])
    expect(r.charges).toHaveLength(2)
  })

  it('control: the lock alone — charged twice, and two payments recorded', async () => {
    const r = await chargeFreezeAndPayAgain((_id, a, b) => [protectionWith('lock', a), protectionWith('lock', b)])
    expect(r.charges).toHaveLength(2)
    expect(r.payments).toHaveLength(2)
  })
})

describe('a holder that froze before its charge reached the gateway', () => {
  it('fenced: the newer holder pays; the older holder’s late charge is refused by the gateway (409 stale token), nothing more is charged', async () => {
    const orderId = await newOrder()
    const [tokenA, tokenB] = await twoTokens(`order:${orderId}`)
    const frozen = freezing('before')
    const shopA = new ShopService({
      db: prisma,
      protection: protectionWith('fenced', tokenA),
      gateway: frozen.gateway,
      instanceId: 'a',
    })
    const shopB = new ShopService({
      db: prisma,
      protection: protectionWith('fenced', tokenB),
      gateway: httpGateway({ url: gateway.url }),
      instanceId: 'b',
    })
    const payingA = shopA.pay(orderId).catch((error: unknown) => error)
    await frozen.charged
    expect(await shopB.pay(orderId)).toMatchObject({ kind: 'paid' })
    frozen.resume()
    const a = await payingA
    expect(a).toBeInstanceOf(GatewayError)
    expect((a as GatewayError).isStaleToken).toBe(true)
    expect(await prisma.gatewayCharge.count({ where: { orderId } })).toBe(1)
    expect(await prisma.payment.count({ where: { orderId } })).toBe(1)
  })
})
