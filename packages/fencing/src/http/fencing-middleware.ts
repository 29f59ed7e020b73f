/**
 * The fenced-resource core behind express (or anything with the same `(req, res, next)` shape:
 * the types here are structural, so this package does not depend on express).
 *
 * Answers, as JSON `{ error: { code, message, ... } }`:
 * - 400 `invalid_fencing_header` (with `header`): a fencing header that cannot be read;
 * - 400 `missing_fencing_header` (with `header`): none sent where `required`;
 * - 409 `stale_fencing_token` (with `resource`, `token`, `storedToken` as strings): a token older
 *   than the newest this service has seen for the resource;
 * - 503 `fencing_busy` with `Retry-After: 1`: the fenced transaction could not start in time, or ran
 *   out of it (Prisma's P2028: many requests for one resource wait for its row lock and the pool).
 *   Nothing of it was kept; the caller may retry.
 */
import { InvalidFencingHeaderError, StaleFencingTokenError } from '../shared/errors.js'
import type { FencedClient, TransactionClientOf } from '../prisma/fenced-transaction.js'
import { resolveFencedResource, withFencedResource, type FencedResourceOptions } from './fenced-resource.js'
import { FENCING_TOKEN_HEADER, readFencingHeaders, type FencingClaim } from './fencing-headers.js'

/**
 * The request as the middleware reads it: Node's lower-cased headers, and — where Node has them
 * (`http.IncomingMessage`, so express) — `headersDistinct` or `rawHeaders`, which keep a header
 * sent twice apart (`headers` joins the values with ", ").
 */
export interface FencingRequest {
  readonly headers: Readonly<Record<string, string | string[] | undefined>>
  readonly headersDistinct?: Readonly<Record<string, string[] | undefined>>
  readonly rawHeaders?: readonly string[]
}

/** The response as the middleware writes it. */
export interface FencingResponse {
  readonly locals: Record<string, unknown>
  readonly headersSent?: boolean
  status(code: number): { json(body: unknown): unknown }
  /** Sets a response header (`Retry-After` of a 503); Node's `ServerResponse` has it. */
  setHeader?(name: string, value: string): unknown
}

/** Reads a request header by name, every value it was sent with. */
function headerOf(req: FencingRequest, name: string): string | string[] | undefined {
  const lower = name.toLowerCase()
  if (req.headersDistinct !== undefined) return req.headersDistinct[lower]
  if (req.rawHeaders !== undefined) {
    const values: string[] = []
    for (let i = 0; i + 1 < req.rawHeaders.length; i += 2) if ((req.rawHeaders[i] as string).toLowerCase() === lower) values.push(req.rawHeaders[i + 1] as string)
    return values.length === 0 ? undefined : values
  }
  return req.headers[lower]
}

export type FencingNext = (error?: unknown) => void

/** What the middleware leaves in `res.locals.fencing` for the handler (absent when the request sent no fencing headers). */
export interface FencedRequest<C> extends FencingClaim {
  /**
   * Runs `fn` in one transaction whose first statement records the token for the resource
   * (`withFencedResource`): the handler's own writes then commit only with a token that is still
   * the newest. A stale token throws `StaleFencingTokenError`; pass it to `next`, and
   * {@link fencingErrorHandler} answers 409.
   */
  transaction<R>(fn: (tx: TransactionClientOf<C>) => Promise<R>): Promise<R>
}

/** Options of {@link fencingMiddleware}. */
export interface FencingMiddlewareOptions<C extends FencedClient> extends FencedResourceOptions {
  /** The service's own Prisma client, extended with `fencing()` (the resource model among its fenced models). Required. */
  db: C
  /** Refuse a request without fencing headers with 400 `missing_fencing_header`. Default false: it passes, without `res.locals.fencing`. */
  required?: boolean
  /**
   * Record the token (in a transaction of its own) before the handler runs, so an older token is
   * refused with 409 before any work. Default true. That check does **not** fence the handler's own
   * writes: it commits before the handler runs, so a request paused after it (token 500) can still
   * write after a newer one (501) did. A handler that writes in the service's database must do its
   * writes in `res.locals.fencing.transaction(fn)` — the token recorded and the writes in one
   * transaction, under the resource's row lock — and then `false` saves the extra transaction.
   */
  recordBeforeHandler?: boolean
}

