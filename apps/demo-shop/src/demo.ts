/**
 * `npm run demo`: the live shop and its dashboard, at one URL. The shop (4 instances, fenced, a
 * crowd buying drop after drop, a lock holder frozen every 5 s) runs until Ctrl-C; the dashboard
 * shows its lock metrics, invariants and locks held live, and starts flash sales in any mode and
 * chaos, side by side.
 *
 * `--once` instead runs the flash sale three times in the terminal on the same services — no lock,
 * the lock alone with a holder frozen past its TTL, the lock plus fencing with the same chaos —
 * each report counted from the database, then a side-by-side summary, and exits.
 *
 * Services: `REDIS_URL`, else 127.0.0.1:6379 when it answers, else a redis-server it spawns;
 * `DATABASE_URL` (its `?schema=` names the live shop's schema, default `demo_shop`, reset at
 * start), else an embedded PGlite served over pglite-socket. Ctrl-C stops everything it started,
 * by PID. Flags: `--once`, `--port <n>` (the dashboard's, default 3000; 0 for a free one),
 * `--buyers <n>`, `--stock <n>` (sizes of a sale).
 */
import { createServer } from 'node:net'
import { databaseTarget, redact, startEmbeddedDatabase } from './database.js'
import { FLASH_SALE_DEFAULTS, FlashSaleAbortedError, runFlashSale, type FlashSaleOptions, type FlashSaleReport } from './flash-sale.js'
import { startLiveShop, type LiveShop } from './live-shop.js'
import { startDashboard } from './dashboard/start-dashboard.js'
import { NO_REDIS_HELP, resolveRedis, type RedisEndpoint } from '@fencelock/devkit/redis-endpoint'
import { formatReport, progressWriter } from './report-format.js'

const LIVE_BASE_PORT = 3001
const LIVE_SCHEMA = 'demo_shop'
const DASHBOARD_PORT = 3000

/** True when nothing listens on 127.0.0.1:`port`. */
function portFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer()
    server.once('error', () => resolve(false))
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)))
  })
}

interface DemoArgs {
  once: boolean
  port: number
  buyers: number | undefined
  stock: number | undefined
}

function parseArgs(argv: readonly string[]): DemoArgs {
  const out: DemoArgs = { once: false, port: DASHBOARD_PORT, buyers: undefined, stock: undefined }
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]
    if (arg === '--once') out.once = true
    else if (arg === '--buyers' || arg === '--stock') {
      const value = argv[++i] ?? ''
      if (!/^\d{1,6}$/.test(value) || Number(value) < 1) throw new Error(`${arg} must be a positive integer (got ${JSON.stringify(value)})`)
      out[arg === '--buyers' ? 'buyers' : 'stock'] = Number(value)
    } else if (arg === '--port') {
      const value = argv[++i] ?? ''
      if (!/^\d{1,5}$/.test(value) || Number(value) > 65_535) throw new Error(`--port must be an integer from 0 to 65535 (got ${JSON.stringify(value)})`)
      out.port = Number(value)
    } else throw new Error(`unknown option ${JSON.stringify(arg)} (options: --once, --port <n>, --buyers <n>, --stock <n>)`)
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
  let liveSchema = LIVE_SCHEMA
  if (process.env.DATABASE_URL) {
    const target = databaseTarget(process.env.DATABASE_URL)
    database = { connectionString: target.connectionString, origin: `DATABASE_URL (${redact(process.env.DATABASE_URL)})` }
    if (new URL(process.env.DATABASE_URL).searchParams.has('schema')) liveSchema = target.schema
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
  if (!args.once) return serveLive()
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
  console.log('━━ Summary (counted from the database, and charges from the gateway’s ledger) ━━')
  console.log(`  ${''.padEnd(w)}  oversold  charged twice  lost updates  stale writes rejected`)
  for (const { title, report } of reports) {
    console.log(
      `  ${title.padEnd(w)}  ${String(report.oversoldUnits).padStart(8)}  ${String(report.doubleChargedOrders).padStart(13)}  ${String(report.lostUpdates).padStart(12)}  ${String(report.staleWritesRejected).padStart(21)}`,
    )
  }
  console.log('\nThe lock keeps contenders out most of the time; the fencing token makes every store that checks it safe,')
  console.log('and the idempotency key the one that cannot (the charge at the gateway).\n')

  return stopAll(0)

  /** The live shop and the dashboard, until Ctrl-C. */
  async function serveLive(): Promise<void> {
    // Fixed ports when free (for curl and Prometheus), else free ones.
    const portsFree = (await Promise.all([0, 1, 2, 3].map((i) => portFree(LIVE_BASE_PORT + i)))).every(Boolean)
    let shop: LiveShop
    try {
      shop = await startLiveShop({
        redisUrl: redis.url,
        database: { connectionString: database.connectionString, schema: liveSchema },
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
    const dashboard = await startDashboard({
      live: { shop, mode: 'fenced' },
      redis,
      database,
      host: '127.0.0.1',
      port: args.port,
      fallbackToFreePort: true,
      runOptions: { concurrency: base.concurrency },
      limits: {
        buyers: { min: 10, max: 2_000, default: args.buyers ?? (embedded ? 200 : 300) },
        stock: { min: 1, max: 500, default: args.stock ?? (embedded ? 20 : 30) },
      },
    })
    // Stopped before the shop (cleanups run in reverse): a run going on cleans up first.
    cleanups.push(() => dashboard.stop())
    console.log('The shop is running: 4 instances (fenced), a crowd buying drop after drop, a lock holder frozen every 5 s.')
    console.log(`\n  Open the dashboard: ${dashboard.url}\n`)
    console.log('Ctrl-C stops everything the demo started.')
  }
}

main().catch((error: unknown) => {
  console.error(`demo: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`)
  process.exit(1)
})
