/**
 * The formats of the lock key's value and of the release message: the functions the Locker reads
 * them with, and the Lua fragments the scripts build them with, say the same thing.
 */
import type { Redis } from 'ioredis'
import { beforeAll, describe, expect, it } from 'vitest'
import {
  handedTo,
  HANDED_TO,
  LUA,
  parseReleaseMessage,
  releaseMessage,
  WAITING_MARK,
} from '../src/fair-queue/formats.js'
import { newOwnerId } from '../src/owner-id.js'
import { connectShared } from './support/connections.js'

let redis: Redis
beforeAll(async () => {
  redis = await connectShared()
})

/** Evaluates a Lua expression built by a fragment, with ARGV[1..n] bound to `args`. */
const luaValue = (expression: string, ...args: string[]) => redis.eval(`return ${expression}`, 0, ...args)

describe('release messages', () => {
  it.each([
    ['freed', releaseMessage('s1'), { sender: 's1', handedTo: undefined, handoffMs: Number.NaN, next: undefined }],
    [
      'handed',
      releaseMessage('s1', { lockerId: 'l2', handoffMs: 500 }),
      { sender: 's1', handedTo: 'l2', handoffMs: 500, next: undefined },
    ],
    [
      'handed, with the next in line',
      releaseMessage('s1', { lockerId: 'l2', handoffMs: 500, next: 'l3' }),
      { sender: 's1', handedTo: 'l2', handoffMs: 500, next: 'l3' },
    ],
  ])('%s: built and read back', (_label, message, expected) => {
    expect(parseReleaseMessage(message)).toEqual(expected)
  })

  it.each(['', 'a b', 'a b c d e', 'a b -1', 'a b x', 'a  500', 'a b 500 '])('not a release message: %j', (message) => {
    expect(parseReleaseMessage(message)).toBeUndefined()
  })

  it('the scripts build the same messages (Lua fragments)', async () => {
    expect(await luaValue(LUA.freedMessage('ARGV[1]'), 's1')).toBe(releaseMessage('s1'))
    expect(await luaValue(LUA.handedMessage('ARGV[1]', 'ARGV[2]', 'ARGV[3]', 'false'), 's1', 'l2', '500')).toBe(
      releaseMessage('s1', { lockerId: 'l2', handoffMs: 500 }),
    )
    expect(await luaValue(LUA.handedMessage('ARGV[1]', 'ARGV[2]', 'ARGV[3]', 'ARGV[4]'), 's1', 'l2', '500', 'l3')).toBe(
      releaseMessage('s1', { lockerId: 'l2', handoffMs: 500, next: 'l3' }),
    )
  })
})

describe("the lock key's value", () => {
  it('owner ids never start with the hand-off prefix nor end with the mark', () => {
    for (let i = 0; i < 1_000; i++) {
      const id = newOwnerId()
      expect(id.startsWith(HANDED_TO) || id.endsWith(WAITING_MARK)).toBe(false)
    }
  })

  it('the Lua fragments build and test the same values', async () => {
    expect(await luaValue(LUA.handedTo('ARGV[1]'), 'l2')).toBe(handedTo('l2'))
    expect(await luaValue(LUA.marked('ARGV[1]'), 'owner')).toBe(`owner${WAITING_MARK}`)
    const unmarked = (v: string) => luaValue(`${LUA.isUnmarkedHolder('ARGV[1]')} and 1 or 0`, v)
    expect(await unmarked('owner')).toBe(1)
    expect(await unmarked(`owner${WAITING_MARK}`)).toBe(0)
    expect(await unmarked(handedTo('l2'))).toBe(0)
  })
})
