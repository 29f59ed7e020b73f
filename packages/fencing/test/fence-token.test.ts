import { describe, expect, it } from 'vitest'
import { InvalidFenceTokenError, MAX_FENCE_TOKEN, parseFenceToken } from '../src/index.js'
import { BAD_TOKENS } from './support/bad-tokens.js'

describe('parseFenceToken', () => {
  it('accepts bigints and digit strings from 0 to 2^63 − 1, exactly', () => {
    expect(parseFenceToken(0n)).toBe(0n)
    expect(parseFenceToken('0')).toBe(0n)
    expect(parseFenceToken('007')).toBe(7n)
    expect(parseFenceToken(2n ** 53n + 1n)).toBe(9_007_199_254_740_993n)
    expect(parseFenceToken('9007199254740993')).toBe(9_007_199_254_740_993n)
    expect(parseFenceToken('9223372036854775807')).toBe(MAX_FENCE_TOKEN)
    expect(MAX_FENCE_TOKEN).toBe(2n ** 63n - 1n)
  })

  it.each(BAD_TOKENS)('refuses %s with InvalidFenceTokenError', (_label, value) => {
    expect(() => parseFenceToken(value)).toThrow(InvalidFenceTokenError)
  })

  it('says what the token must be, without echoing a huge value', () => {
    let error: unknown
    try {
      parseFenceToken('9'.repeat(400))
    } catch (e) {
      error = e
    }
    expect(error).toBeInstanceOf(InvalidFenceTokenError)
    expect((error as InvalidFenceTokenError).rule).toMatch(/at most/)
    expect((error as Error).message.length).toBeLessThan(200)
    expect((error as Error).name).toBe('InvalidFenceTokenError')
  })
})
