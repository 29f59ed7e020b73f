// The live shop with a payment gateway running already (docker-compose's `gateway` service): its
// instances charge that gateway, it forks none, and it leaves the gateway running when it stops.
// The given gateway keeps its ledger in a schema of its own here, so a charge found there was
// made through it and through nothing else.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createPrisma, dropShopSchema, prepareShopSchema } from '../src/database.js'
import { GatewayUnavailableError, startLiveShop, type LiveShop, type LiveShopOptions } from '../src/live-shop.js'
import { startTestGateway, type TestGateway } from './gateway-server.js'
import { REDIS_URL, testDatabase, uniqueRun } from './services.js'

const shopDatabase = testDatabase(uniqueRun('live-shop').schema)
const ledgerDatabase = testDatabase(uniqueRun('live-ledger').schema)
let gateway: TestGateway
let shop: LiveShop | undefined

const options = (over: Partial<LiveShopOptions>): LiveShopOptions => ({
  redisUrl: REDIS_URL,
  database: shopDatabase,
  instances: 1,
  mode: 'fenced',
  basePort: 0,
  host: '127.0.0.1',
  dbPoolSize: 2,
  ttlMs: 1_000,
  pauseEveryMs: 0,
  buyersPerDrop: 0,
  stockPerDrop: 3,
  seed: 1,
  ...over,
})

beforeAll(async () => {
  await prepareShopSchema(ledgerDatabase, [])
  gateway = await startTestGateway(ledgerDatabase)
})

afterAll(async () => {
  await shop?.stop()
  await gateway?.close()
  await dropShopSchema(shopDatabase)
  await dropShopSchema(ledgerDatabase)
})

describe('live shop with an external gateway', () => {
  it('charges the gateway it is given, forks none, and leaves it running when it stops', async () => {
    shop = await startLiveShop(options({ gatewayUrl: `${gateway.url}/`, buyersPerDrop: 12, stockPerDrop: 3 }))
    expect(shop.gateway).toEqual({ url: gateway.url, external: true })
    // The first drop's buyers pay: their charges land in the given gateway's ledger.
    await expect.poll(() => gateway.db.gatewayCharge.count(), { timeout: 60_000, interval: 250 }).toBeGreaterThan(0)
    await shop.stop()
    shop = undefined
    expect((await fetch(`${gateway.url}/healthz`)).status).toBe(200)
    // Nothing charged a gateway whose ledger is the shop's schema (a gateway it would have forked).
    const own = createPrisma(shopDatabase, 1)
    try {
      expect(await own.gatewayCharge.count()).toBe(0)
      expect(await own.order.count({ where: { status: 'paid' } })).toBeGreaterThan(0)
    } finally {
      await own.$disconnect()
    }
  }, 90_000)

  it('starts again on the same schema with an empty ledger: order ids start again at 1, so old charges would count as double charges', async () => {
    expect(await gateway.db.gatewayCharge.count()).toBeGreaterThan(0)
    await prepareShopSchema(ledgerDatabase, [])
    expect([await gateway.db.gatewayCharge.count(), await gateway.db.gatewayIdempotencyKey.count(), await gateway.db.gatewayFence.count()]).toEqual([0, 0, 0])
  })

  it('refuses a gateway that does not answer, before it starts any instance', async () => {
    const error = await startLiveShop(options({ gatewayUrl: 'http://127.0.0.1:9/', gatewayReadyTimeoutMs: 300 })).catch((e: unknown) => e)
    expect(error).toBeInstanceOf(GatewayUnavailableError)
    expect((error as GatewayUnavailableError).url).toBe('http://127.0.0.1:9')
  })
})
