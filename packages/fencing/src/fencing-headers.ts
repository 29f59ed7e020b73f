/**
 * Fencing over HTTP: a service that is a store of its own (it keeps state a lock holder
 * changes) receives the holder's token in two headers and refuses a token older than the newest
 * it has seen for that resource. This module is both ends of the wire format: the client turns a
 * lock's (or the ambient) token into headers, the server reads them back, checking every byte.
 */
import { currentFenceToken } from './ambient-token.js'
import { InvalidFencingHeaderError, InvalidFencingOptionError, MissingFenceTokenError } from './errors.js'
import { parseFenceToken, type FenceTokenInput } from './fence-token.js'

/** The header that carries the fencing token: decimal digits, 0 to 2^63 − 1. */
export const FENCING_TOKEN_HEADER = 'Fencing-Token'
/** The header that names the lock resource the token was minted for, e.g. `order:27`. */
export const FENCING_RESOURCE_HEADER = 'Fencing-Resource'

/** Longest resource name a header may carry, in bytes (the lock's own limit is 512). */
export const MAX_FENCING_RESOURCE_BYTES = 512

// Visible ASCII: what a header value can carry without any encoding.
const RESOURCE = /^[\x21-\x7e]+$/

/** A token and the resource it fences, as a request carries them. */
export interface FencingClaim {
  readonly token: bigint
  readonly resource: string
}

/** What holds a token for a resource: a `Lock` of `@fencelock/lock` has both. */
export interface TokenHolder {
  readonly token: bigint
  readonly resource: string
}

function checkResource(resource: unknown, report: (rule: string) => Error): string {
  if (typeof resource !== 'string' || resource.length === 0) throw report('must be a non-empty string')
  if (!RESOURCE.test(resource)) throw report('must be visible ASCII (no spaces, no control or non-ASCII characters)')
  if (resource.length > MAX_FENCING_RESOURCE_BYTES) throw report(`must be at most ${MAX_FENCING_RESOURCE_BYTES} bytes`)
  return resource
}

/**
 * The fencing headers for a call made under a lock: `fencingHeaders(lock)` takes the lock's token
 * and resource; `fencingHeaders(token, resource)` takes them apart; `fencingHeaders(undefined,
 * resource)` takes the ambient token of `withFenceToken`. Throws before any I/O:
 * `InvalidFenceTokenError` for a bad token, `MissingFenceTokenError` without one,
 * `InvalidFencingOptionError` for a resource a header cannot carry.
 *
 * @example
 * ```ts
 * await locker.using(`order:${id}`, async (lock) => {
 *   await fetch(`${gateway}/v1/charges`, {
 *     method: 'POST',
 *     headers: { 'content-type': 'application/json', 'idempotency-key': `order:${id}`, ...fencingHeaders(lock) },
 *     body: JSON.stringify({ orderId: id, amountCents }),
 *   })
 * })
 * ```
 */
export function fencingHeaders(holder: TokenHolder): Record<string, string>
export function fencingHeaders(token: FenceTokenInput | undefined, resource: string): Record<string, string>
export function fencingHeaders(holderOrToken: TokenHolder | FenceTokenInput | undefined, resource?: string): Record<string, string> {
  let token: bigint
  let name: unknown
  if (holderOrToken !== null && typeof holderOrToken === 'object') {
    token = parseFenceToken((holderOrToken as TokenHolder).token)
    name = (holderOrToken as TokenHolder).resource
  } else {
    if (holderOrToken === undefined) {
      const ambient = currentFenceToken()
      if (ambient === undefined) throw new MissingFenceTokenError()
      token = ambient
    } else {
      token = parseFenceToken(holderOrToken)
    }
    name = resource
  }
  const checked = checkResource(name, (rule) => new InvalidFencingOptionError('resource', rule, name))
  return { [FENCING_TOKEN_HEADER]: token.toString(), [FENCING_RESOURCE_HEADER]: checked }
}

/** Reads one header by name, case-insensitively: `undefined` when absent; an array when sent more than once. */
export type HeaderReader = (name: string) => string | string[] | undefined

/**
 * Reads the fencing headers of a request: the claim, or `undefined` when neither header was sent.
 * Throws {@link InvalidFencingHeaderError} (naming the header and the rule) for one header
 * without the other, a header sent twice, a token that is not 0 to 2^63 − 1 in decimal digits, or
 * a resource that is empty, not visible ASCII or too long.
 *
 * @example
 * ```ts
 * const claim = readFencingHeaders((name) => req.headers[name.toLowerCase()])
 * ```
 */
export function readFencingHeaders(header: HeaderReader): FencingClaim | undefined {
  const single = (name: string): string | undefined => {
    const value = header(name)
    if (Array.isArray(value)) throw new InvalidFencingHeaderError(name, 'must be sent once', value)
    return value
  }
  const rawToken = single(FENCING_TOKEN_HEADER)
  const rawResource = single(FENCING_RESOURCE_HEADER)
  if (rawToken === undefined && rawResource === undefined) return undefined
  if (rawToken === undefined) throw new InvalidFencingHeaderError(FENCING_TOKEN_HEADER, `must be sent with ${FENCING_RESOURCE_HEADER}`, rawToken)
  if (rawResource === undefined) throw new InvalidFencingHeaderError(FENCING_RESOURCE_HEADER, `must be sent with ${FENCING_TOKEN_HEADER}`, rawResource)
  let token: bigint
  try {
    token = parseFenceToken(rawToken.trim())
  } catch {
    throw new InvalidFencingHeaderError(FENCING_TOKEN_HEADER, 'must be decimal digits, 0 to 9223372036854775807', rawToken)
  }
  const resource = checkResource(rawResource.trim(), (rule) => new InvalidFencingHeaderError(FENCING_RESOURCE_HEADER, rule, rawResource))
  return { token, resource }
}
