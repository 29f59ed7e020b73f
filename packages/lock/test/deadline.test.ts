import { describe, expect, it } from 'vitest'
import { DeadlineExceededError, withDeadline } from '../src/deadline.js'
import { settle, sleep } from './support/timing.js'

describe('withDeadline', () => {
  it('passes a value or an error through when it settles in time', async () => {
    await expect(withDeadline(Promise.resolve(7), 100)).resolves.toBe(7)
    const boom = new Error('boom')
    await expect(withDeadline(Promise.reject(boom), 100)).rejects.toBe(boom)
  })

  it('rejects with DeadlineExceededError after ms when the promise hangs', async () => {
    const { error, ms } = await settle(withDeadline(new Promise(() => {}), 50))
    expect(error).toBeInstanceOf(DeadlineExceededError)
    expect((error as DeadlineExceededError).ms).toBe(50)
    expect(ms).toBeGreaterThanOrEqual(45)
    expect(ms).toBeLessThan(500)
  })

  it('swallows a late rejection (no unhandled rejection reaches the process)', async () => {
    const unhandled: unknown[] = []
    const onUnhandled = (reason: unknown) => unhandled.push(reason)
    process.on('unhandledRejection', onUnhandled)
    try {
      const late = sleep(30).then(() => {
        throw new Error('late')
      })
      await expect(withDeadline(late, 5)).rejects.toBeInstanceOf(DeadlineExceededError)
      await sleep(60)
      expect(unhandled).toEqual([])
    } finally {
      process.off('unhandledRejection', onUnhandled)
    }
  })
})
