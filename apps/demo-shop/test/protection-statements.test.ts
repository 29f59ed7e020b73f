// What `fenced` costs the shop's database next to `lock`, counted statement by statement on the
// real database (Prisma's query events; it logs COMMIT, not BEGIN, alike in both modes): each step
// carries the fence on a statement it runs anyway (src/protection.ts) — the purchase's read is the
// UPDATE that raises it, the payment's intent is one conditional UPDATE. docs/BENCHMARKS.md
// (written by bench/shop.bench.ts) says the same.
import { Locker } from '@fencelock/lock'
import { PrismaPg } from '@prisma/adapter-pg'
import { Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { PrismaClient } from '../../../generated/prisma/client.js'
import { dropShopSchema, prepareShopSchema } from '../src/database.js'
import { httpGateway } from '../src/payment-gateway.js'
import { createProtection, fencedShopClient, shopStores } from '../src/protection.js'
import { ShopService } from '../src/shop-service.js'
import { startTestGateway, type TestGateway } from './gateway-server.js'
import { REDIS_URL, testDatabase, uniqueRun } from './services.js'

const { runId, schema } = uniqueRun('statements')
const database = testDatabase(schema)
let gateway: TestGateway
let redis: Redis
let locker: Locker
let prisma: PrismaClient
let statements: string[] = []

/** A client on the test's schema that records each statement it sends in `statements`. */
function recordingClient(): PrismaClient {
  const adapter = new PrismaPg({ connectionString: database.connectionString, max: 3 }, { schema })
  const client = new PrismaClient({ adapter, log: [{ emit: 'event', level: 'query' }] })
  // The schema's name out, so a statement reads `UPDATE "Order" SET ...`.
  client.$on('query', (event) => statements.push(event.query.replaceAll(`"${schema}".`, '')))
  return client
}

beforeAll(async () => {
  await prepareShopSchema(database, [{ sku: 's-1', name: 'S', priceCents: 100, stock: 10 }])
  prisma = recordingClient()
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

/** The statements the shop's client sent for one purchase and its payment, in `mode`. */
async function sale(mode: 'lock' | 'fenced'): Promise<{ purchase: string[]; pay: string[] }> {
  const stores = shopStores(prisma, fencedShopClient(prisma), { maxWait: 5_000, timeout: 5_000 })
  const protection = createProtection(mode, { stores, locker, ttlMs: 5_000, waitMs: 5_000 })
  const shop = new ShopService({ db: prisma, protection, gateway: httpGateway({ url: gateway.url }), instanceId: 'statements' })
  statements = []
  const bought = await shop.purchase('s-1', `b-${mode}`)
  const purchase = statements
  statements = []
  if (bought.kind !== 'ordered') throw new Error(`expected an order, got ${bought.kind}`)
  expect(await shop.pay(bought.orderId)).toMatchObject({ kind: 'paid' })
  return { purchase, pay: statements }
}

describe('fenced mode costs the statements of lock mode', () => {
  it('a purchase and a payment: as many (the purchase reads with the UPDATE that raises the fence; the intent is one conditional UPDATE in both)', async () => {
    const lock = await sale('lock')
    const fenced = await sale('fenced')
    expect(fenced.purchase, fenced.purchase.join('\n')).toHaveLength(lock.purchase.length)
    const readsProduct = (s: string) => /^SELECT .*"Product"\."stock"/.test(s)
    expect(lock.purchase.filter(readsProduct)).toHaveLength(1)
    expect(fenced.purchase.filter(readsProduct), 'the product is read by the fence raise, not a SELECT').toEqual([])
    expect(fenced.pay, fenced.pay.join('\n')).toHaveLength(lock.pay.length)
    // The intent raises the order's fence in the UPDATE that records it.
    expect(fenced.pay.filter((s) => /^UPDATE "Order" SET "paymentKey" = .*"fenceToken" = \$\d+ WHERE/.test(s))).toHaveLength(1)
  })
})
