import type { Deadlines } from './deadline.js'
import { HANDOFF_LUA } from './handoff-lua.js'
import type { ResourceKeys } from './keys.js'
import { defineScript, type ScriptClient } from './script.js'

// KEYS[1] lock key; ARGV[1] owner id, ARGV[2] channel, ARGV[3] our locker id. When the key holds
// our owner id: deletes it, announces the release, returns 1. When it holds our owner id and '+'
// (a waiting locker queued in Redis marked it): returns 2, leaving the hand-off to the script
// below. Otherwise (expired, or someone else's): returns 0. The uncontended release is this
// script alone: one key, no queue to look at.
export const RELEASE_LUA = `
local v = redis.call('GET', KEYS[1])
if v == ARGV[1] then
  redis.call('DEL', KEYS[1])
  redis.call('PUBLISH', ARGV[2], ARGV[3])
  return 1
end
if v == ARGV[1] .. '+' then
  return 2
end
return 0
`

// KEYS[1] lock key, KEYS[2] queue, KEYS[3] leases; ARGV[1] owner id, ARGV[2] channel, ARGV[3] our
// locker id, ARGV[4] hand-off ms. The release of a lock others queued for: when the key still
// holds our owner id (marked or not), hands it to the oldest queued locker or deletes it (see
// handoff-lua.ts). Returns 0 when the lock was not ours, else the head's id, or 1.
export const HANDOFF_RELEASE_LUA = `
local v = redis.call('GET', KEYS[1])
if v ~= ARGV[1] and v ~= ARGV[1] .. '+' then
  return 0
end
${HANDOFF_LUA}`

// KEYS and ARGV as above, without the owner id (ARGV[1] is unused). A locker whose last waiter
// for the resource gave up leaves the queue; should the lock have been handed to it meanwhile,
// it passes it on. Returns 0, or what the hand-off returns when it passed the lock on.
export const LEAVE_LUA = `
redis.call('LREM', KEYS[2], 0, ARGV[3])
redis.call('HDEL', KEYS[3], ARGV[3])
if redis.call('GET', KEYS[1]) ~= '~' .. ARGV[3] then
  return 0
end
${HANDOFF_LUA}`

const releaseScript = defineScript(RELEASE_LUA)
const handoffReleaseScript = defineScript(HANDOFF_RELEASE_LUA)
const leaveScript = defineScript(LEAVE_LUA)

/** What a release did: nothing (not our lock), freed it, or handed it to a queued locker. */
export type ReleaseOutcome = { freed: false } | { freed: true; handedTo: string | undefined }

const NOT_OURS: ReleaseOutcome = Object.freeze({ freed: false })
const FREED: ReleaseOutcome = Object.freeze({ freed: true, handedTo: undefined })
function toOutcome(reply: unknown): ReleaseOutcome {
  if (reply === 0) return NOT_OURS
  if (typeof reply === 'string') return { freed: true, handedTo: reply }
  return FREED
}

const PLAIN = { map: toOutcome }

type Within = { deadlines: Deadlines; ms: number; sentAt?: number }

/**
 * Owner-checked release: deletes the key and tells the waiters; when lockers are queued for it
 * in Redis, a second script hands it to the oldest one instead. Also the clean-up of an acquire
 * whose outcome is unknown: if that acquire did land, this removes it before it can block anyone
 * for a whole TTL. `lockerId` identifies the sender, so a locker can skip its own message.
 */
export function releaseOnce(
  client: ScriptClient,
  keys: ResourceKeys,
  ownerId: string,
  lockerId: string,
  handoffMs: number,
  within?: Within,
): Promise<ReleaseOutcome> {
  // One promise in the usual case: the hand-off, when needed, is chained inside the first call.
  const next = (reply: unknown): ReleaseOutcome | Promise<ReleaseOutcome> => {
    if (reply !== 2) return toOutcome(reply)
    const handling = within ? { deadlines: within.deadlines, ms: within.ms, map: toOutcome } : PLAIN
    return handoffReleaseScript.run(client, [keys.lock, keys.queue, keys.leases], [ownerId, keys.channel, lockerId, handoffMs], handling)
  }
  const lean = within ? { deadlines: within.deadlines, ms: within.ms, sentAt: within.sentAt, map: next } : { map: next }
  return releaseScript.run(client, [keys.lock], [ownerId, keys.channel, lockerId], lean)
}

/** Takes `lockerId` out of the resource's queue, passing on a lock that was handed to it. */
export function leaveQueue(client: ScriptClient, keys: ResourceKeys, lockerId: string, handoffMs: number): Promise<ReleaseOutcome> {
  return leaveScript.run(client, [keys.lock, keys.queue, keys.leases], ['', keys.channel, lockerId, handoffMs], PLAIN)
}
