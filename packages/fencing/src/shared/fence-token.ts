import { InvalidFenceTokenError } from './errors.js'

/** Largest token the fence column can store: 2^63 − 1, PostgreSQL's `BIGINT` maximum. */
export const MAX_FENCE_TOKEN = 9_223_372_036_854_775_807n

/**
 * A fencing token as callers hold it: a `bigint` (what `@fencelock/lock` hands out), or a string
 * of decimal digits (how tokens travel on the wire). Never a `number`: above 2^53 a number has
 * already lost digits, and a rounded token can order wrongly against its neighbours.
 */
export type FenceTokenInput = bigint | string

// Digits only: no sign, no spaces, no exponent, no hex. 19 digits cover 2^63 − 1; more than
// that is out of range anyway, and capping the length keeps BigInt() from parsing a huge string.
const DIGITS = /^[0-9]{1,19}$/

/**
 * Checks a token and returns it as a `bigint`; throws {@link InvalidFenceTokenError} for a
 * `number`, a negative value, a non-integer, a string that is not only digits, or a value above
 * {@link MAX_FENCE_TOKEN}. Runs before any query.
 *
 * @example
 * ```ts
 * parseFenceToken('9007199254740993') // 9007199254740993n
 * parseFenceToken(5)                  // throws InvalidFenceTokenError
 * ```
 */
export function parseFenceToken(value: unknown): bigint {
  let token: bigint
  if (typeof value === 'bigint') {
    token = value
  } else if (typeof value === 'string') {
    if (!DIGITS.test(value)) {
      throw new InvalidFenceTokenError(
        value.length > 19 && /^[0-9]+$/.test(value) ? `must be at most ${MAX_FENCE_TOKEN}` : 'a string token must be decimal digits only',
        value,
      )
    }
    token = BigInt(value)
  } else if (typeof value === 'number') {
    throw new InvalidFenceTokenError('must be a bigint or a string of digits, never a number (above 2^53 a number loses digits)', value)
  } else {
    throw new InvalidFenceTokenError('must be a bigint or a string of digits', value)
  }
  if (token < 0n) throw new InvalidFenceTokenError('must not be negative', value)
  if (token > MAX_FENCE_TOKEN) throw new InvalidFenceTokenError(`must be at most ${MAX_FENCE_TOKEN}`, value)
  return token
}
