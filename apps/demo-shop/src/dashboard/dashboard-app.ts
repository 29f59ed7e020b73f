/**
 * The dashboard's HTTP server, next to the shop in the process of `npm run demo`: the built
 * dashboard (apps/dashboard/dist) and its API.
 *
 * | route | answers |
 * | --- | --- |
 * | `GET /api/dashboard/stream` | server-sent events: `history` (the last minutes' points) once, then `snapshot` every second |
 * | `GET /api/dashboard` | the latest snapshot, JSON |
 * | `GET /api/runs` | `{active, runs, limits}`: the run going on and the last runs |
 * | `POST /api/runs` `{mode, chaos, buyers?, stock?}` | 202 the run started · 400 invalid · 409 a run is going on · 415 not JSON · 403 from another site · 422 chaos unavailable |
 * | `POST /api/comparisons` `{chaos, buyers?, stock?}` | 202 the first of three runs (no lock, lock only, lock + fencing; one seed) started · the same errors |
 * | `GET /` and the assets | the dashboard |
 * | any, with a `Host` that is not this server's | 403 `host_not_allowed` (allowed-host.ts: loopback names and the address the connection came in on, on the port it listens on) |
 *
 * Starting a run is the only thing the browser can do, and it is fenced in: modes and chaos from
 * their enumerations, bounded sizes, one run at a time, JSON only (a cross-site form cannot send
 * it without a preflight, which is never granted), a same-origin check, and — on every route — a
 * `Host` that names this server, so a DNS-rebinding page can neither read nor start. No route releases,
 * extends or changes a lock: a run takes its own locks under its own names.
 */
import { existsSync } from 'node:fs'
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import express, { type ErrorRequestHandler, type Express, type Request, type Response } from 'express'
import { hostAllowed, pageUrls, parseHost, type LocalEndpoint } from './allowed-host.js'
import type { DashboardSampler } from './dashboard-sampler.js'
import { FlashSaleRunError, InvalidRunRequestError, RUN_HISTORY, parseComparisonRequest, parseRunRequest, RunInProgressError, type FlashSaleRuns } from './flash-sale-runs.js'
import type { ApiError } from './wire.js'

/** Largest body of `POST /api/runs`. */
export const MAX_RUN_BODY_BYTES = 1_024
/** Most browsers streaming at once; more get 503 (each costs a socket and a write a second). */
export const MAX_STREAMS = 32

/** The built dashboard: apps/dashboard/dist, unless `DASHBOARD_DIST` points elsewhere. */
export function dashboardDistDir(): string {
  return process.env.DASHBOARD_DIST || fileURLToPath(new URL('../../../dashboard/dist/', import.meta.url))
}

/** What {@link createDashboardApp} needs. */
export interface DashboardAppDeps {
  readonly sampler: DashboardSampler
  readonly runs: FlashSaleRuns
  /** Directory of the built dashboard; undefined or missing: a page that says how to build it. */
  readonly staticDir: string | undefined
}

const fail = (res: Response, status: number, error: string, message: string) => {
  const body: ApiError = { error, message }
  res.status(status).json(body)
}

/**
 * True when the request comes from a page of another origin (the browser says so in Origin /
 * Sec-Fetch-Site). Only meaningful once the Host itself is known to be this server's
 * ({@link hostAllowed}): a rebinding page's Origin matches the Host it sends.
 */
function crossSite(req: Request): boolean {
  if (req.get('sec-fetch-site') === 'cross-site') return true
  const origin = req.get('origin')
  if (origin === undefined) return false
  let from: URL
  try {
    from = new URL(origin)
  } catch {
    return true
  }
  const host = parseHost(req.get('host'))
  const page = parseHost(from.host)
  return host === undefined || page === undefined || host.name !== page.name || host.port !== page.port
}

/**
 * Builds the dashboard's express app.
 * @example
 * ```ts
 * const app = createDashboardApp({ sampler, runs, staticDir: dashboardDistDir() })
 * app.listen(3000, '127.0.0.1')
 * ```
 */
