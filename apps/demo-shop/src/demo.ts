/**
 * `npm run demo`: the flash sale three times on the same services — no lock, the lock alone with
 * a holder frozen past its TTL, the lock plus fencing with the same chaos — each report counted
 * from the database, then a side-by-side summary. Then, on a terminal, the shop keeps running
 * (4 instances, fenced) for you to poke at `/api/state` and `/metrics` until Ctrl-C. The live
 * dashboard (apps/dashboard) will take the place of the terminal report.
 *
 * Services: `REDIS_URL`, else 127.0.0.1:6379 when it answers, else a redis-server it spawns;
 * `DATABASE_URL`, else an embedded PGlite served over pglite-socket. Ctrl-C stops everything it
 * started, by PID. Flags: `--once` (exit after the reports), `--buyers <n>`, `--stock <n>`.
 */
import { createServer } from 'node:net'
import { databaseTarget, redact, startEmbeddedDatabase } from './database.js'
import { FLASH_SALE_DEFAULTS, FlashSaleAbortedError, runFlashSale, type FlashSaleOptions, type FlashSaleReport } from './flash-sale.js'
import { startLiveShop, type LiveShop } from './live-shop.js'
import { NO_REDIS_HELP, resolveRedis, type RedisEndpoint } from './redis-endpoint.js'
import { formatReport, progressWriter } from './report-format.js'

const LIVE_BASE_PORT = 3001
const LIVE_SCHEMA = 'demo_shop'

/** True when nothing listens on 127.0.0.1:`port`. */
function portFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer()
    server.once('error', () => resolve(false))
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)))
  })
}

function parseArgs(argv: readonly string[]): { once: boolean; buyers: number | undefined; stock: number | undefined } {
  const out: { once: boolean; buyers: number | undefined; stock: number | undefined } = { once: false, buyers: undefined, stock: undefined }
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]
    if (arg === '--once') out.once = true
    else if (arg === '--buyers' || arg === '--stock') {
      const value = argv[++i] ?? ''
      if (!/^\d{1,6}$/.test(value) || Number(value) < 1) throw new Error(`${arg} must be a positive integer (got ${JSON.stringify(value)})`)
      out[arg === '--buyers' ? 'buyers' : 'stock'] = Number(value)
    } else throw new Error(`unknown option ${JSON.stringify(arg)} (options: --once, --buyers <n>, --stock <n>)`)
  }
  return out
}

