import { createHash } from 'node:crypto'
import type { Redis } from 'ioredis'
import { beforeAll, describe, expect, it } from 'vitest'
import { defineScript } from '../src/scripts/define-script.js'
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

describe('defineScript (typed keys and arguments; EVALSHA with a fallback to EVAL on NOSCRIPT)', () => {
  const script = defineScript({
    keys: ['first', 'second'],
    args: ['name', 'count'],
    lua: (k, a) => `return {${k.second}, ${k.first}, ${a.count}, ${a.name}, 'v1'}`,
  })
  const lua =
    "local firstKey = KEYS[1]\nlocal secondKey = KEYS[2]\nlocal name = ARGV[1]\nlocal count = ARGV[2]\nreturn {secondKey, firstKey, count, name, 'v1'}\n"

  it('names each key and argument as a Lua local from its position, so the Lua reads as its source does, and computes the SHA1 up front', () => {
    expect(script.lua).toBe(lua)
    expect(script.sha).toBe(createHash('sha1').update(lua).digest('hex'))
    expect([script.keys, script.args]).toEqual([
      ['first', 'second'],
      ['name', 'count'],
    ])
  })

  it('sends keys and arguments by name, in the positions the script reads them from (extra names are not sent)', async () => {
    expect(
      await script.run(redis, { second: 's', first: 'f', third: 'x' } as { first: string; second: string }, {
        count: 3,
        name: 'n',
      }),
    ).toEqual(['s', 'f', '3', 'n', 'v1'])
  })

  it('falls back to EVAL once after SCRIPT FLUSH, then runs by SHA again', async () => {
    await redis.script('FLUSH')
    const start = await scriptCalls()
    expect(await script.run(redis, { first: 'k', second: 'l' }, { name: 'a', count: 1 })).toEqual([
      'l',
      'k',
      '1',
      'a',
      'v1',
    ])
    expect(await scriptCalls()).toEqual({ evalsha: start.evalsha + 1, eval: start.eval + 1 })
    expect(await redis.script('EXISTS', script.sha)).toEqual([1])

    expect(await script.run(redis, { first: 'k', second: 'l' }, { name: 'a', count: 2 })).toEqual([
      'l',
      'k',
      '2',
      'a',
      'v1',
    ])
    expect(await scriptCalls()).toEqual({ evalsha: start.evalsha + 2, eval: start.eval + 1 })
  })

  it('control: after SCRIPT FLUSH a bare EVALSHA really fails with NOSCRIPT', async () => {
    await script.run(redis, { first: 'k', second: 'l' }, { name: 'a', count: 1 })
    await redis.script('FLUSH')
    await expect(redis.evalsha(script.sha, 2, 'k', 'l', 'a', 1)).rejects.toThrow(/^NOSCRIPT/)
  })

  it('refuses names that are no Lua names, and names that repeat', () => {
    expect(() => defineScript({ keys: ['a-b'], args: [], lua: () => 'return 1' })).toThrow(/not a Lua name/)
    expect(() => defineScript({ keys: [], args: ['end'], lua: () => 'return 1' })).toThrow(/not a Lua name/)
    expect(() => defineScript({ keys: ['x'], args: ['xKey'], lua: () => 'return 1' })).toThrow(/repeat/)
  })

  it('passes any other error through without retrying by EVAL', async () => {
    const failing = defineScript({ keys: [], args: [], lua: () => "return redis.error_reply('BOOM broken')" })
    await failing.run(redis, {}, {}).catch(() => {}) // loads it
    const start = await scriptCalls()
    await expect(failing.run(redis, {}, {})).rejects.toThrow(/BOOM/)
    expect(await scriptCalls()).toEqual({ evalsha: start.evalsha + 1, eval: start.eval })
  })
})
