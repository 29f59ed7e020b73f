import { createHash } from 'node:crypto'
import type { Redis } from 'ioredis'
import { beforeAll, describe, expect, it } from 'vitest'
import { defineScript } from '../src/script.js'
import { commandCalls, connect, ready } from './support/connections.js'
import { startRedisServer } from './support/redis-server.js'

let redis: Redis
beforeAll(async () => {
  const server = await startRedisServer()
  redis = connect({ port: server.port })
  await ready(redis, server.url)
})

async function scriptCalls(): Promise<{ evalsha: number; eval: number }> {
  const calls = await commandCalls(redis)
  return { evalsha: calls.evalsha ?? 0, eval: calls.eval ?? 0 }
}

describe('defineScript (EVALSHA with a fallback to EVAL on NOSCRIPT)', () => {
  const lua = "return {KEYS[1], ARGV[1], 'v1'}"
  const script = defineScript(lua)

  it('computes the SHA1 of the script up front', () => {
    expect(script.sha).toBe(createHash('sha1').update(lua).digest('hex'))
  })

  it('falls back to EVAL once after SCRIPT FLUSH, then runs by SHA again', async () => {
    await redis.script('FLUSH')
    const start = await scriptCalls()
    expect(await script.run(redis, ['k'], ['a'])).toEqual(['k', 'a', 'v1'])
    expect(await scriptCalls()).toEqual({ evalsha: start.evalsha + 1, eval: start.eval + 1 })
    expect(await redis.script('EXISTS', script.sha)).toEqual([1])

    expect(await script.run(redis, ['k'], [2])).toEqual(['k', '2', 'v1'])
    expect(await scriptCalls()).toEqual({ evalsha: start.evalsha + 2, eval: start.eval + 1 })
  })

  it('control: after SCRIPT FLUSH a bare EVALSHA really fails with NOSCRIPT', async () => {
    await script.run(redis, ['k'], ['a'])
    await redis.script('FLUSH')
    await expect(redis.evalsha(script.sha, 1, 'k', 'a')).rejects.toThrow(/^NOSCRIPT/)
  })

  it('passes any other error through without retrying by EVAL', async () => {
    const failing = defineScript("return redis.error_reply('BOOM broken')")
    await failing.run(redis, [], []).catch(() => {}) // loads it
    const start = await scriptCalls()
    await expect(failing.run(redis, [], [])).rejects.toThrow(/BOOM/)
    expect(await scriptCalls()).toEqual({ evalsha: start.evalsha + 1, eval: start.eval })
  })
})
