import type { Deadlines } from './deadline.js'
import { HANDOFF_LUA } from './handoff-lua.js'
import type { ResourceKeys } from './keys.js'
import { defineScript, type ScriptClient } from './script.js'

// KEYS[1] lock key, KEYS[2] queue, KEYS[3] leases; ARGV[1] owner id, ARGV[2] channel, ARGV[3]
// our locker id, ARGV[4] hand-off ms. Only when the key still holds our owner id: hands the lock
// to the oldest queued locker, or deletes it, and announces it (see handoff-lua.ts).
// Returns 0 when the lock was not ours, else what the hand-off returns: the head's id, or 1.
export const RELEASE_LUA = `
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
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

const ONE = { map: toOutcome }

/**
 * Owner-checked release: the lock goes to the oldest queued locker, or is deleted, and waiters
 * are told. Also the clean-up of an acquire whose outcome is unknown: if that acquire did land,
 * this removes it before it can block anyone for a whole TTL. `lockerId` identifies the sender,
 * so a locker can skip its own message.
 */
export function releaseOnce(
  client: ScriptClient,
  keys: ResourceKeys,
  ownerId: string,
  lockerId: string,
  handoffMs: number,
  within?: { deadlines: Deadlines; ms: number; sentAt?: number },
): Promise<ReleaseOutcome> {
  return releaseScript.run(
    client,
    [keys.lock, keys.queue, keys.leases],
    [ownerId, keys.channel, lockerId, handoffMs],
    within ? { deadlines: within.deadlines, ms: within.ms, sentAt: within.sentAt, map: toOutcome } : ONE,
  )
}

/** Takes `lockerId` out of the resource's queue, passing on a lock that was handed to it. */
export function leaveQueue(client: ScriptClient, keys: ResourceKeys, lockerId: string, handoffMs: number): Promise<ReleaseOutcome> {
  return leaveScript.run(client, [keys.lock, keys.queue, keys.leases], ['', keys.channel, lockerId, handoffMs], ONE)
}
