import { describe, expect, it } from 'vitest'
import {
  InvalidLockOptionError,
  LockAbortedError,
  LockError,
  LockLostError,
  LockTimeoutError,
  LockUnavailableError,
} from '../src/index.js'

describe('errors', () => {
  it('are one class per failure under LockError, each with its name and read-only context', () => {
    const cause = new Error('socket closed')
    const cases = [
      [new LockTimeoutError('r', 12.5), 'LockTimeoutError', { resource: 'r', waitedMs: 12.5 }],
      [
        new LockLostError('r', 2n ** 60n, 'expired', cause),
        'LockLostError',
        { resource: 'r', token: 2n ** 60n, reason: 'expired', cause },
      ],
      [
        new LockUnavailableError('r', 'release', 'down', cause),
        'LockUnavailableError',
        { resource: 'r', operation: 'release', cause },
      ],
      [new LockAbortedError('r', 3, 'why'), 'LockAbortedError', { resource: 'r', waitedMs: 3, cause: 'why' }],
      [
        new InvalidLockOptionError('ttlMs', 'must be an integer', Number.NaN),
        'InvalidLockOptionError',
        { field: 'ttlMs', rule: 'must be an integer' },
      ],
    ] as const
    for (const [error, name, context] of cases) {
      expect(error).toBeInstanceOf(LockError)
      expect(error).toBeInstanceOf(Error)
      expect(error.name).toBe(name)
      expect(error).toMatchObject(context)
      expect(String(error)).toMatch(new RegExp(`^${name}: `))
    }
  })

  it('do not invent a cause', () => {
    expect('cause' in new LockTimeoutError('r', 1)).toBe(false)
    expect('cause' in new LockLostError('r', 1n, 'not-owner')).toBe(false)
  })
})
