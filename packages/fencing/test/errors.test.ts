import { describe, expect, it } from 'vitest'
import {
  FencingError,
  InvalidFenceTokenError,
  InvalidFencingOptionError,
  MissingFenceTokenError,
  StaleFencingTokenError,
  UnsupportedFencedWriteError,
} from '../src/index.js'

describe('errors', () => {
  it('each has its own name, sits under FencingError, and carries its context', () => {
    const errors = [
      new StaleFencingTokenError('Product', 'update', 5n, 6n),
      new InvalidFenceTokenError('must not be negative', -1n),
      new MissingFenceTokenError(),
      new UnsupportedFencedWriteError('Order', 'create', 'nested-write', 'product'),
      new InvalidFencingOptionError('models', 'must be an object', null),
    ]
    for (const error of errors) {
      expect(error).toBeInstanceOf(FencingError)
      expect(error).toBeInstanceOf(Error)
      expect(error.name).toBe(error.constructor.name)
    }
    expect(errors[0]).toMatchObject({ model: 'Product', operation: 'update', token: 5n, storedToken: 6n })
    expect(errors[3]).toMatchObject({ model: 'Order', operation: 'create', reason: 'nested-write', field: 'product' })
  })

  it('writes tokens in full in the message (never through a float)', () => {
    const error = new StaleFencingTokenError('Product', 'update', 2n ** 53n + 1n, 2n ** 63n - 1n)
    expect(error.message).toContain('9007199254740993')
    expect(error.message).toContain('9223372036854775807')
  })
})
