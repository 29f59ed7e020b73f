import { InvalidMetricsOptionError } from './errors.js'

/** The part of a request the handler reads: Express's `Request` and Node's `IncomingMessage` fit. */
export interface MetricsRequest {
  readonly method?: string | undefined
}

/** The part of a response the handler writes: Express's `Response` and Node's `ServerResponse` fit. */
export interface MetricsResponse {
  statusCode: number
  setHeader(name: string, value: string): unknown
  end(body?: string): unknown
}

/** What the handler needs of a registry: prom-client's `Registry` fits. */
export interface MetricsSource {
  metrics(): Promise<string>
  readonly contentType: string
}

/**
 * A request handler that serves `registry` in the Prometheus text format (or OpenMetrics, if the
 * registry is set to it), with the registry's content type. Typed structurally, so this package
 * does not load Express: it works as an Express route and as a plain `node:http` listener.
 * When collecting fails, Express's `next(error)` gets the error; without `next` the answer is a 500.
 *
 * @example
 * ```ts
 * app.get('/metrics', metricsHandler(registry))
 * // or, without Express
 * http.createServer(metricsHandler(registry)).listen(9464)
 * ```
 */
export function metricsHandler(
  registry: MetricsSource,
): (req: MetricsRequest, res: MetricsResponse, next?: (error?: unknown) => void) => void {
  if (registry == null || typeof registry.metrics !== 'function') {
    throw new InvalidMetricsOptionError('registry', 'must be a prom-client Registry', registry)
  }
  // A plain (void) handler, as `http.createServer` and express expect one: the collection runs
  // asynchronously and every outcome of it is answered here, so no promise is left to the caller.
  return (req, res, next) => {
    registry.metrics().then(
      (body) => {
        res.statusCode = 200
        res.setHeader('Content-Type', registry.contentType)
        // Every scrape must see current values, never a cached copy.
        res.setHeader('Cache-Control', 'no-store')
        res.end(req.method === 'HEAD' ? undefined : body)
      },
      (error: unknown) => {
        if (next) return next(error)
        res.statusCode = 500
        res.setHeader('Content-Type', 'text/plain; charset=utf-8')
        res.end(`collecting metrics failed: ${error instanceof Error ? error.message : String(error)}\n`)
      },
    )
  }
}
