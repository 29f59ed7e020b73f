// `node --import tsx bench/shop-work.ts [--buyers N] [--stock N] [--modes fenced,lock,floor] [--latency a-b]`:
// the work per unit sold of one flash sale per mode, or of the floor (./shop-floor), counted
// (./support/shop-work.ts): SQL statements and
// Redis commands by kind, lock cycles, HTTP requests, CPU by process. Counts, not timings: they do
// not drift with the machine's load. Prints a table; writes nothing.
import { parseArgs } from 'node:util'
import { FLASH_SALE_DEFAULTS } from '@fencelock/demo-shop/flash-sale'
import { databaseTarget, redact } from '@fencelock/devkit/database-url'
import { startRedisServer } from '@fencelock/devkit/redis-server'
import { loadAverage } from './support/machine.js'
import { countedSale, perUnit, tallyPerUnit, total, type SaleOutcome, type WorkSample } from './support/shop-work.js'
import { runFloorSale } from './shop-floor/floor-sale.js'

const { values } = parseArgs({
  options: {
    buyers: { type: 'string', default: '300' },
    stock: { type: 'string' },
    instances: { type: 'string', default: '4' },
    modes: { type: 'string', default: 'fenced,lock' },
    latency: { type: 'string', default: '0-0' },
  },
})
const buyers = Number(values.buyers)
const stock = Number(values.stock ?? values.buyers)
const server = await startRedisServer()
const { connectionString } = databaseTarget()
const services = {
  redis: { url: server.url, origin: server.url, owned: undefined, stop: async () => {} },
  database: { connectionString, origin: redact(connectionString) },
}
console.log(`load average before: ${loadAverage()}`)
try {
  for (const mode of String(values.modes).split(',') as Array<'fenced' | 'lock' | 'floor'>) {
    const options = {
      ...FLASH_SALE_DEFAULTS,
      instances: Number(values.instances),
      buyers,
      stock,
      mode: mode === 'floor' ? ('fenced' as const) : mode,
      chaos: 'none' as const,
      seed: 1,
      gatewayLatencyMs: String(values.latency),
    }
    const s: WorkSample<SaleOutcome> =
      mode === 'floor' ? await countedSale(options, services, server.pid, runFloorSale) : await countedSale(options, services, server.pid)
    const u = s.sold
    const r = s.report
    console.log(`\n## ${mode}: ${u} sold of ${stock} to ${buyers} buyers in ${(s.sellingMs / 1000).toFixed(2)} s (${(u / (s.sellingMs / 1000)).toFixed(1)} units/s); violations ${r.violations}, paid ${r.paidOrders}, charges ${r.gatewayCharges}, payments ${r.payments}`)
    console.log(`SQL/unit: shop ${perUnit(total(s.sql.shop), u)} (${tallyPerUnit(s.sql.shop, u)}); gateway ${perUnit(total(s.sql.gateway), u)} (${tallyPerUnit(s.sql.gateway, u)})`)
    console.log(`Redis/unit (clients): ${perUnit(total(s.redis), u)} (${tallyPerUnit(s.redis, u)})`)
    console.log(`Redis/unit (server commandstats): ${perUnit(total(s.redisServer), u)} (${tallyPerUnit(s.redisServer, u)})`)
    console.log(`lock cycles/unit ${perUnit(r.acquires, u)}; HTTP/unit into the shop ${perUnit(s.http.shop, u)}, into the gateway ${perUnit(s.http.gateway, u)}; load: ordered ${r.load.ordered} soldOut ${r.load.soldOut} payments ${r.load.paymentRequests} alreadyPaid ${r.load.alreadyPaid} byStatus ${JSON.stringify(r.load.byStatus)}`)
    const c = s.cpu
    const ms = (x: number) => perUnit(1000 * x, u)
    console.log(`CPU ms/unit: instances ${ms(c.instances)}, gateway ${ms(c.gateway)}, load ${ms(c.load)}, postgres ${ms(c.postgres)}, redis ${ms(c.redis)}; sum ${ms(c.instances + c.gateway + c.load + c.postgres + c.redis)}; machine ${ms(c.machine)}`)
  }
} finally {
  await server.dispose()
}
console.log(`\nload average after: ${loadAverage()}`)
