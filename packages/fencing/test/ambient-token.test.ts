import { setTimeout as sleep } from 'node:timers/promises'
import { describe, expect, it } from 'vitest'
import { currentFenceToken, InvalidFenceTokenError, withFenceToken } from '../src/index.js'
import { BAD_TOKENS } from './support/bad-tokens.js'

describe('withFenceToken / currentFenceToken', () => {
  it('is undefined outside a scope and the token inside, across awaits', async () => {
    expect(currentFenceToken()).toBeUndefined()
    const seen = await withFenceToken(5n, async () => {
      await sleep(1)
      return currentFenceToken()
    })
    expect(seen).toBe(5n)
    expect(currentFenceToken()).toBeUndefined()
  })

  it('takes digit strings, nests (innermost wins) and keeps concurrent scopes apart', async () => {
    const results = await Promise.all([
      withFenceToken('7', async () => {
        await sleep(5)
        const inner = await withFenceToken(9n, async () => {
          await sleep(1)
          return currentFenceToken()
        })
        return [currentFenceToken(), inner]
      }),
      withFenceToken(8n, async () => {
        await sleep(1)
        return [currentFenceToken()]
      }),
    ])
    expect(results).toEqual([[7n, 9n], [8n]])
  })

  it.each(BAD_TOKENS)('refuses %s before running the function', (_label, value) => {
    let ran = false
    expect(() =>
      withFenceToken(value as bigint, () => {
        ran = true
      }),
    ).toThrow(InvalidFenceTokenError)
    expect(ran).toBe(false)
  })
})
