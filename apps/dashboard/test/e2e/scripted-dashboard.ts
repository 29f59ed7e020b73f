// The dashboard's own server — its routes, host and origin checks, sampler, runs and stream —
// serving a production build, with the two things a layout test cannot wait for stood in for: a
// flash sale (a runner whose runs end when the test says, with the figures it gives) and the live
// shop's instance (a small HTTP server answering `/api/state` and `/metrics` with what the test
// sets). Everything the page then draws is the real page's, from the real server's snapshots.
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { createDashboardApp, listenDashboard, type DashboardServer } from '@fencelock/demo-shop/dashboard/dashboard-app'
import { DashboardSampler, type invariantsOf } from '@fencelock/demo-shop/dashboard/dashboard-sampler'
import { FlashSaleRuns, type FlashSaleRunner } from '@fencelock/demo-shop/dashboard/flash-sale-runs'
import type { ChargedTwiceOrder, IncidentView } from '../../src/wire'

type Report = Awaited<ReturnType<FlashSaleRunner>>
type RunOptions = Parameters<FlashSaleRunner>[0]
/** What an instance's `GET /api/state` answers (as the sampler reads it). */
export type ShopState = Parameters<typeof invariantsOf>[0]

/** What a stood-in sale ends with, beyond a clean sale of its whole stock. */
export type ReportFigures = Partial<Omit<Report, 'incident' | 'chargedTwice'>> & {
  incident?: { incident: Omit<IncidentView, 'runId'> | null; reason: string | null }
  chargedTwice?: { orders: ChargedTwiceOrder[]; total: number }
}

/** A clean sale of `options.stock` units, then `over`. */
function reportOf(options: RunOptions, over: ReportFigures): Report {
  return {
    options,
    durationMs: 8_412,
    initialStock: options.stock,
    remainingStock: 0,
    sold: options.stock,
    oversoldUnits: 0,
    orders: options.stock,
    paidOrders: options.stock,
    payments: options.stock,
    doublePaidOrders: 0,
    gatewayCharges: options.stock,
    doubleChargedOrders: 0,
    extraCharges: 0,
    lostUpdates: 0,
    chargedUnpaidOrders: 0,
    paidUnchargedOrders: 0,
    amountMismatchOrders: 0,
    unmatchedCharges: 0,
    reconciledPaid: 0,
    cancelledOrders: 0,
    violations: 0,
    staleWritesRejected: 0,
    acquireP99Ms: 640,
    expiredLocks: 0,
    chaosEvents: 0,
    incident: { incident: null, reason: 'No pause landed on a lock holder in this sale.' },
    chargedTwice: { orders: [], total: 0 },
    ...over,
  } as unknown as Report
}

/** A running dashboard server with its stand-ins. */
export interface ScriptedDashboard {
  /** The page's URL (`http://127.0.0.1:<port>/`). */
  readonly url: string
  readonly runs: FlashSaleRuns
  /** Runs started and not yet ended, oldest first. */
  readonly pending: ReadonlyArray<{ readonly options: RunOptions }>
  /** Ends the oldest pending run with `figures`, and waits until the next one of a comparison (if any) is under way. */
  finish(figures?: ReportFigures): Promise<void>
  /** What the live shop's instance answers from now on. */
  setShopState(state: ShopState): void
  /** Stops the dashboard's HTTP server only: the page loses its stream. */
  stopServer(): Promise<void>
  close(): Promise<void>
}

/** A fenced shop of one drop, every order paid, no lock held. */
export function shopState(over: Partial<ShopState> = {}): ShopState {
  return {
    instance: 'shop-1',
    mode: 'fenced',
    at: new Date().toISOString(),
    products: [
      {
        sku: 'drop-7',
        name: 'Drop 7',
        initialStock: 30,
        stock: 4,
        unitsSold: 26,
        orders: 26,
        oversoldUnits: 0,
        lostUpdates: 0,
        segments: 0,
      },
    ],
    orders: 26,
    paidOrders: 26,
    payments: 26,
    gatewayCharges: 26,
    reconciled: { paid: 0, cancelled: 0 },
    violations: {
      oversoldUnits: 0,
      doubleChargedOrders: 0,
      extraCharges: 0,
      doublePaidOrders: 0,
      lostUpdates: 0,
      chargedUnpaidOrders: 0,
      paidUnchargedOrders: 0,
      amountMismatchOrders: 0,
      unmatchedCharges: 0,
      unsettledOrders: 0,
      total: 0,
    },
    inFlight: { chargedUnpaidOrders: 0 },
    locks: [],
    ...over,
  }
}

/** Starts the dashboard on a free loopback port, serving `staticDir`. */
export async function startScriptedDashboard(options: {
  staticDir: string
  intervalMs?: number
}): Promise<ScriptedDashboard> {
  let state = shopState()
  const instance: Server = createServer((req, res) => {
    if (req.url === '/api/state')
      return void res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(state))
    if (req.url === '/metrics') return void res.writeHead(200, { 'content-type': 'text/plain' }).end('')
    res.writeHead(404).end()
  })
  await new Promise<void>((resolve) => instance.listen(0, '127.0.0.1', resolve))
  const instanceUrl = `http://127.0.0.1:${(instance.address() as AddressInfo).port}`

  const pending: Array<{ options: RunOptions; resolve: (report: Report) => void; reject: (error: Error) => void }> = []
  const runner: FlashSaleRunner = (runOptions, onProgress) =>
    new Promise<Report>((resolve, reject) => {
      onProgress({
        phase: 'selling',
        done: Math.floor(runOptions.buyers / 3),
        buyers: runOptions.buyers,
        chaosCount: 1,
        instances: [],
      })
      pending.push({ options: runOptions, resolve, reject })
    })
  // No Redis and no database is touched: the runner stands in for the sale that would use them.
  const runs = new FlashSaleRuns({
    runner,
    redis: { url: 'redis://127.0.0.1:1', origin: 'unused', owned: undefined, stop: async () => {} },
    database: { connectionString: 'postgresql://unused', origin: 'unused' },
    limits: { redisRestart: false },
  })
  const sampler = new DashboardSampler({
    runs,
    live: { mode: 'fenced', instances: () => [{ id: 'shop-1', pid: process.pid, port: 0, url: instanceUrl }] },
    intervalMs: options.intervalMs ?? 500,
    // The stand-in answers at once; a loaded machine may still take longer than the 800 ms default.
    requestTimeoutMs: 5_000,
  })
  const server: DashboardServer = await listenDashboard(
    createDashboardApp({ sampler, runs, staticDir: options.staticDir }),
    { host: '127.0.0.1', port: 0 },
  )
  sampler.start()
  let serverStopped = false
  return {
    url: server.url,
    runs,
    pending,
    async finish(figures = {}) {
      const run = pending.shift()
      if (run === undefined) throw new Error('no run is pending')
      run.resolve(reportOf(run.options, figures))
      // Asked before the resolution lands: this waits for the run just ended (its end starts the
      // comparison's next run, if any).
      await runs.settled()
    },
    setShopState(next) {
      state = next
    },
    async stopServer() {
      serverStopped = true
      await server.close()
    },
    async close() {
      for (const run of pending.splice(0)) run.reject(new Error('test over'))
      sampler.stop()
      await runs.close()
      if (!serverStopped) await server.close()
      instance.closeAllConnections()
      await new Promise((resolve) => instance.close(resolve))
    },
  }
}
