/**
 * Fencing over HTTP: a service that is a store of its own (it keeps state a lock holder
 * changes) receives the holder's token in two headers and refuses a token older than the newest
 * it has seen for that resource. This module is both ends of the wire format: the client turns a
 * lock's (or the ambient) token into headers, the server reads them back, checking every byte.
 */
import { currentFenceToken } from '../shared/ambient-token.js'
import { InvalidFencingHeaderError, InvalidFencingOptionError, MissingFenceTokenError } from '../shared/errors.js'
import { parseFenceToken, type FenceTokenInput } from '../shared/fence-token.js'

/** The header that carries the fencing token: decimal digits, 0 to 2^63 − 1. */
export const FENCING_TOKEN_HEADER = 'Fencing-Token'
/** The header that names the lock resource the token was minted for, e.g. `order:27`. */
export const FENCING_RESOURCE_HEADER = 'Fencing-Resource'

/**
 * Longest resource name, in UTF-8 bytes: the lock's own limit (`@fencelock/lock` grants names of up
 * to 1 024 bytes). On the wire a name is percent-encoded, up to three times as long.
 */
export const MAX_FENCING_RESOURCE_BYTES = 1024

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

/**
 * The rules of a resource name, the same on both ends: what the lock grants (any well-formed
 * Unicode string of 1 to 1 024 UTF-8 bytes) but NUL, which a PostgreSQL text column (the fenced
 * service's resource table) cannot hold. Returns the rule broken, or undefined.
 */
export function resourceRule(resource: unknown): string | undefined {
  if (typeof resource !== 'string' || resource.length === 0) return 'must be a non-empty string'
  if (/\p{Cs}/u.test(resource)) return 'must be well-formed Unicode (no lone surrogates)'
  if (resource.includes('\0')) return 'must not contain NUL (a PostgreSQL text column cannot hold it)'
  if (Buffer.byteLength(resource, 'utf8') > MAX_FENCING_RESOURCE_BYTES) return `must be at most ${MAX_FENCING_RESOURCE_BYTES} bytes in UTF-8`
  return undefined
}

/**
 * A resource name as the `Fencing-Resource` header carries it: visible ASCII but `%` and `,` as it
 * is, every other byte of its UTF-8 percent-encoded (`order 42` → `order%2042`). A comma never
 * appears raw, so a header Node joined from two (`r1, r2`) cannot pass for one name.
 */
export function encodeFencingResource(resource: string): string {
  let out = ''
  for (const byte of Buffer.from(resource, 'utf8')) {
    out += byte > 0x20 && byte < 0x7f && byte !== 0x25 && byte !== 0x2c ? String.fromCharCode(byte) : `%${byte.toString(16).toUpperCase().padStart(2, '0')}`
  }
  return out
}

const WIRE = /^(?:[\x21-\x24\x26-\x2b\x2d-\x7e]|%[0-9A-Fa-f]{2})+$/
const utf8 = new TextDecoder('utf-8', { fatal: true })

/** The resource name a `Fencing-Resource` header carries, or the rule it breaks. */
function decodeFencingResource(value: string): { resource: string } | { rule: string } {
  if (value.includes(',')) return { rule: 'must be sent once (Node joins a header sent twice with ", "; a name’s comma is sent as %2C)' }
  if (!WIRE.test(value)) return { rule: 'must be visible ASCII, other bytes percent-encoded as UTF-8 (%XX)' }
  let resource: string
  try {
    resource = utf8.decode(Buffer.from(value.replace(/%([0-9A-Fa-f]{2})|[^%]/g, (c, hex: string | undefined) => (hex === undefined ? c : String.fromCharCode(parseInt(hex, 16)))), 'latin1'))
  } catch {
    return { rule: 'must decode (percent-encoding) to well-formed UTF-8' }
  }
  const rule = resourceRule(resource)
  return rule === undefined ? { resource } : { rule }
}

/**
 * The fencing headers for a call made under a lock: `Fencing-Token` (decimal) and
 * `Fencing-Resource` (the name, percent-encoded where a header cannot carry it as it is, see
 * {@link encodeFencingResource}). `fencingHeaders(lock)` takes the lock's token and resource; `fencingHeaders(token, resource)` takes them apart; `fencingHeaders(undefined,
 * resource)` takes the ambient token of `withFenceToken`. Throws before any I/O:
 * `InvalidFenceTokenError` for a bad token, `MissingFenceTokenError` without one,
 * `InvalidFencingOptionError` for a resource that is not a name the lock grants (see
 * {@link MAX_FENCING_RESOURCE_BYTES}) or holds NUL.
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
  const rule = resourceRule(name)
  if (rule !== undefined) throw new InvalidFencingOptionError('resource', rule, name)
  return { [FENCING_TOKEN_HEADER]: token.toString(), [FENCING_RESOURCE_HEADER]: encodeFencingResource(name as string) }
}

/** Reads one header by name, case-insensitively: `undefined` when absent; an array when sent more than once. */
export type HeaderReader = (name: string) => string | string[] | undefined

/**
 * Reads the fencing headers of a request: the claim, or `undefined` when neither header was sent.
 * Throws {@link InvalidFencingHeaderError} (naming the header and the rule) for one header
 * without the other, a header sent twice (an array, or a value Node joined with a comma), a token
 * that is not 0 to 2^63 − 1 in decimal digits, or a resource that does not decode (percent-encoded
 * UTF-8) to a name of 1 to 1 024 bytes without NUL. With Node's `req.headers`, a header sent twice
 * arrives joined with ", "; read `req.headersDistinct` (as `fencingMiddleware` does) to see both.
 *
 * @example
 * ```ts
 * const claim = readFencingHeaders((name) => req.headersDistinct[name.toLowerCase()])
 * ```
 */
export function readFencingHeaders(header: HeaderReader): FencingClaim | undefined {
  const single = (name: string): string | undefined => {
    const value = header(name)
    if (Array.isArray(value)) {
      if (value.length > 1) throw new InvalidFencingHeaderError(name, 'must be sent once', value)
      return value[0]
    }
    return value
  }
  const rawToken = single(FENCING_TOKEN_HEADER)
  const rawResource = single(FENCING_RESOURCE_HEADER)
  if (rawToken === undefined && rawResource === undefined) return undefined
  if (rawToken === undefined) throw new InvalidFencingHeaderError(FENCING_TOKEN_HEADER, `must be sent with ${FENCING_RESOURCE_HEADER}`, rawToken)
  if (rawResource === undefined) throw new InvalidFencingHeaderError(FENCING_RESOURCE_HEADER, `must be sent with ${FENCING_TOKEN_HEADER}`, rawResource)
  let token: bigint
  try {
    // Exactly the digits: no whitespace of any kind around them (trim() would take U+00A0 too).
    if (!/^[0-9]+$/.test(rawToken)) throw new Error('not digits')
    token = parseFenceToken(rawToken)
  } catch {
    throw new InvalidFencingHeaderError(FENCING_TOKEN_HEADER, 'must be decimal digits, 0 to 9223372036854775807', rawToken)
  }
  // Exactly the encoded name: what Node strips (spaces, tabs around the value) is gone already, and
  // anything else around it (U+00A0, U+3000, ...) is not part of a header this package sends.
  const decoded = decodeFencingResource(rawResource)
  if ('rule' in decoded) throw new InvalidFencingHeaderError(FENCING_RESOURCE_HEADER, decoded.rule, rawResource)
  return { token, resource: decoded.resource }
}
