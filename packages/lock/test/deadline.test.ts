import { describe, expect, it } from 'vitest'
import { DeadlineExceededError, Deadlines } from '../src/deadline.js'
import { settle, sleep } from './support/timing.js'

describe('Deadlines.race', () => {
  it('passes a value or an error through when it settles in time', async () => {
    const deadlines = new Deadlines()
    await expect(deadlines.race(Promise.resolve(7), 100)).resolves.toBe(7)
    const boom = new Error('boom')
    await expect(deadlines.race(Promise.reject(boom), 100)).rejects.toBe(boom)
    expect(deadlines.size).toBe(0)
  })

  it('rejects with DeadlineExceededError after ms when the promise hangs', async () => {
    const deadlines = new Deadlines()
    const { error, ms } = await settle(() => deadlines.race(new Promise(() => {}), 50))
    expect(error).toBeInstanceOf(DeadlineExceededError)
    expect((error as DeadlineExceededError).ms).toBe(50)
    expect(ms).toBeGreaterThanOrEqual(49)
    expect(ms).toBeLessThan(500)
    expect(deadlines.size).toBe(0)
  })

  it('gives up each call at its own deadline, whatever order they come in', async () => {
    const deadlines = new Deadlines()
    const hang = new Promise<never>(() => {})
    const start = performance.now()
    const at: Record<string, number> = {}
    const calls = (
      [
        ['long', 150],
        ['short', 40],
        ['middle', 90],
      ] as const
    ).map(([name, ms]) =>
      deadlines.race(hang, ms).catch((error: unknown) => {
        expect(error).toBeInstanceOf(DeadlineExceededError)
        at[name] = performance.now() - start
      }),
    )
    // One that answers in time in between changes nothing for the others.
    await expect(
      deadlines.race(
        sleep(10).then(() => 'ok'),
        60,
      ),
    ).resolves.toBe('ok')
    await Promise.all(calls)
    expect(at.short).toBeGreaterThanOrEqual(39)
    expect(at.middle).toBeGreaterThanOrEqual(89)
    expect(at.long).toBeGreaterThanOrEqual(149)
    expect(at.short!).toBeLessThan(at.middle!)
    expect(at.middle!).toBeLessThan(at.long!)
    expect(at.long).toBeLessThan(600)
  })

  it('swallows a late rejection (no unhandled rejection reaches the process)', async () => {
    const deadlines = new Deadlines()
    const unhandled: unknown[] = []
    const onUnhandled = (reason: unknown) => unhandled.push(reason)
    process.on('unhandledRejection', onUnhandled)
    try {
      const late = sleep(30).then(() => {
        throw new Error('late')
      })
      await expect(deadlines.race(late, 5)).rejects.toBeInstanceOf(DeadlineExceededError)
      await sleep(60)
      expect(unhandled).toEqual([])
    } finally {
      process.off('unhandledRejection', onUnhandled)
    }
  })
})
