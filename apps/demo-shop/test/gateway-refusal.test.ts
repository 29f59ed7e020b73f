// Issue 26 case 5, on a real instance (buildInstance: its Redis lock, Prisma client and metrics),
// the real gateway and PostgreSQL: the gateway refuses the instance's charge because it has seen
// a newer token for the order's lock (set here in its GatewayFence, as a newer holder's call
// would). The buyer is told the gateway refused an old token (not "the database refused"), and
// the refusal counts in the instance's stale writes rejected and in the fencing-rejection metric.
import type { AddressInfo } from 'node:net'
import type { Server } from 'node:http'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { createPrisma, dropShopSchema, prepareShopSchema } from '../src/database.js'
import { buildInstance, type Instance } from '../src/instance.js'
import { readInstanceConfig } from '../src/instance-config.js'
import { startTestGateway, type TestGateway } from './gateway-server.js'
import { REDIS_URL, testDatabase, uniqueRun } from './services.js'

const { runId, schema } = uniqueRun('gw-refusal')
const database = testDatabase(schema)
let instance: Instance
let gateway: TestGateway
let server: Server
let prisma: ReturnType<typeof createPrisma>
let base: string

beforeAll(async () => {
  await prepareShopSchema(database, [{ sku: 'flash-1', name: 'F', priceCents: 1_999, stock: 5 }])
  prisma = createPrisma(database, 1)
  gateway = await startTestGateway(database)
  const url = new URL(database.connectionString)
  url.searchParams.set('schema', schema)
  const config = readInstanceConfig({
    REDIS_URL,
    DATABASE_URL: url.toString(),
    SHOP_INSTANCE_ID: 'shop-refused',
    SHOP_MODE: 'fenced',
    SHOP_RUN_ID: runId,
    SHOP_GATEWAY_URL: gateway.url,
    SHOP_DB_POOL_SIZE: '3',
    SHOP_RECONCILE_INTERVAL_MS: '0',
  })
  instance = await buildInstance(config)
  server = instance.app.listen(0, '127.0.0.1')
  await new Promise<void>((r) => server.once('listening', () => r()))
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
})

afterAll(async () => {
  server?.closeAllConnections()
  await new Promise((r) => server?.close(r))
  await instance?.close()
  await gateway?.close()
  await prisma?.$disconnect()
  await dropShopSchema(database)
})

const post = async (path: string) => {
  const res = await fetch(`${base}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ buyerId: 'b-1' }),
  })
  return { status: res.status, body: (await res.json()) as Record<string, unknown> }
}

it('a charge refused by the gateway (stale token) says so, and counts as a stale write rejected and in the metric', async () => {
  const bought = await post('/api/products/flash-1/purchase')
  expect(bought.status).toBe(201)
  const orderId = Number(bought.body.orderId)
  // A newer holder of order:<id> has called the gateway: its fence is far above any token of ours.
  await gateway.db.gatewayFence.create({ data: { resource: `order:${orderId}`, fenceToken: 2n ** 62n } })

  const paid = await post(`/api/orders/${orderId}/pay`)
  expect(paid.status).toBe(409)
  expect(paid.body.error).toBe('stale_write_rejected')
  expect(String(paid.body.message)).toMatch(/payment gateway refused a charge with an old fencing token/)
  expect(String(paid.body.message)).not.toMatch(/database/)
  expect(await prisma.gatewayCharge.count({ where: { orderId } })).toBe(0)

  expect(instance.stats().staleWritesRejected).toBe(1)
  const metrics = await (await fetch(`${base}/metrics`)).text()
  expect(metrics).toMatch(/fencelock_fencing_rejections_total\{model="GatewayCharge"\} 1/)
})

it('violations count each broken invariant once: a sell-out with one unit too many is 1 oversold and 1 lost update, 1 violation', async () => {
  const { countShop } = await import('../src/shop-counts.js')
  const product = await prisma.product.findUniqueOrThrow({ where: { sku: 'flash-1' } })
  const sold = await prisma.order.count({ where: { productId: product.id } })
  // Units sold past the stock while the stock column says 0: what a stale read-modify-write leaves.
  for (let i = sold; i < 6; i++)
    await prisma.order.create({ data: { productId: product.id, buyerId: `x-${i}`, quantity: 1, amountCents: 1_999 } })
  await prisma.product.update({ where: { sku: 'flash-1' }, data: { stock: 0 } })
  // Counted as a live shop would (the orders just made, none yet abandoned without an intent).
  const counted = await countShop(prisma, schema, { abandonedAfterMs: 3_600_000 })
  expect(counted).toMatchObject({ unitsSold: 6, oversoldUnits: 1, lostUpdates: 1, unsettledOrders: 0, violations: 1 })
})