async function main(): Promise<void> {
  const args = parseArgs(process.argv.slice(2))
  const cleanups: Array<() => Promise<void>> = []
  let stopping = false
  const stopAll = async (code: number) => {
    if (stopping) return
    stopping = true
    for (const cleanup of cleanups.reverse()) await cleanup().catch(() => {})
    process.exit(code)
  }
  // Ctrl-C during a sale: the sale stops its crowd and instances and drops its schema first;
  // a second Ctrl-C exits at once (exit hooks still kill the instances and a spawned redis-server).
  const interrupt = new AbortController()
  let selling = false
  process.on('SIGINT', () => {
    if (interrupt.signal.aborted) process.exit(130)
    interrupt.abort()
    console.error('\nStopping what the demo started… (Ctrl-C again to force)')
    if (!selling) void stopAll(130)
  })
  process.on('SIGTERM', () => void stopAll(143))

  let redis: RedisEndpoint
  try {
    redis = await resolveRedis()
  } catch {
    console.error(NO_REDIS_HELP)
    process.exit(1)
  }
  cleanups.push(() => redis.stop())
  let database: { connectionString: string; origin: string }
  if (process.env.DATABASE_URL) {
    database = { connectionString: databaseTarget(process.env.DATABASE_URL).connectionString, origin: `DATABASE_URL (${redact(process.env.DATABASE_URL)})` }
  } else {
    console.log('Starting an embedded PostgreSQL (PGlite, 2-4 s)…')
    const embedded = await startEmbeddedDatabase()
    cleanups.push(() => embedded.stop())
    database = { connectionString: embedded.connectionString, origin: 'embedded PGlite over pglite-socket' }
  }
  console.log(`Redis: ${redis.origin} · PostgreSQL: ${database.origin}\n`)

  // The embedded database runs one transaction at a time: a smaller sale keeps each run under a minute.
  const embedded = database.origin.startsWith('embedded')
  const base: FlashSaleOptions = {
    ...FLASH_SALE_DEFAULTS,
    buyers: args.buyers ?? (embedded ? 200 : 600),
    stock: args.stock ?? (embedded ? 20 : 60),
    concurrency: embedded ? 16 : 32,
    seed: 7,
  }
  const scenarios: Array<{ title: string; options: FlashSaleOptions }> = [
    { title: 'No lock', options: { ...base, mode: 'unsafe', chaos: 'none' } },
    { title: 'Lock alone, a holder frozen (SIGSTOP) past its TTL', options: { ...base, mode: 'lock', chaos: 'pause' } },
    { title: 'Lock + fencing, same chaos', options: { ...base, mode: 'fenced', chaos: 'pause' } },
  ]
  const reports: Array<{ title: string; report: FlashSaleReport }> = []
  for (const { title, options } of scenarios) {
    console.log(`━━ ${title} ━━`)
    const progress = progressWriter()
    selling = true
    const report = await runFlashSale(options, (p) => progress.update(p), { redis, database }, interrupt.signal).catch((error: unknown) => {
      progress.end()
      if (error instanceof FlashSaleAbortedError) return undefined
      throw error
    })
    selling = false
    if (report === undefined) return stopAll(130)
    progress.end()
    console.log(`${formatReport(report)}\n`)
    reports.push({ title, report })
  }

  const w = Math.max(...reports.map((r) => r.title.length))
  console.log('━━ Summary (counted from the database) ━━')
  console.log(`  ${''.padEnd(w)}  oversold  double-charged  lost updates  stale writes rejected`)
  for (const { title, report } of reports) {
    console.log(
      `  ${title.padEnd(w)}  ${String(report.oversoldUnits).padStart(8)}  ${String(report.doubleChargedOrders).padStart(14)}  ${String(report.lostUpdates).padStart(12)}  ${String(report.staleWritesRejected).padStart(21)}`,
    )
  }
  console.log('\nThe lock keeps contenders out most of the time; only the fencing token makes the database safe.\n')

  if (args.once || !process.stdout.isTTY) return stopAll(0)

  // The live shop: fenced, a steady crowd in drops and the pause chaos, for the dashboard and curl.
  const portsFree = (await Promise.all([0, 1, 2, 3].map((i) => portFree(LIVE_BASE_PORT + i)))).every(Boolean)
  let shop: LiveShop
  try {
    shop = await startLiveShop({
      redisUrl: redis.url,
      database: { connectionString: database.connectionString, schema: LIVE_SCHEMA },
      instances: 4,
      mode: 'fenced',
      basePort: portsFree ? LIVE_BASE_PORT : 0,
      host: '127.0.0.1',
      dbPoolSize: embedded ? 1 : 4,
      ttlMs: FLASH_SALE_DEFAULTS.ttlMs,
      pauseEveryMs: 5_000,
      buyersPerDrop: embedded ? 100 : 300,
      stockPerDrop: embedded ? 10 : 30,
      seed: 7,
    })
  } catch (error) {
    console.error(`The live shop did not start: ${error instanceof Error ? error.message : String(error)}`)
    return stopAll(1)
  }
  cleanups.push(() => shop.stop())
  const supervisor = shop.supervisor
  console.log('The shop is running (fenced; a crowd buys drop after drop; a lock holder is frozen every 5 s):')
  for (const i of supervisor.instances) console.log(`  ${i.id}  ${i.url}/api/state   ${i.url}/metrics`)
  const first = supervisor.instances[0]?.url ?? ''
  console.log(`\n  curl -s -XPOST -H 'content-type: application/json' -d '{"buyerId":"me"}' ${first}/api/products/drop-1/purchase`)
  console.log('\nCtrl-C stops everything the demo started.')
}

main().catch((error: unknown) => {
  console.error(`demo: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`)
  process.exit(1)
})
