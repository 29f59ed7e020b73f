/**
 * The live shop as a long-running service (docker-compose's `shop`, or by hand): N instances on
 * fixed ports, the payment gateway they charge (forked here, or the one `SHOP_GATEWAY_URL`
 * names), optionally a steady crowd in rounds and the pause chaos. Stops everything it started on
 * SIGINT/SIGTERM.
 *
 * | variable | default | meaning |
 * | --- | --- | --- |
 * | `REDIS_URL` | 127.0.0.1:6379, else a spawned redis-server | |
 * | `DATABASE_URL` | embedded PGlite | `?schema=` picks the schema (default `demo_shop`; it is reset at start) |
 * | `SHOP_INSTANCES` | `4` | instance processes |
 * | `SHOP_MODE` | `fenced` | `unsafe`, `lock` or `fenced` |
 * | `SHOP_BASE_PORT` | `3001` | ports `3001`…`3000+N` |
 * | `HOST` | `127.0.0.1` | `0.0.0.0` in a container |
 * | `SHOP_LOCK_TTL_MS` | `1000` | lock lease |
 * | `SHOP_PAUSE_EVERY_MS` | `0` | freeze a lock holder past its TTL this often (0: never) |
 * | `SHOP_BUYERS_PER_DROP` / `SHOP_STOCK_PER_DROP` | `0` / `30` | a crowd in rounds (0 buyers: none) |
 * | `SHOP_DASHBOARD_PORT` | `0` | serve the dashboard (apps/dashboard/dist) and its API on this port on `HOST` (0: no dashboard) |
 * | `SHOP_GATEWAY_URL` | none: a gateway process forked here | the payment gateway to charge (docker-compose's `gateway`); its ledger must be in the shop's schema, where double charges are counted |
 */
import { databaseTarget, redact, startEmbeddedDatabase } from './database.js'
import { startDashboard } from './dashboard/start-dashboard.js'
import { startLiveShop } from './live-shop.js'
import { PROTECTION_MODES, type ProtectionMode } from './protection.js'
import { resolveRedis } from '@fencelock/devkit/redis-endpoint'

function int(name: string, fallback: number, min: number, max: number): number {
  const raw = process.env[name]
  if (raw === undefined || raw === '') return fallback
  if (!/^\d+$/.test(raw) || Number(raw) < min || Number(raw) > max) throw new Error(`${name} must be an integer from ${min} to ${max} (got ${JSON.stringify(raw)})`)
  return Number(raw)
}

/** An http(s) URL from the environment, or undefined when unset. */
function httpUrl(name: string): string | undefined {
  const raw = process.env[name]
  if (raw === undefined || raw === '') return undefined
  const protocol = URL.canParse(raw) ? new URL(raw).protocol : ''
  if (protocol !== 'http:' && protocol !== 'https:') throw new Error(`${name} must be an http:// or https:// URL (got ${JSON.stringify(raw)})`)
  return raw
}

async function main(): Promise<void> {
  const mode = process.env.SHOP_MODE || 'fenced'
  if (!(PROTECTION_MODES as readonly string[]).includes(mode)) throw new Error(`SHOP_MODE must be one of ${PROTECTION_MODES.join(', ')} (got ${JSON.stringify(mode)})`)
  const instances = int('SHOP_INSTANCES', 4, 1, 16)
  const basePort = int('SHOP_BASE_PORT', 3001, 1, 65_000)
  const ttlMs = int('SHOP_LOCK_TTL_MS', 1_000, 100, 60_000)
  const pauseEveryMs = int('SHOP_PAUSE_EVERY_MS', 0, 0, 3_600_000)
  const buyersPerDrop = int('SHOP_BUYERS_PER_DROP', 0, 0, 100_000)
  const stockPerDrop = int('SHOP_STOCK_PER_DROP', 30, 1, 100_000)
  const dashboardPort = int('SHOP_DASHBOARD_PORT', 0, 0, 65_535)
  const gatewayUrl = httpUrl('SHOP_GATEWAY_URL')
  // Double charges are counted in the gateway's ledger, read through the shop's schema: an
  // embedded database (this process's) cannot hold another process's ledger.
  if (gatewayUrl !== undefined && !process.env.DATABASE_URL) throw new Error('SHOP_GATEWAY_URL needs DATABASE_URL: the gateway keeps its ledger in the shop’s PostgreSQL schema, where the charges are counted')

  const cleanups: Array<() => Promise<void>> = []
  const redis = await resolveRedis()
  cleanups.push(() => redis.stop())
  let connectionString: string
  let schema = 'demo_shop'
  let origin: string
  if (process.env.DATABASE_URL) {
    const target = databaseTarget(process.env.DATABASE_URL)
    connectionString = target.connectionString
    if (new URL(process.env.DATABASE_URL).searchParams.has('schema')) schema = target.schema
    origin = redact(process.env.DATABASE_URL)
  } else {
    const embedded = await startEmbeddedDatabase()
    cleanups.push(() => embedded.stop())
    connectionString = embedded.connectionString
    origin = 'embedded PGlite'
  }
  const embedded = origin === 'embedded PGlite'
  const shop = await startLiveShop({
    redisUrl: redis.url,
    database: { connectionString, schema },
    instances,
    mode: mode as ProtectionMode,
    basePort,
    host: process.env.HOST || '127.0.0.1',
    dbPoolSize: embedded ? 1 : 4,
    ttlMs,
    pauseEveryMs,
    buyersPerDrop,
    stockPerDrop,
    seed: 7,
    gatewayUrl,
    onDrop: (drop) => console.log(`[shop] drop ${drop}: ${stockPerDrop} units, ${buyersPerDrop} buyers`),
  })
  cleanups.push(() => shop.stop())
  console.log(`[shop] ${mode} mode, Redis ${redis.origin}, PostgreSQL ${origin} schema ${schema}`)
  console.log(`[shop] payment gateway ${shop.gateway.url}${shop.gateway.external ? ' (SHOP_GATEWAY_URL)' : ' (forked)'}`)
  for (const i of shop.supervisor.instances) console.log(`[shop] ${i.id} ${i.url} (pid ${i.pid})`)
  if (dashboardPort > 0) {
    const dashboard = await startDashboard({
      live: { shop, mode: mode as ProtectionMode },
      redis,
      database: { connectionString, origin },
      host: process.env.HOST || '127.0.0.1',
      port: dashboardPort,
      runOptions: { concurrency: embedded ? 16 : 32 },
    })
    cleanups.push(() => dashboard.stop())
    console.log(`[shop] dashboard on port ${dashboardPort}: ${dashboard.url}`)
  }

  let stopping = false
  const stop = async (code: number) => {
    if (stopping) return
    stopping = true
    for (const cleanup of cleanups.reverse()) await cleanup().catch(() => {})
    process.exit(code)
  }
  process.on('SIGINT', () => void stop(130))
  process.on('SIGTERM', () => void stop(0))
}

main().catch((error: unknown) => {
  console.error(`[shop] ${error instanceof Error ? error.message : String(error)}`)
  process.exit(1)
})
