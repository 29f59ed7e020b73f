/**
 * The shop left running for people, Prometheus and the dashboard: N instances on fixed ports, the
 * payment gateway they charge (a process it forks, or one running already, e.g. docker-compose's
 * `gateway` service), and optionally a steady crowd and the pause chaos. The crowd comes in
 * rounds ("drops"): each round seeds a new product (`drop-1`, `drop-2`, ...) with its own initial
 * stock, so the counts of `/api/state` stay exact per product across rounds.
 */
import pg from 'pg'
import { startPauseChaos, type Chaos } from './chaos.js'
import { prepareShopSchema, quoteIdent, SEED_TABLE, type DatabaseLocation } from './database.js'
import { runLoad } from './load-generator.js'
import type { ProtectionMode } from './protection.js'
import { seededRandom } from './random.js'
import { startGateway, type RunningGateway } from './gateway/start-gateway.js'
import { Supervisor } from './supervisor.js'

/** Options of {@link startLiveShop}. */
export interface LiveShopOptions {
  readonly redisUrl: string
  readonly database: DatabaseLocation
  readonly instances: number
  readonly mode: ProtectionMode
  /** First instance's port (the others follow); 0 for free ports. */
  readonly basePort: number
  /** Interface the instances listen on (`0.0.0.0` in a container, so Prometheus can scrape). */
  readonly host: string
  /** Connections per instance (1 on the embedded database). */
  readonly dbPoolSize: number
  readonly ttlMs: number
  /** Freeze a lock holder past its TTL every `pauseEveryMs` (0: never). */
  readonly pauseEveryMs: number
  /** Run a crowd of `buyersPerDrop` against `stockPerDrop` units, round after round (0: no crowd). */
  readonly buyersPerDrop: number
  readonly stockPerDrop: number
  readonly seed: number
  /** The payment gateway's latency, `<ms>` or `<min>-<max>`, when the live shop forks its own. Default `30-80`. */
  readonly gatewayLatencyMs?: string
  /**
   * Base URL of a payment gateway running already (docker-compose's `gateway`), whose ledger is in
   * the shop's schema. Default: none — the live shop forks its own gateway and stops it at the end.
   */
  readonly gatewayUrl?: string
  /** How long to wait for an external gateway's `/healthz`, in ms. Default 30 000. */
  readonly gatewayReadyTimeoutMs?: number
  readonly onDrop?: (drop: number) => void
}

/** A running live shop. */
export interface LiveShop {
  readonly supervisor: Supervisor
  /** The payment gateway the instances charge, and whether the live shop forked it. */
  readonly gateway: { readonly url: string; readonly external: boolean }
  /**
   * Holds the crowd back (true: the drop under way is dropped, no new one starts) or lets it go
   * again. The dashboard holds it while a flash sale runs, so the two do not share the machine.
   */
  setCrowdPaused(paused: boolean): void
  stop(): Promise<void>
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms))

async function addProduct(location: DatabaseLocation, sku: string, stock: number): Promise<void> {
  const client = new pg.Client({ connectionString: location.connectionString })
  await client.connect()
  try {
    const s = quoteIdent(location.schema)
    await client.query('BEGIN')
    await client.query(`INSERT INTO ${s}."Product" (sku, name, "priceCents", stock) VALUES ($1, $2, 4999, $3)`, [sku, `Drop ${sku}`, stock])
    await client.query(`INSERT INTO ${s}.${quoteIdent(SEED_TABLE)} (sku, "initialStock") VALUES ($1, $2)`, [sku, stock])
    await client.query('COMMIT')
  } finally {
    await client.end().catch(() => {})
  }
}

/** Thrown when the gateway given to the live shop does not answer its health check in time. */
export class GatewayUnavailableError extends Error {
  readonly url: string
  constructor(url: string, waitedMs: number, cause?: unknown) {
    super(`the payment gateway at ${url} did not answer GET /healthz within ${waitedMs} ms`, { cause })
    this.name = 'GatewayUnavailableError'
    this.url = url
  }
}

