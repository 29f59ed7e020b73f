/**
 * One flash-sale run, end to end: a fresh schema seeded with one product, N instances under the
 * supervisor, the chosen chaos, the crowd, then — after every instance has drained and exited —
 * the report counted from the database.
 */
import { randomBytes } from 'node:crypto'
import { Locker } from '@fencelock/lock'
import { startEtcdServer } from '@fencelock/devkit/etcd-server'
import { Etcd3 } from 'etcd3'
import { Redis } from 'ioredis'
import {
  noChaos,
  startKillChaos,
  startPauseChaos,
  startRedisRestartChaos,
  type Chaos,
  type ChaosKind,
  type KillRecord,
  type PauseRecord,
} from './chaos.js'
import {
  createPrisma,
  databaseTarget,
  dropShopSchema,
  prepareShopSchema,
  startEmbeddedDatabase,
  type DatabaseLocation,
  type EmbeddedDatabase,
} from './database.js'
import { GATEWAY_TIMEOUT_MS, type InstanceStats } from './instance.js'
import { INSTANCE_DEFAULTS } from './instance-config.js'
import { httpGateway, parseLatency } from './payment-gateway.js'
import { createProtection, fencedShopClient, shopStores } from './protection.js'
import { Reconciler, type ReconcilePass } from './reconciler.js'
import { lockPrefixOf } from './shop-keys.js'
import { runLoad, type LoadTotals } from './load-generator.js'
import type { ProtectionMode } from './protection.js'
import { seededRandom } from './random.js'
import { CannotStartError } from '@fencelock/devkit/cli'
import { resolveRedis, type RedisEndpoint } from '@fencelock/devkit/redis-endpoint'
import { startSentinelSet } from '@fencelock/devkit/redis-topology'
import { countShop } from './shop-counts.js'
import { readChargedTwice, type ChargedTwice } from './charged-twice.js'
import { buildIncident, type IncidentResult } from './incident.js'
import { sumSaleTimings, type SaleTimingTotals } from './sale-timings.js'
import { startGateway } from './gateway/start-gateway.js'
import { Supervisor, type InstanceProcess } from './supervisor.js'

/** Defaults of a run, in one frozen object. */
export const FLASH_SALE_DEFAULTS = Object.freeze({
  instances: 4,
  buyers: 2_000,
  stock: 100,
  mode: 'fenced' as ProtectionMode,
  chaos: 'none' as ChaosKind,
  seed: 1,
  ttlMs: 1_000,
  gatewayLatencyMs: '30-80',
  concurrency: 32,
  segments: 1,
  sku: 'flash-1',
  priceCents: 4_999,
})

/** What a run is asked to do. */
export interface FlashSaleOptions {
  readonly instances: number
  readonly buyers: number
  readonly stock: number
  readonly mode: ProtectionMode
  readonly chaos: ChaosKind
  readonly seed: number
  /** Lock lease, in ms. */
  readonly ttlMs: number
  /** `"<min>-<max>"` ms of the simulated gateway. */
  readonly gatewayLatencyMs: string
  /** Buyers in flight at once. */
  readonly concurrency: number
  /**
   * Stock segments (segments.ts): the stock split over this many rows, each its own lock and
   * fence. 1 (default): the stock on the product, under one lock.
   */
  readonly segments?: number
  /** Instances time each purchase's phases (SHOP_SALE_TIMERS=1); the report's `saleTimings`. */
  readonly saleTimers?: boolean
  /** Keep the run's schema instead of dropping it. */
  readonly keepData?: boolean
  /** Instances' stderr: shown or not. Default 'ignore'. */
  readonly instanceLogs?: 'inherit' | 'ignore'
  /**
   * `sentinel`: a Sentinel set spawned for the run (a primary, 2 replicas, 3 Sentinels, by the
   * devkit), the instances connecting through the Sentinels with the lock's `replicas: 1`.
   * Default `single` (REDIS_URL, 127.0.0.1:6379, or a spawned redis-server).
   */
  readonly redis?: 'single' | 'sentinel'
  /**
   * Where the locks are: `redis` (default) or `etcd` — the members of ETCD_ENDPOINTS, else one
   * member spawned for the run (Debian's etcd-server, by the devkit). Redis still keeps the views.
   */
  readonly backend?: 'redis' | 'etcd'
}

