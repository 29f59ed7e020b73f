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
 * by PID. Flags: `npm run demo -- --help`.
 */
import { createServer } from 'node:net'
import { CannotStartError, EXIT_CODES, integerFlag, KEEP_RUNNING, runCommand, type CliSpec, type CliValues } from '@fencelock/devkit/cli'
import { databaseTarget, redact, startEmbeddedDatabase, type EmbeddedDatabase } from './database.js'
import { FLASH_SALE_DEFAULTS, FlashSaleAbortedError, runFlashSale, type FlashSaleOptions, type FlashSaleReport } from './flash-sale.js'
import { startLiveShop, type LiveShop } from './live-shop.js'
import { startDashboard } from './dashboard/start-dashboard.js'
import { resolveRedis, type RedisEndpoint } from '@fencelock/devkit/redis-endpoint'
import { progressWriter } from './report-format.js'
import { formatOnceReport, formatOnceSummary } from './once-format.js'

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

export const DEMO_CLI: CliSpec = {
  command: 'npm run demo --',
  summary:
    'The live shop (4 instances, fenced, a crowd buying drop after drop, a lock holder frozen every 5 s) and its dashboard at one URL, until Ctrl-C. With --once: three flash sales in the terminal (no lock; the lock alone with a holder frozen past its TTL; lock + fencing, same chaos), then a summary.',
  flags: {
    once: { type: 'boolean', description: 'run the three sales in the terminal and exit' },
    port: { type: 'string', value: '<n>', description: "the dashboard's port, 0-65535 (0: a free one; taken: a free one)", default: DASHBOARD_PORT },
    'shop-port': {
      type: 'string',
      value: '<n>',
      description: "the live shop's first port: its 4 instances on n to n+3, 0-65532 (0: free ones)",
      default: `${LIVE_BASE_PORT} when ${LIVE_BASE_PORT}-${LIVE_BASE_PORT + 3} are free, else free ones`,
    },
    buyers: { type: 'string', value: '<n>', description: 'buyers per sale, 1-100000', default: '600, 200 on the embedded database' },
    stock: { type: 'string', value: '<n>', description: 'units per sale, 1-100000', default: '60, 20 on the embedded database' },
  },
  notes: "REDIS_URL, else 127.0.0.1:6379 when it answers, else a redis-server it spawns. DATABASE_URL (its ?schema= names the live shop's schema, default demo_shop, reset at start), else an embedded PGlite. Ctrl-C or SIGTERM stops everything it started.",
  failure: 'it failed while running (a sale of --once broke off with an error)',
}

interface DemoArgs {
  once: boolean
  port: number
  /** The instances' first port (0: free ones); undefined: 3001 when free, else free ones. */
  shopPort: number | undefined
  buyers: number | undefined
  stock: number | undefined
}

function demoArgs(values: CliValues): DemoArgs {
  return {
    once: values.once === true,
    port: integerFlag(values, 'port', DASHBOARD_PORT, 0, 65_535),
    shopPort: values['shop-port'] === undefined ? undefined : integerFlag(values, 'shop-port', LIVE_BASE_PORT, 0, 65_532),
    buyers: values.buyers === undefined ? undefined : integerFlag(values, 'buyers', 0, 1, 100_000),
    stock: values.stock === undefined ? undefined : integerFlag(values, 'stock', 0, 1, 100_000),
  }
}

