/**
 * The HTTP answer to a lock that could not be had, for express (or anything with the same
 * `(error, req, res, next)` shape: the types here are structural, so this package does not depend
 * on express). Both answers are `503` with `Retry-After`, as JSON `{ error: { code, message,
 * resource } }`:
 * - `lock_busy`: `LockTimeoutError` — another request held the lock for all of `waitMs`. The
 *   request is not in conflict with the resource's state (409 would say it is, and a client would
 *   not retry it); the server is busy with that resource now, and a retry later may succeed.
 * - `lock_unavailable`: `LockUnavailableError` — Redis did not answer (down, stalled, the
 *   connection refused). Nothing was done. The body never carries the error's own message, which
 *   names Redis's address.
 * Every other error is passed on with `next(error)`, as is any error once the response has started.
 */
import { InvalidLockOptionError, LockTimeoutError, LockUnavailableError } from './errors.js'

/** Defaults of {@link lockErrorHandler}'s options, in seconds. */
export const LOCK_ERROR_HANDLER_DEFAULTS = Object.freeze({
  /** `Retry-After` of a `lock_busy` answer: the lock's holder usually finishes within a second. */
  busyRetryAfterSeconds: 1,
  /** `Retry-After` of a `lock_unavailable` answer: Redis coming back takes longer than a holder finishing. */
  unavailableRetryAfterSeconds: 5,
})

/** Options of {@link lockErrorHandler} and {@link lockErrorResponse}. */
export interface LockErrorHandlerOptions {
  /** `Retry-After` of `lock_busy` (LockTimeoutError), whole seconds, 0 to 86 400. Default 1. */
  busyRetryAfterSeconds?: number
  /** `Retry-After` of `lock_unavailable` (LockUnavailableError), whole seconds, 0 to 86 400. Default 5. */
  unavailableRetryAfterSeconds?: number
}

/** The response as the handler writes it: Node's `ServerResponse` and express's fit. */
export interface LockErrorResponse {
  readonly headersSent?: boolean
  setHeader(name: string, value: string): unknown
  status(code: number): { json(body: unknown): unknown }
}

/** What an error maps to, for frameworks other than express. */
export interface LockErrorAnswer {
  readonly status: 503
  readonly headers: { readonly 'Retry-After': string }
  readonly body: {
    readonly error: {
      readonly code: 'lock_busy' | 'lock_unavailable'
      readonly message: string
      readonly resource?: string
    }
  }
}

const OPTION_NAMES = ['busyRetryAfterSeconds', 'unavailableRetryAfterSeconds'] as const

function resolve(options: unknown): Required<LockErrorHandlerOptions> {
  if (options === undefined) return { ...LOCK_ERROR_HANDLER_DEFAULTS }
  if (options === null || typeof options !== 'object')
    throw new InvalidLockOptionError('options', 'must be an object', options)
  const o = options as Record<string, unknown>
  for (const key of Object.keys(o)) {
    if (!(OPTION_NAMES as readonly string[]).includes(key)) {
      throw new InvalidLockOptionError(
        `options.${key}`,
        `is not an option of lockErrorHandler (the options are ${OPTION_NAMES.join(', ')})`,
        o[key],
      )
    }
  }
  const seconds = (field: (typeof OPTION_NAMES)[number]) => {
    const value = o[field] ?? LOCK_ERROR_HANDLER_DEFAULTS[field]
    if (typeof value !== 'number' || !Number.isInteger(value) || value < 0 || value > 86_400) {
      throw new InvalidLockOptionError(field, 'must be a whole number of seconds from 0 to 86400', value)
    }
    return value
  }
  return {
    busyRetryAfterSeconds: seconds('busyRetryAfterSeconds'),
    unavailableRetryAfterSeconds: seconds('unavailableRetryAfterSeconds'),
  }
}

/**
 * The answer for `error`: `503 lock_busy` for a `LockTimeoutError`, `503 lock_unavailable` for a
 * `LockUnavailableError`, each with `Retry-After`; `undefined` for any other error. Options are
 * checked before anything (`InvalidLockOptionError`).
 *
 * @example
 * ```ts
 * const answer = lockErrorResponse(error)
 * if (answer) return reply.code(answer.status).headers(answer.headers).send(answer.body)
 * ```
 */
export function lockErrorResponse(error: unknown, options?: LockErrorHandlerOptions): LockErrorAnswer | undefined {
  return answerOf(error, resolve(options))
}

function answerOf(error: unknown, o: Required<LockErrorHandlerOptions>): LockErrorAnswer | undefined {
  const resource =
    error instanceof LockTimeoutError || error instanceof LockUnavailableError ? error.resource : undefined
  const withResource = resource === undefined ? {} : { resource }
  if (error instanceof LockTimeoutError) {
    return {
      status: 503,
      headers: { 'Retry-After': String(o.busyRetryAfterSeconds) },
      body: {
        error: {
          code: 'lock_busy',
          message: 'another request holds this resource; nothing was done, retry',
          ...withResource,
        },
      },
    }
  }
  if (error instanceof LockUnavailableError) {
    return {
      status: 503,
      headers: { 'Retry-After': String(o.unavailableRetryAfterSeconds) },
      body: {
        error: {
          code: 'lock_unavailable',
          message: 'the lock service is unavailable; nothing was done, retry later',
          ...withResource,
        },
      },
    }
  }
  return undefined
}

/**
 * Express error middleware for the lock's errors: `LockTimeoutError` → `503 lock_busy`,
 * `LockUnavailableError` → `503 lock_unavailable`, each with `Retry-After`; every other error goes
 * to `next(error)` (put `fencingErrorHandler()` of `@fencelock/fencing`, and your own, after it).
 * Options are checked when it is made, before any request.
 *
 * @example
 * ```ts
 * app.post('/invoices/:id/pay', async (req, res) => res.json(await payInvoice(Number(req.params.id))))
 * app.use(lockErrorHandler())
 * app.use(fencingErrorHandler())
 * ```
 */
export function lockErrorHandler(
  options?: LockErrorHandlerOptions,
): (error: unknown, req: unknown, res: LockErrorResponse, next: (error?: unknown) => void) => void {
  const resolved = resolve(options)
  return (error, _req, res, next) => {
    const answer = res.headersSent === true ? undefined : answerOf(error, resolved)
    if (answer === undefined) {
      next(error)
      return
    }
    res.setHeader('Retry-After', answer.headers['Retry-After'])
    res.status(answer.status).json(answer.body)
  }
}