/** Progress of a running sale, for the progress line. */
export interface FlashSaleProgress {
  readonly phase: 'starting' | 'selling' | 'draining' | 'counting'
  readonly done: number
  readonly buyers: number
  readonly totals?: LoadTotals
  readonly chaosCount: number
  readonly message?: string
  /** The run's instances, from `selling` on (the dashboard scrapes their /metrics and /api/state). */
  readonly instances?: readonly InstanceProcess[]
  /** The run's schema (its processes' `application_name` in PostgreSQL), from `selling` on. */
  readonly schema?: string
}

/** The report. Every violation count is taken from the database after the run. */
export interface FlashSaleReport {
  readonly options: Omit<FlashSaleOptions, 'keepData' | 'instanceLogs'>
  readonly durationMs: number
  /** Where Redis and PostgreSQL came from (and etcd, when the locks are on it). */
  readonly services: { readonly redis: string; readonly database: string; readonly schema: string; readonly etcd?: string }
  // From the database:
  readonly initialStock: number
  readonly remainingStock: number
  readonly sold: number
  readonly oversoldUnits: number
  readonly orders: number
  readonly paidOrders: number
  /** Payments recorded in the shop's database. */
  readonly payments: number
  /** Orders with more than one payment recorded in the shop. */
  readonly doublePaidOrders: number
  /** Charges in the gateway's ledger. */
  readonly gatewayCharges: number
  /** Orders charged more than once at the gateway, where the money moves. */
  readonly doubleChargedOrders: number
  /** Charges beyond the first of each order, at the gateway. */
  readonly extraCharges: number
  readonly lostUpdates: number
  /** Orders charged at the gateway and not paid in the shop, after reconciliation (money moved, never recorded). */
  readonly chargedUnpaidOrders: number
  /** Paid orders with no charge in the ledger. */
  readonly paidUnchargedOrders: number
  /** Orders charged another amount than the order's. */
  readonly amountMismatchOrders: number
  /** Ledger charges whose key names no order. */
  readonly unmatchedCharges: number
  /** Orders still pending with no payment intent after the final reconcile (their unit held). */
  readonly unsettledOrders: number
  /** Payments recorded by a reconciler (during the sale and at its end), from a charge in the ledger. */
  readonly reconciledPaid: number
  /** Orders cancelled by a reconciler (no charge for their intent), their units returned. */
  readonly cancelledOrders: number
  /** What the pass at the end of the sale (after the instances drained, before counting) settled. */
  readonly finalReconcile: ReconcilePass
  /** Each broken invariant once. */
  readonly violations: number
  // From the instances' own counters:
  readonly staleWritesRejected: number
  readonly acquireP99Ms: number | null
  readonly acquires: number
  readonly acquireTimeouts: number
  readonly expiredLocks: number
  readonly instancesReporting: number
  // The chaos and the crowd:
  readonly chaosEvents: number
  readonly pauses: readonly PauseRecord[]
  /** The `kill` chaos' kills and restarts. */
  readonly kills: readonly KillRecord[]
  readonly load: LoadTotals
  /** With `saleTimers`: the purchases' phases summed over the instances, in ms (sale-timings.ts). */
  readonly saleTimings?: SaleTimingTotals
  /** When the crowd started, epoch ms: the incident's and the drill-down's times count from it. */
  readonly saleStartedAtMs: number
  /** One incident of the sale (a holder frozen, another taking over, the frozen one waking), or why there is none (incident.ts). */
  readonly incident: IncidentResult
  /** The orders the gateway charged more than once, with who charged them and with which token (charged-twice.ts). */
  readonly chargedTwice: ChargedTwice
}

/** Nearest-rank percentile of `values` (p in 0..100); null when empty. */
export function percentile(values: readonly number[], p: number): number | null {
  if (values.length === 0) return null
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))] as number
}

/**
 * The CLI's exit code for a finished run: 1 when a violation happened in `fenced` mode (the one
 * mode that promises none), else 0. Violations in `unsafe` and `lock` are what those modes show.
 */
