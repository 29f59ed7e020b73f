/**
 * The fenced-resource core behind express (or anything with the same `(req, res, next)` shape:
 * the types here are structural, so this package does not depend on express).
 *
 * Answers, as JSON `{ error: { code, message, ... } }`:
 * - 400 `invalid_fencing_header` (with `header`): a fencing header that cannot be read;
 * - 400 `missing_fencing_header` (with `header`): none sent where `required`;
 * - 409 `stale_fencing_token` (with `resource`, `token`, `storedToken` as strings): a token older
 *   than the newest this service has seen for the resource.
 */
import { InvalidFencingHeaderError, StaleFencingTokenError } from './errors.js'
import type { FencedClient, TransactionClientOf } from './fenced-transaction.js'
import { resolveFencedResource, withFencedResource, type FencedResourceOptions } from './fenced-resource.js'
import { FENCING_TOKEN_HEADER, readFencingHeaders, type FencingClaim } from './fencing-headers.js'

/** The request as the middleware reads it: Node's lower-cased headers. */
export interface FencingRequest {
  readonly headers: Readonly<Record<string, string | string[] | undefined>>
}

/** The response as the middleware writes it. */
export interface FencingResponse {
  readonly locals: Record<string, unknown>
  readonly headersSent?: boolean
  status(code: number): { json(body: unknown): unknown }
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
   * refused with 409 before any work. Default true. A handler that writes in the service's
   * database should do its writes in `res.locals.fencing.transaction(fn)` as well, or instead
   * (`false`): only then are the check and the writes one transaction.
   */
  recordBeforeHandler?: boolean
}

/** The answer to a fencing failure, framework-neutral: `undefined` for any other error. */
export function fencingErrorResponse(error: unknown, claim?: FencingClaim): { status: number; body: { error: Record<string, string> } } | undefined {
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
  return undefined
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
      claim = readFencingHeaders((name) => req.headers[name.toLowerCase()])
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
 * `res.locals.fencing.transaction`: 400 and 409 as above; anything else goes to the next handler.
 */
export function fencingErrorHandler(): (error: unknown, req: FencingRequest, res: FencingResponse, next: FencingNext) => void {
  return (error, _req, res, next) => {
    const fencing = res.locals.fencing as FencingClaim | undefined
    const answer = res.headersSent === true ? undefined : fencingErrorResponse(error, fencing)
    if (answer === undefined) next(error)
    else send(res, answer)
  }
}

function send(res: FencingResponse, answer: { status: number; body: unknown }): void {
  res.status(answer.status).json(answer.body)
}
