/**
 * Wires the dashboard next to a live shop: the runs, the sampler and the HTTP server, and one
 * `stop()` for all three. `demo.ts` and `serve.ts` call it.
 */
import type { FlashSaleOptions } from '../flash-sale.js'
import { runFlashSale } from '../flash-sale.js'
import type { LiveShop } from '../live-shop.js'
import type { ProtectionMode } from '../protection.js'
import type { RedisEndpoint } from '@fencelock/devkit/redis-endpoint'
import { createDashboardApp, dashboardDistDir, listenDashboard } from './dashboard-app.js'
import { DashboardSampler } from './dashboard-sampler.js'
import { FlashSaleRuns, type FlashSaleRunner } from './flash-sale-runs.js'
import type { RunLimits } from './wire.js'

/** Options of {@link startDashboard}. */
export interface StartDashboardOptions {
  /** The live shop to watch, and its mode. */
  readonly live: { readonly shop: LiveShop; readonly mode: ProtectionMode } | undefined
  readonly redis: RedisEndpoint
  readonly database: { readonly connectionString: string; readonly origin: string }
  readonly host: string
  /** Port to listen on; when taken (and `fallbackToFreePort`), a free one. */
  readonly port: number
  readonly fallbackToFreePort?: boolean
  /** Options of every run from the browser (sizes and mode come from the request). */
  readonly runOptions?: Partial<FlashSaleOptions>
  readonly limits?: Partial<RunLimits>
  /** Runs a flash sale. Default: runFlashSale. */
  readonly runner?: FlashSaleRunner
  /** Where the built dashboard is. Default: {@link dashboardDistDir}. */
  readonly staticDir?: string
  readonly log?: (line: string) => void
}

/** A running dashboard. */
export interface RunningDashboard {
  /** The one URL to open. */
  readonly url: string
  readonly runs: FlashSaleRuns
  /** Stops a run going on (it cleans up after itself), the sampler and the server. */
  stop(): Promise<void>
}

/**
 * Starts the dashboard server.
 * @example
 * ```ts
 * const dashboard = await startDashboard({ live: { shop, mode: 'fenced' }, redis, database, host: '127.0.0.1', port: 3000, fallbackToFreePort: true })
 * console.log(`Open ${dashboard.url}`)
 * ```
 */
export async function startDashboard(options: StartDashboardOptions): Promise<RunningDashboard> {
  const log = options.log ?? ((line: string) => console.error(line))
  const live = options.live
  const runs = new FlashSaleRuns({
    runner: options.runner ?? runFlashSale,
    redis: options.redis,
    database: options.database,
    ...(options.runOptions === undefined ? {} : { baseOptions: options.runOptions }),
    ...(options.limits === undefined ? {} : { limits: options.limits }),
    onActiveChange: (active) => live?.shop.setCrowdPaused(active),
    onRunError: (run, error) => log(`[dashboard] flash sale #${run.id} failed: ${error instanceof Error ? error.message : String(error)}`),
  })
  const sampler = new DashboardSampler({
    runs,
    ...(live === undefined ? {} : { live: { mode: live.mode, instances: () => live.shop.supervisor.instances } }),
  })
  const app = createDashboardApp({ sampler, runs, staticDir: options.staticDir ?? dashboardDistDir() })
  const server = await listenDashboard(app, { host: options.host, port: options.port, fallbackToFreePort: options.fallbackToFreePort ?? false })
  sampler.start()
  let stopping: Promise<void> | undefined
  return {
    url: server.url,
    runs,
    stop: () =>
      (stopping ??= (async () => {
        sampler.stop()
        await server.close()
        await runs.close()
      })()),
  }
}