/** The answer to a fencing failure, framework-neutral: `undefined` for any other error. */
export function fencingErrorResponse(
  error: unknown,
  claim?: FencingClaim,
): { status: number; body: { error: Record<string, string> }; headers?: Record<string, string> } | undefined {
  if (error instanceof InvalidFencingHeaderError) {
    return { status: 400, body: { error: { code: 'invalid_fencing_header', header: error.header, message: error.message } } }
  }
  if (error instanceof StaleFencingTokenError) {
    const body: Record<string, string> = {
      code: 'stale_fencing_token',
      message: 'a newer fencing token has been seen for this resource: the caller’s lock is no longer current; nothing was done',
      token: error.token.toString(),
    }
    if (claim !== undefined) body.resource = claim.resource
    if (error.storedToken !== undefined) body.storedToken = error.storedToken.toString()
    return { status: 409, body: { error: body } }
  }
  if (isTransactionTimeout(error)) {
    const body: Record<string, string> = {
      code: 'fencing_busy',
      message: 'the fenced transaction could not start or finish in time (many requests wait for this resource); nothing was done, retry',
    }
    if (claim !== undefined) body.resource = claim.resource
    return { status: 503, body: { error: body }, headers: { 'Retry-After': '1' } }
  }
  return undefined
}

/** Prisma's P2028: a transaction that could not start within `maxWait`, or ran past its `timeout` (and was rolled back). */
function isTransactionTimeout(error: unknown): boolean {
  return typeof error === 'object' && error !== null && (error as { code?: unknown }).code === 'P2028'
}

/**
 * Express middleware that makes the service a fenced store for the requests that carry fencing
 * headers (`Fencing-Token`, `Fencing-Resource`; see `fencingHeaders` for the client side). It
 * reads and checks them (400 for a bad one), records the token per resource in the service's own
 * database (409 for an older one), and leaves `res.locals.fencing` ({@link FencedRequest}) to the
 * handler. Options are checked when it is made, before any I/O.
 *
 * @example
 * ```ts
 * app.post('/v1/charges', fencingMiddleware({ db, model: 'FencedResource' }), async (req, res, next) => {
 *   const fencing = res.locals.fencing as FencedRequest<typeof db> | undefined
 *   ...
 * })
 * app.use(fencingErrorHandler())
 * ```
 */
export function fencingMiddleware<C extends FencedClient>(options: FencingMiddlewareOptions<C>): (req: FencingRequest, res: FencingResponse, next: FencingNext) => Promise<void> {
  resolveFencedResource(options?.db, options)
  const { db, required = false, recordBeforeHandler = true } = options
  return async (req, res, next) => {
    let claim: FencingClaim | undefined
    try {
      claim = readFencingHeaders((name) => headerOf(req, name))
    } catch (error) {
      send(res, fencingErrorResponse(error)!)
      return
    }
    if (claim === undefined) {
      if (required) {
        send(res, { status: 400, body: { error: { code: 'missing_fencing_header', header: FENCING_TOKEN_HEADER, message: 'this endpoint needs Fencing-Token and Fencing-Resource' } } })
        return
      }
      next()
      return
    }
    const known = claim
    const fenced: FencedRequest<C> = {
      token: known.token,
      resource: known.resource,
      transaction: (fn) => withFencedResource(db, known, options, fn),
    }
    res.locals.fencing = fenced
    if (recordBeforeHandler) {
      try {
        await fenced.transaction(async () => undefined)
      } catch (error) {
        const answer = fencingErrorResponse(error, known)
        if (answer !== undefined) send(res, answer)
        else next(error)
        return
      }
    }
    next()
  }
}

/**
 * Express error handler for the failures of {@link fencingMiddleware} and of
 * `res.locals.fencing.transaction`: 400, 409 and 503 as above; anything else goes to the next handler.
 */
export function fencingErrorHandler(): (error: unknown, req: FencingRequest, res: FencingResponse, next: FencingNext) => void {
  return (error, _req, res, next) => {
    const fencing = res.locals.fencing as FencingClaim | undefined
    const answer = res.headersSent === true ? undefined : fencingErrorResponse(error, fencing)
    if (answer === undefined) next(error)
    else send(res, answer)
  }
}

function send(res: FencingResponse, answer: { status: number; body: unknown; headers?: Record<string, string> }): void {
  for (const [name, value] of Object.entries(answer.headers ?? {})) res.setHeader?.(name, value)
  res.status(answer.status).json(answer.body)
}