export function exitCodeOf(
  report: Pick<FlashSaleReport, 'violations'> & { options: Pick<FlashSaleOptions, 'mode'> },
): 0 | 1 {
  return report.options.mode === 'fenced' && report.violations > 0 ? 1 : 0
}

/**
 * A run that could not start: refused (`redis-restart` on a Redis the demo does not own), or its
 * database, payment gateway or instances did not come up. A command exits 2 on it, as on every
 * {@link CannotStartError}.
 */
export class FlashSaleSetupError extends CannotStartError {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options)
    this.name = 'FlashSaleSetupError'
  }
}

/** Runs one start-up step; its failure is a {@link FlashSaleSetupError} naming `what`. */
async function startStep<T>(what: string, step: () => Promise<T>): Promise<T> {
  try {
    return await step()
  } catch (error) {
    if (error instanceof CannotStartError) throw error
    throw new FlashSaleSetupError(`${what} did not start: ${error instanceof Error ? error.message : String(error)}`, {
      cause: error,
    })
  }
}

/** The run was stopped by its signal (Ctrl-C); what it started has been stopped and its schema dropped. */
export class FlashSaleAbortedError extends Error {
  constructor() {
    super('the flash sale was interrupted')
    this.name = 'FlashSaleAbortedError'
  }
}

/** Services a run can be given instead of resolving its own (the demo shares them across runs). */
export interface FlashSaleServices {
  readonly redis?: RedisEndpoint
  readonly database?: { readonly connectionString: string; readonly origin: string }
}

/**
 * Runs one flash sale and returns its report.
 * @example
 * ```ts
 * const report = await runFlashSale({ ...FLASH_SALE_DEFAULTS, mode: 'fenced', chaos: 'pause', seed: 7 })
 * if (report.options.mode === 'fenced' && report.violations > 0) process.exitCode = 1
 * ```
 */