async function main(args: DemoArgs): Promise<typeof KEEP_RUNNING> {
  const cleanups: Array<() => Promise<void>> = []
  let stopping = false
  // Exits with `code` once everything the demo started is stopped; a second call waits for the first.
  const stopAll = async (code: number): Promise<never> => {
    if (stopping) return new Promise<never>(() => {})
    stopping = true
    for (const cleanup of cleanups.reverse()) await cleanup().catch(() => {})
    process.exit(code)
  }
  // Ctrl-C during a sale: the sale stops its crowd and instances and drops its schema first;
  // a second Ctrl-C exits at once (exit hooks still kill the instances and a spawned redis-server).
  const interrupt = new AbortController()
  let selling = false
  process.on('SIGINT', () => {
    if (interrupt.signal.aborted) process.exit(EXIT_CODES.interrupted)
    interrupt.abort()
    console.error('\nStopping what the demo started… (Ctrl-C again to force)')
    if (!selling) void stopAll(EXIT_CODES.interrupted)
  })
  process.on('SIGTERM', () => void stopAll(EXIT_CODES.terminated))
  // `npm run demo` killed (SIGKILL, or a terminal closed under it) sends us nothing: the demo is
  // re-parented. Seen as a new parent pid, it stops everything it started, as on SIGTERM.
  const parent = process.ppid
  const orphaned = setInterval(() => {
    if (process.ppid !== parent) {
      clearInterval(orphaned)
      console.error('demo: its parent process went away; stopping what the demo started')
      void stopAll(EXIT_CODES.terminated)
    }
  }, 500)
  orphaned.unref()

  let redis: RedisEndpoint
  try {
    redis = await resolveRedis()
  } catch (error) {
    if (!(error instanceof CannotStartError)) throw error
    console.error(`demo: could not start: ${error.message}`)
    return stopAll(EXIT_CODES.cannotStart)
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
    let embedded: EmbeddedDatabase
    try {
      embedded = await startEmbeddedDatabase()
    } catch (error) {
      console.error(`demo: could not start: the embedded PostgreSQL did not start: ${error instanceof Error ? error.message : String(error)}`)
      return stopAll(EXIT_CODES.cannotStart)
    }
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
    { title: 'Lock only, a holder frozen (SIGSTOP) past its TTL', options: { ...base, mode: 'lock', chaos: 'pause' } },
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
    if (report === undefined) return stopAll(EXIT_CODES.interrupted)
    progress.end()
    console.log(`${formatOnceReport(report)}\n`)
    reports.push({ title, report })
  }

  console.log(formatOnceSummary(reports.map((r) => r.report)))
  console.log('\nThe lock keeps contenders out most of the time; the fencing token makes every')
  console.log('store that checks it safe, and the idempotency key the one that cannot (the')
  console.log('charge at the gateway).\n')

  return stopAll(EXIT_CODES.ok)

  /** The live shop and the dashboard, until Ctrl-C. */
  async function serveLive(): Promise<typeof KEEP_RUNNING> {
    // Fixed ports when free (for curl and Prometheus), else free ones; --shop-port chooses.
    const portsFree =
      args.shopPort === undefined &&
      (await Promise.all([0, 1, 2, 3].map((i) => portFree(LIVE_BASE_PORT + i)))).every(Boolean)
    const start = (basePort: number): Promise<LiveShop> =>
      startLiveShop({
        redisUrl: redis.url,
        database: { connectionString: database.connectionString, schema: liveSchema },
        instances: 4,
        mode: 'fenced',
        basePort,
        host: '127.0.0.1',
        dbPoolSize: embedded ? 1 : 4,
        ttlMs: FLASH_SALE_DEFAULTS.ttlMs,
        pauseEveryMs: 5_000,
        buyersPerDrop: embedded ? 100 : 300,
        stockPerDrop: embedded ? 10 : 30,
        seed: 7,
      })
    let shop: LiveShop
    try {
      try {
        shop = await start(args.shopPort ?? (portsFree ? LIVE_BASE_PORT : 0))
      } catch (error) {
        // Another process took one of the ports between the check and the listen (two demos
        // started at once): what started was stopped; free ports then.
        if (!portsFree || !(error instanceof Error) || !error.message.includes('EADDRINUSE')) throw error
        shop = await start(0)
      }
    } catch (error) {
      console.error(`demo: could not start: the live shop did not start: ${error instanceof Error ? error.message : String(error)}`)
      return stopAll(EXIT_CODES.cannotStart)
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
        compare: { buyers: args.buyers ?? 1_000, stock: args.stock ?? 100 },
      },
    })
    // Stopped before the shop (cleanups run in reverse): a run going on cleans up first.
    cleanups.push(() => dashboard.stop())
    console.log('The shop is running: 4 instances (fenced), a crowd buying drop after drop, a lock holder frozen every 5 s.')
    console.log(`\n  Open the dashboard: ${dashboard.url}\n`)
    console.log('Ctrl-C stops everything the demo started.')
    return KEEP_RUNNING
  }
}

await runCommand(DEMO_CLI, process.argv.slice(2), (values) => main(demoArgs(values)))