/** Waits until the gateway at `url` answers `/healthz`; returns its base URL without trailing slashes. */
async function gatewayReady(url: string, timeoutMs: number): Promise<string> {
  const base = url.replace(/\/+$/, '')
  const deadline = performance.now() + timeoutMs
  let last: unknown
  for (;;) {
    try {
      const res = await fetch(`${base}/healthz`, { signal: AbortSignal.timeout(2_000) })
      await res.body?.cancel()
      if (res.ok) return base
      last = new Error(`HTTP ${res.status}`)
    } catch (error) {
      last = error
    }
    if (performance.now() >= deadline) throw new GatewayUnavailableError(base, timeoutMs, last)
    await sleep(250)
  }
}

/**
 * Resets the schema, forks the payment gateway unless `gatewayUrl` names one (then waits for its
 * `/healthz`), starts the instances, then the crowd and the chaos when asked.
 * @example
 * ```ts
 * const shop = await startLiveShop({ redisUrl, database, instances: 4, mode: 'fenced', basePort: 3001, host: '127.0.0.1',
 *   dbPoolSize: 4, ttlMs: 1000, pauseEveryMs: 5000, buyersPerDrop: 300, stockPerDrop: 30, seed: 7 })
 * process.on('SIGINT', () => void shop.stop())
 * ```
 */
export async function startLiveShop(options: LiveShopOptions): Promise<LiveShop> {
  await prepareShopSchema(options.database, [])
  const url = new URL(options.database.connectionString)
  url.searchParams.set('schema', options.database.schema)
  // The payment gateway, a process of its own with its own ledger (never paused by the chaos): the
  // one given, or one forked here.
  const gateway: Pick<RunningGateway, 'url' | 'stop'> =
    options.gatewayUrl === undefined
      ? await startGateway({ databaseUrl: url.toString(), latencyMs: options.gatewayLatencyMs ?? '30-80', dbPoolSize: Math.max(1, options.dbPoolSize * 2) })
      : { url: await gatewayReady(options.gatewayUrl, options.gatewayReadyTimeoutMs ?? 30_000), stop: async () => {} }
  let supervisor: Supervisor
  try {
    supervisor = await Supervisor.start({
      instances: options.instances,
      basePort: options.basePort,
      stderr: 'ignore',
      env: {
        REDIS_URL: options.redisUrl,
        DATABASE_URL: url.toString(),
        HOST: options.host,
        SHOP_MODE: options.mode,
        SHOP_RUN_ID: 'live',
        SHOP_LOCK_TTL_MS: String(options.ttlMs),
        SHOP_DB_POOL_SIZE: String(options.dbPoolSize),
        SHOP_GATEWAY_URL: gateway.url,
      },
    })
  } catch (error) {
    await gateway.stop()
    throw error
  }
  const random = seededRandom(options.seed)
  let stopped = false
  let crowdPaused = false
  let drop: AbortController | undefined
  let chaos: Chaos | undefined
  if (options.pauseEveryMs > 0) {
    chaos = startPauseChaos(supervisor, { random, pauseMs: Math.round(2.5 * options.ttlMs), gapMs: options.pauseEveryMs, firstAfterMs: options.pauseEveryMs })
  }
  const crowd = (async () => {
    if (options.buyersPerDrop <= 0) return
    for (let n = 1; !stopped; n++) {
      while (crowdPaused && !stopped) await sleep(200)
      if (stopped) break
      const sku = `drop-${n}`
      await addProduct(options.database, sku, options.stockPerDrop)
      options.onDrop?.(n)
      drop = new AbortController()
      await runLoad({
        targets: supervisor.instances.map((i) => i.url),
        sku,
        buyers: options.buyersPerDrop,
        concurrency: 16,
        random,
        purchaseTimeoutMs: 60_000,
        paymentTimeoutMs: 2 * options.ttlMs,
        signal: drop.signal,
      }).catch(() => undefined)
      for (let i = 0; i < 50 && !stopped; i++) await sleep(100)
    }
  })()
  return {
    supervisor,
    gateway: { url: gateway.url, external: options.gatewayUrl !== undefined },
    setCrowdPaused(paused) {
      crowdPaused = paused
      if (paused) drop?.abort()
    },
    async stop() {
      stopped = true
      drop?.abort()
      await chaos?.stop()
      await supervisor.stop()
      await gateway.stop()
      await crowd.catch(() => {})
    },
  }
}