export async function runFlashSale(
  options: FlashSaleOptions,
  onProgress: (progress: FlashSaleProgress) => void = () => {},
  services: FlashSaleServices = {},
  signal?: AbortSignal,
): Promise<FlashSaleReport> {
  const started = performance.now()
  const runId = `fs-${Date.now().toString(36)}-${randomBytes(3).toString('hex')}`
  const random = seededRandom(options.seed)
  const cleanups: Array<() => Promise<void>> = []
  const progress = (p: Omit<FlashSaleProgress, 'buyers'>) => onProgress({ ...p, buyers: options.buyers })
  const checkSignal = () => {
    if (signal?.aborted) throw new FlashSaleAbortedError()
  }

  try {
    if (options.backend === 'etcd') checkEtcdOptions(options)
    // Say only what is started: the demo hands the same Redis and database to each of its sales.
    const starting = [services.redis ? '' : 'Redis', services.database ? '' : 'the database'].filter(Boolean).join(' and ')
    progress({ phase: 'starting', done: 0, chaosCount: 0, message: starting ? `starting ${starting}` : "preparing the sale's schema" })
    // Redis: the chaos `redis-restart` needs one the demo owns, so it spawns its own unless told otherwise.
    let redis = services.redis
    let sentinelEnv: Record<string, string> = {}
    if (options.redis === 'sentinel') {
      if (options.chaos === 'redis-restart') throw new FlashSaleSetupError('--chaos redis-restart restarts one redis-server; with --redis sentinel use --chaos none or pause')
      const set = await startStep('the Sentinel set', () => startSentinelSet())
      cleanups.push(() => set.dispose())
      const primary = await set.primary()
      redis = { url: primary.url, origin: `Sentinel set (spawned: primary :${primary.port}, 2 replicas, 3 Sentinels; lock replicas: 1)`, owned: undefined, stop: async () => {} }
      sentinelEnv = { REDIS_SENTINELS: set.sentinelAddresses.map((a) => `${a.host}:${a.port}`).join(','), REDIS_SENTINEL_NAME: set.name, SHOP_LOCK_REPLICAS: '1' }
    }
    if (redis === undefined) {
      if (options.chaos === 'redis-restart' && process.env.REDIS_URL) {
        throw new FlashSaleSetupError(
          '--chaos redis-restart restarts a redis-server the demo starts itself; unset REDIS_URL so it can spawn one (redis-server on PATH)',
        )
      }
      const own = await resolveRedis({ preferOwned: options.chaos === 'redis-restart' })
      cleanups.push(() => own.stop())
      redis = own
    }
    if (options.chaos === 'redis-restart' && redis.owned === undefined) {
      throw new FlashSaleSetupError(
        `--chaos redis-restart only restarts a Redis the demo started; this run uses ${redis.origin}`,
      )
    }
    const etcd = options.backend === 'etcd' ? await resolveEtcd(cleanups) : undefined

    let database = services.database
    if (database === undefined) {
      if (process.env.DATABASE_URL) {
        database = {
          connectionString: databaseTarget(process.env.DATABASE_URL).connectionString,
          origin: 'DATABASE_URL',
        }
      } else {
        const embedded: EmbeddedDatabase = await startStep('the embedded PostgreSQL', startEmbeddedDatabase)
        cleanups.push(() => embedded.stop())
        database = { connectionString: embedded.connectionString, origin: 'embedded PGlite (pglite-socket)' }
      }
    }
    checkSignal()
    const embedded = database.origin.startsWith('embedded')
    const location: DatabaseLocation = {
      connectionString: database.connectionString,
      schema: `flash_sale_${runId.replaceAll('-', '_')}`,
    }
    await startStep("the shop's database schema", () =>
      prepareShopSchema(location, [
        {
          sku: FLASH_SALE_DEFAULTS.sku,
          name: 'Flash-sale sneakers',
          priceCents: FLASH_SALE_DEFAULTS.priceCents,
          stock: options.stock,
          segments: options.segments ?? 1,
        },
      ]),
    )
    if (!options.keepData) cleanups.push(() => dropShopSchema(location))

    const url = new URL(location.connectionString)
    url.searchParams.set('schema', location.schema)
    // The payment gateway: a process of its own with its own ledger, never paused by the chaos.
    const gateway = await startStep('the payment gateway', () =>
      startGateway({
        databaseUrl: url.toString(),
        latencyMs: options.gatewayLatencyMs,
        dbPoolSize: embedded ? 1 : 8,
        stderr: options.instanceLogs ?? 'ignore',
      }),
    )
    cleanups.push(() => gateway.stop())
    const lockWaitMs = INSTANCE_DEFAULTS.lockWaitMs
    const supervisor = await startStep('the shop instances', () =>
      Supervisor.start({
        instances: options.instances,
        stderr: options.instanceLogs ?? 'ignore',
        env: {
          REDIS_URL: redis.url,
          DATABASE_URL: url.toString(),
          SHOP_MODE: options.mode,
          SHOP_RUN_ID: runId,
          SHOP_LOCK_TTL_MS: String(options.ttlMs),
          SHOP_GATEWAY_URL: gateway.url,
          // PGlite is one session behind the socket: one connection per instance, and expect serialization.
          SHOP_DB_POOL_SIZE: embedded ? '1' : '4',
          ...(options.saleTimers ? { SHOP_SALE_TIMERS: '1' } : {}),
          ...sentinelEnv,
          ...(etcd ? { ETCD_ENDPOINTS: etcd.endpoints } : {}),
        },
      }),
    )
    cleanups.push(() => supervisor.stop())

    checkSignal()
    let chaos: Chaos = noChaos()
    if (options.chaos === 'pause') {
      chaos = startPauseChaos(supervisor, {
        random,
        pauseMs: Math.round(2.5 * options.ttlMs),
        gapMs: options.ttlMs,
        firstAfterMs: 100,
      })
    } else if (options.chaos === 'kill') {
      const latencyMaxMs = parseLatency(options.gatewayLatencyMs).maxMs
      chaos = startKillChaos(supervisor, {
        random,
        restartAfterMs: Math.max(300, options.ttlMs),
        gapMs: options.ttlMs,
        latencyMaxMs,
        firstAfterMs: 200,
      })
    } else if (options.chaos === 'redis-restart' && redis.owned !== undefined) {
      chaos = startRedisRestartChaos(redis.owned, { intervalMs: Math.max(1_000, 3 * options.ttlMs), firstAfterMs: 300 })
    }
    cleanups.push(() => chaos.stop())

    const instances = supervisor.instances
    progress({ phase: 'selling', done: 0, chaosCount: 0, instances, schema: location.schema })
    const saleStartedAtMs = Date.now()
    const load = await runLoad({
      targets: instances.map((i) => i.url),
      sku: FLASH_SALE_DEFAULTS.sku,
      buyers: options.buyers,
      concurrency: options.concurrency,
      random,
      purchaseTimeoutMs: 120_000,
      paymentTimeoutMs: 2 * options.ttlMs,
      onProgress: (done, totals) => progress({ phase: 'selling', done, totals, chaosCount: chaos.count, instances }),
      ...(signal === undefined ? {} : { signal }),
    })
    // Interrupted: the finally below stops the chaos and the instances, and drops the schema.
    if (signal?.aborted) throw new FlashSaleAbortedError()
    await chaos.stop()
    progress({
      phase: 'draining',
      done: options.buyers,
      totals: load,
      chaosCount: chaos.count,
      message: 'waiting for the instances to finish',
    })
    const stats: InstanceStats[] = await supervisor.stats()
    // Each instance stops taking work and drains: a purchase waits at most the lock's wait, a
    // charge the gateway's timeout; only then does it close its lock and pool.
    await supervisor.stop(lockWaitMs + GATEWAY_TIMEOUT_MS + 15_000)
    // Intents left unpaid (an instance killed after its charge) are settled before counting, with
    // the gateway still up to answer; then the gateway drains the charges it is still running.
    progress({
      phase: 'draining',
      done: options.buyers,
      totals: load,
      chaosCount: chaos.count,
      message: 'reconciling unpaid intents',
    })
    const finalReconcile = await reconcileAfterSale({
      location,
      redisUrl: redis.url,
      ...(etcd ? { etcdEndpoints: etcd.endpoints } : {}),
      runId,
      mode: options.mode,
      ttlMs: options.ttlMs,
      gatewayUrl: gateway.url,
    })
    await gateway.stop()

    progress({
      phase: 'counting',
      done: options.buyers,
      totals: load,
      chaosCount: chaos.count,
      message: 'counting from the database',
    })
    const db = createPrisma(location, 1)
    let counts
    let chargedTwice: ChargedTwice
    // The instances' logs as each sent them once drained (a woken holder's late write is in them),
    // else as they answered before the drain (an instance killed meanwhile).
    const events = stats.flatMap((s) => (supervisor.finalStats.get(s.instance) ?? s).events)
    try {
      counts = await countShop(db, location.schema)
      chargedTwice = await readChargedTwice(db, events, saleStartedAtMs)
    } finally {
      await db.$disconnect()
    }
    const product = counts.products[0]
    const waits = stats.flatMap((s) => s.acquireWaitsMs)
    const { keepData: _keep, instanceLogs: _logs, ...shown } = options
    return {
      options: shown,
      durationMs: Math.round(performance.now() - started),
      services: { redis: redis.origin, database: database.origin, schema: location.schema, ...(etcd ? { etcd: etcd.origin } : {}) },
      initialStock: options.stock,
      remainingStock: product?.stock ?? 0,
      sold: counts.unitsSold,
      oversoldUnits: counts.oversoldUnits,
      orders: counts.orders,
      paidOrders: counts.paidOrders,
      payments: counts.payments,
      doublePaidOrders: counts.doublePaidOrders,
      gatewayCharges: counts.gatewayCharges,
      doubleChargedOrders: counts.doubleChargedOrders,
      extraCharges: counts.extraCharges,
      lostUpdates: counts.lostUpdates,
      chargedUnpaidOrders: counts.chargedUnpaidOrders,
      paidUnchargedOrders: counts.paidUnchargedOrders,
      amountMismatchOrders: counts.amountMismatchOrders,
      unmatchedCharges: counts.unmatchedCharges,
      unsettledOrders: counts.unsettledOrders,
      reconciledPaid: counts.reconciledPaid,
      cancelledOrders: counts.cancelledOrders,
      finalReconcile,
      violations: counts.violations,
      staleWritesRejected: stats.reduce((a, s) => a + s.staleWritesRejected, 0),
      acquireP99Ms: percentile(waits, 99),
      acquires: waits.length,
      acquireTimeouts: stats.reduce((a, s) => a + s.acquireTimeouts, 0),
      expiredLocks: stats.reduce((a, s) => a + s.expiredLocks, 0),
      instancesReporting: stats.length,
      chaosEvents: chaos.count,
      pauses: chaos.pauses,
      kills: chaos.kills ?? [],
      load,
      ...(options.saleTimers ? { saleTimings: sumSaleTimings(stats.flatMap((s) => (s.saleTimings ? [s.saleTimings] : []))) } : {}),
      saleStartedAtMs,
      incident: buildIncident({ mode: options.mode, ttlMs: options.ttlMs, saleStartMs: saleStartedAtMs, pauses: chaos.pauses, events }),
      chargedTwice,
    }
  } finally {
    for (const cleanup of cleanups.reverse()) await cleanup().catch(() => {})
  }
}

