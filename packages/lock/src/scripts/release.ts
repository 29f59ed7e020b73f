import type { ReleaseOutcome } from '../backend/backend.js'
import { LUA } from '../fair-queue/formats.js'
import { defineScript } from './define-script.js'

/**
 * The release of a lock nobody waits for, which is nearly every release: one key, no queue, no
 * message (nobody listens). When the key holds our owner id: deletes it, returns 1. When it holds
 * our owner id marked by a waiting locker (fair-queue/formats.ts): returns 2 and leaves the key
 * as it is; the hand-off (fair-queue/hand-on.ts) then hands the lock on. Otherwise (expired, or
 * someone else's): returns 0. Also the clean-up of an acquire whose outcome is unknown.
 */
export const releaseScript = defineScript({
  batched: true,
  keys: ['lock'],
  args: ['ownerId'],
  lua: (k, a) => `
local v = redis.call('GET', ${k.lock})
if v == ${a.ownerId} then
  redis.call('DEL', ${k.lock})
  return 1
end
if v == ${LUA.marked(a.ownerId)} then
  return 2
end
return 0
`,
})

/** The reply of {@link releaseScript}: 2 means the lock is ours and marked (hand it on). */
export const MARKED = 2

export const NOT_OURS: ReleaseOutcome = Object.freeze({ freed: false })
export const FREED: ReleaseOutcome = Object.freeze({ freed: true, handedTo: undefined })
