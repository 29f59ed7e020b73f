// One sale of the floor (issue 34): the flash sale's crowd (the shop's own load generator, the same
// seed, so the same buyers, the same duplicate and retried payment deliveries) against N floor
// instances (./floor-instance.ts) and the floor's gateway (./floor-gateway.ts), on a fresh schema
// of the shop's (the same tables, migrations and database guard), counted afterwards by the
// shop's countShop — the same truth as every shop sale: units sold, charges in the ledger,
// payments, paid orders, violations. Its progress has the shape of runFlashSale's, so
// ../support/shop-work.ts measures it the same way.
import { randomBytes } from 'node:crypto'
import { fileURLToPath } from 'node:url'
import { createPrisma, dropShopSchema, prepareShopSchema, type DatabaseLocation } from '@fencelock/demo-shop/database'
import { FLASH_SALE_DEFAULTS, type FlashSaleOptions, type FlashSaleProgress, type FlashSaleServices } from '@fencelock/demo-shop/flash-sale'
import { runLoad, type LoadTotals } from '@fencelock/demo-shop/load-generator'
import { seededRandom } from '@fencelock/demo-shop/random'
import { countShop } from '@fencelock/demo-shop/shop-counts'
import { Supervisor } from '@fencelock/demo-shop/supervisor'

const INSTANCE = fileURLToPath(new URL('./floor-instance.ts', import.meta.url))
const GATEWAY = fileURLToPath(new URL('./floor-gateway.ts', import.meta.url))

/** What a floor sale reports: the fields of the shop's report that bench:shop reads. */
export interface FloorReport {
  readonly sold: number
  readonly paidOrders: number
  readonly payments: number
  readonly gatewayCharges: number
  readonly doubleChargedOrders: number
  readonly violations: number
  /** Orders cancelled (the floor has no reconciler: 0 unless something else cancelled them). */
  readonly cancelledOrders: number
  readonly oversoldUnits: number
  /** Lock grants, summed over the instances. */
  readonly acquires: number
  readonly load: LoadTotals
}

/**
 * Runs one floor sale of `options` (instances, buyers, stock, concurrency, seed, ttlMs,
 * gatewayLatencyMs; the mode and chaos are the shop's and are ignored) on `services`.
 */
export async function runFloorSale(
  options: FlashSaleOptions,
  onProgress: (progress: FlashSaleProgress) => void,
  services: FlashSaleServices,
): Promise<FloorReport> {
  const redisUrl = services.redis?.url
  const connectionString = services.database?.connectionString
  if (redisUrl === undefined || connectionString === undefined) throw new Error('the floor needs the Redis and the database of the bench')
  const runId = `fl${Date.now().toString(36)}${randomBytes(3).toString('hex')}`
  const location: DatabaseLocation = { connectionString, schema: `floor_${runId}` }
  const cleanups: Array<() => Promise<void>> = []
  const progress = (p: Omit<FlashSaleProgress, 'buyers' | 'chaosCount'>) => onProgress({ ...p, buyers: options.buyers, chaosCount: 0 })
  try {
    progress({ phase: 'starting', done: 0 })
    const { sku, priceCents } = FLASH_SALE_DEFAULTS
    await prepareShopSchema(location, [{ sku, name: 'Flash-sale sneakers', priceCents, stock: options.stock }])
    cleanups.push(() => dropShopSchema(location))
    const common = { FLOOR_DATABASE_URL: connectionString, FLOOR_SCHEMA: location.schema }
    const gateway = await Supervisor.start({
      instances: 1,
      entry: GATEWAY,
      idPrefix: 'gateway-floor',
      stderr: 'inherit',
      env: { ...common, FLOOR_GATEWAY_LATENCY_MS: options.gatewayLatencyMs, FLOOR_DB_POOL_SIZE: '8' },
    })
    cleanups.push(() => gateway.stop())
    const gatewayUrl = gateway.instances[0]?.url
    if (gatewayUrl === undefined) throw new Error('the floor gateway did not start')
    const shop = await Supervisor.start({
      instances: options.instances,
      entry: INSTANCE,
      idPrefix: 'floor',
      stderr: 'inherit',
      env: {
        ...common,
        FLOOR_REDIS_URL: redisUrl,
        FLOOR_GATEWAY_URL: gatewayUrl,
        FLOOR_TTL_MS: String(options.ttlMs),
        FLOOR_LOCK_PREFIX: `floor:${runId}:`,
        FLOOR_DB_POOL_SIZE: '4',
      },
    })
    cleanups.push(() => shop.stop())
    const instances = shop.instances
    progress({ phase: 'selling', done: 0, instances, schema: location.schema })
    const load = await runLoad({
      targets: instances.map((i) => i.url),
      sku,
      buyers: options.buyers,
      concurrency: options.concurrency,
      random: seededRandom(options.seed),
      purchaseTimeoutMs: 120_000,
      paymentTimeoutMs: 2 * options.ttlMs,
      onProgress: (done, totals) => progress({ phase: 'selling', done, totals, instances }),
    })
    progress({ phase: 'draining', done: options.buyers, totals: load })
    await shop.stop()
    await gateway.stop()
    const acquires = [...shop.finalStats.values()].reduce((sum, stats) => sum + Number((stats as unknown as { floorGrants?: number }).floorGrants ?? 0), 0)
    progress({ phase: 'counting', done: options.buyers, totals: load })
    const db = createPrisma(location, 1)
    try {
      const counts = await countShop(db, location.schema)
      return {
        sold: counts.unitsSold,
        paidOrders: counts.paidOrders,
        payments: counts.payments,
        gatewayCharges: counts.gatewayCharges,
        doubleChargedOrders: counts.doubleChargedOrders,
        violations: counts.violations,
        cancelledOrders: counts.cancelledOrders,
        oversoldUnits: counts.oversoldUnits,
        acquires,
        load,
      }
    } finally {
      await db.$disconnect()
    }
  } finally {
    for (const cleanup of cleanups.reverse()) await cleanup().catch(() => {})
  }
}