/**
 * The reconciler's pass at the end of a sale: every instance has drained, so no payer is left and
 * every unpaid intent is settled (age limit 0), under the run's own locks and mode.
 */
export async function reconcileAfterSale(run: {
  location: DatabaseLocation
  redisUrl: string
  /** The locks' etcd (`host:port,...`), when they are on etcd. */
  etcdEndpoints?: string
  runId: string
  mode: ProtectionMode
  ttlMs: number
  gatewayUrl: string
}): Promise<ReconcilePass> {
  const redis = new Redis(run.redisUrl, { maxRetriesPerRequest: 2 })
  redis.on('error', () => {})
  const etcd = run.etcdEndpoints ? new Etcd3({ hosts: run.etcdEndpoints.split(',') }) : undefined
  const locker = new Locker(etcd ?? redis, {
    ttlMs: run.ttlMs,
    waitMs: INSTANCE_DEFAULTS.lockWaitMs,
    prefix: lockPrefixOf(run.runId),
  })
  const prisma = createPrisma(run.location, 2)
  try {
    const stores = shopStores(prisma, fencedShopClient(prisma), { maxWait: 15_000, timeout: 15_000 })
    const protection = createProtection(run.mode, {
      stores,
      locker,
      ttlMs: run.ttlMs,
      waitMs: INSTANCE_DEFAULTS.lockWaitMs,
    })
    const gateway = httpGateway({ url: run.gatewayUrl, timeoutMs: GATEWAY_TIMEOUT_MS })
    const reconciler = new Reconciler({
      db: prisma,
      protection,
      gateway,
      instanceId: 'flash-sale',
      minAgeMs: 0,
      batch: 100_000,
    })
    return await reconciler.runOnce()
  } finally {
    await locker.close().catch(() => {})
    etcd?.close()
    await prisma.$disconnect().catch(() => {})
    redis.disconnect()
  }
}

/** What cannot go with the locks on etcd, refused before anything starts. */
function checkEtcdOptions(options: FlashSaleOptions): void {
  if (options.chaos === 'redis-restart') throw new FlashSaleSetupError("--chaos redis-restart restarts the locks' Redis; with --backend etcd use --chaos none, pause or kill")
  if (options.redis === 'sentinel') throw new FlashSaleSetupError('--redis sentinel puts the locks on Sentinel; with --backend etcd they are on etcd')
}

/** The etcd of a run whose locks are on etcd: ETCD_ENDPOINTS, else one member spawned for the run (stopped by the run's cleanups). */
async function resolveEtcd(cleanups: Array<() => Promise<void>>): Promise<{ endpoints: string; origin: string }> {
  const given = process.env.ETCD_ENDPOINTS
  if (given) return { endpoints: given, origin: 'ETCD_ENDPOINTS' }
  const member = await startStep('etcd', () => startEtcdServer())
  cleanups.push(() => member.dispose())
  return { endpoints: member.endpoint, origin: `etcd (spawned: one member :${member.clientPort})` }
}