export function createDashboardApp(deps: DashboardAppDeps): Express {
  const { sampler, runs } = deps
  const app = express()
  app.disable('x-powered-by')
  app.disable('etag')
  app.use((_req, res, next) => {
    res.setHeader('X-Content-Type-Options', 'nosniff')
    res.setHeader('Referrer-Policy', 'no-referrer')
    // No framing (a run button must not be clickjacked); scripts only from here.
    res.setHeader('Content-Security-Policy', "default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; frame-ancestors 'none'")
    next()
  })
  // Before every route, the page included: a DNS-rebinding page reads as well as it writes.
  app.use((req, res, next) => {
    const local: LocalEndpoint = { address: req.socket.localAddress, port: req.socket.localPort }
    if (hostAllowed(req.get('host'), local)) return next()
    const host = JSON.stringify((req.get('host') ?? '').slice(0, 100))
    fail(res, 403, 'host_not_allowed', `Host ${host} is not this server (a page of another name, e.g. DNS rebinding); open ${pageUrls(local).join(' or ')}`)
  })

  let streams = 0
  app.get('/api/dashboard/stream', (req, res) => {
    if (streams >= MAX_STREAMS) return fail(res, 503, 'too_many_streams', `at most ${MAX_STREAMS} dashboards at once`)
    streams++
    res.writeHead(200, {
      'Content-Type': 'text/event-stream; charset=utf-8',
      'Cache-Control': 'no-store',
      Connection: 'keep-alive',
      'X-Accel-Buffering': 'no',
    })
    // EventSource reconnects by itself after this long when the connection drops.
    res.write('retry: 2000\n\n')
    res.write(`event: history\ndata: ${JSON.stringify(sampler.history())}\n\n`)
    res.write(`event: snapshot\ndata: ${sampler.snapshotJson}\n\n`)
    const unsubscribe = sampler.subscribe((json) => {
      res.write(`event: snapshot\ndata: ${json}\n\n`)
    })
    req.socket.setNoDelay(true)
    res.on('close', () => {
      streams--
      unsubscribe()
    })
  })

  app.get('/api/dashboard', (_req, res) => {
    res.setHeader('Cache-Control', 'no-store')
    res.type('application/json').send(sampler.snapshotJson)
  })

  app.get('/api/runs', (_req, res) => {
    res.setHeader('Cache-Control', 'no-store')
    res.json({ active: runs.active ?? null, runs: runs.runs, limits: runs.limits })
  })

  // A finished run's incident timeline and its charged-twice drill-down (kept while the run is listed).
  app.get(['/api/runs/:id/incident', '/api/runs/:id/charged-twice'], (req, res) => {
    res.setHeader('Cache-Control', 'no-store')
    const raw = String(req.params.id)
    const id = /^[1-9][0-9]{0,8}$/.test(raw) ? Number(raw) : undefined
    const answer = id === undefined ? undefined : req.path.endsWith('/incident') ? runs.incident(id) : runs.chargedTwice(id)
    if (answer === undefined) return fail(res, 404, 'no_such_run', `no run ${JSON.stringify(raw.slice(0, 20))} is listed (the last ${RUN_HISTORY} runs and the last comparison's are)`)
    res.json(answer)
  })

  app.post(['/api/runs', '/api/comparisons'], (req, res, next) => {
    if (crossSite(req)) return fail(res, 403, 'cross_origin', 'runs are started from the dashboard itself')
    if (!req.is('application/json')) return fail(res, 415, 'unsupported_media_type', 'the body must be JSON (Content-Type: application/json)')
    next()
  })
  app.post(['/api/runs', '/api/comparisons'], express.json({ limit: MAX_RUN_BODY_BYTES, strict: true }), (req, res) => {
    try {
      const run = req.path === '/api/comparisons' ? runs.compare(parseComparisonRequest(req.body, runs.limits)) : runs.start(parseRunRequest(req.body, runs.limits))
      res.status(202).json(run)
    } catch (error) {
      if (error instanceof InvalidRunRequestError) return fail(res, 400, error.code, error.message)
      if (error instanceof RunInProgressError) return fail(res, 409, error.code, error.message)
      if (error instanceof FlashSaleRunError) return fail(res, error.code === 'shutting_down' ? 503 : 422, error.code, error.message)
      throw error
    }
  })

  app.use('/api', (req, res) => fail(res, 404, 'not_found', `no route ${req.method} /api${req.path.slice(0, 100)}`))

  const dir = deps.staticDir
  if (dir !== undefined && existsSync(join(dir, 'index.html'))) {
    // Vite's assets have content hashes in their names: cache them for good; index.html never.
    app.use('/assets', express.static(join(dir, 'assets'), { immutable: true, maxAge: '1y', index: false, fallthrough: false }))
    app.use(express.static(dir, { index: 'index.html', maxAge: 0, setHeaders: (res) => res.setHeader('Cache-Control', 'no-cache') }))
  } else {
    app.get('/', (_req, res) => {
      res
        .status(503)
        .type('text/plain')
        .send('The dashboard is not built. Run `npm run demo` (it builds it), or `npm run build -w @fencelock/dashboard`.\nThe API answers meanwhile: /api/dashboard, /api/runs.\n')
    })
  }
  app.use((req, res) => fail(res, 404, 'not_found', `no route ${req.method} ${req.path.slice(0, 100)}`))

  const onError: ErrorRequestHandler = (error: unknown, _req, res, next) => {
    if (res.headersSent) return next(error)
    const { type, status } = (error ?? {}) as { type?: unknown; status?: unknown }
    if (type === 'entity.too.large') return fail(res, 413, 'body_too_large', `the body must be at most ${MAX_RUN_BODY_BYTES} bytes`)
    if (type === 'entity.parse.failed') return fail(res, 400, 'malformed_json', 'the body is not valid JSON')
    if (typeof status === 'number' && status >= 400 && status < 500) return fail(res, status, 'bad_request', 'the request could not be read')
    console.error('[dashboard]', error)
    return fail(res, 500, 'internal', 'unexpected error')
  }
  app.use(onError)
  return app
}

/** A listening dashboard server. */
export interface DashboardServer {
  readonly url: string
  readonly server: Server
  /** Closes the streams and the server. */
  close(): Promise<void>
}

/**
 * Listens on `host:port`; when `port` is taken and `fallbackToFreePort` is set, on a free port.
 * @example
 * ```ts
 * const { url, close } = await listenDashboard(app, { host: '127.0.0.1', port: 3000, fallbackToFreePort: true })
 * console.log(`Open ${url}`)
 * ```
 */
export async function listenDashboard(app: Express, options: { host: string; port: number; fallbackToFreePort?: boolean }): Promise<DashboardServer> {
  const listen = (port: number) =>
    new Promise<Server>((resolve, reject) => {
      const server = createServer(app)
      server.once('error', reject)
      server.listen(port, options.host, () => {
        server.off('error', reject)
        resolve(server)
      })
    })
  let server: Server
  try {
    server = await listen(options.port)
  } catch (error) {
    if (!options.fallbackToFreePort || (error as NodeJS.ErrnoException).code !== 'EADDRINUSE') throw error
    server = await listen(0)
  }
  const { port } = server.address() as AddressInfo
  const host = options.host === '0.0.0.0' || options.host === '::' ? '127.0.0.1' : options.host
  return {
    url: `http://${host.includes(':') ? `[${host}]` : host}:${port}/`,
    server,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve())
        // Event streams never end by themselves.
        server.closeAllConnections()
      }),
  }
}
