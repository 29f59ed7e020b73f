import type { ReleaseOutcome } from '../backend/backend.js'
import { defineScript, type PublishCommand } from '../scripts/define-script.js'
import { FREED, NOT_OURS } from '../scripts/release.js'
import { LUA } from './formats.js'

/**
 * Hands a freed lock to the first queued locker (the lowest ticket) that is still there, or frees
 * it, and says so on the channel (formats.ts), naming the locker queued next as well. Queued
 * lockers whose lease ran out (they stopped trying: a crashed process) are dropped on the way.
 * Leaves the head's id in `head` (nil when the lock was freed).
 */
const handOn = (
  k: { lock: string; queue: string; leases: string },
  a: { channel: string; lockerId: string; handoffMs: string },
  publish: PublishCommand,
) => `
local head = nil
local nowMs = nil
while true do
  local first = redis.call('ZRANGE', ${k.queue}, 0, 0)[1]
  if not first then break end
  redis.call('ZREM', ${k.queue}, first)
  local lease = redis.call('HGET', ${k.leases}, first)
  redis.call('HDEL', ${k.leases}, first)
  if not nowMs then
    local t = redis.call('TIME')
    nowMs = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  end
  if lease and tonumber(lease) > nowMs then
    head = first
    break
  end
end
if head then
  redis.call('SET', ${k.lock}, ${LUA.handedTo('head')}, 'PX', ${a.handoffMs})
  local nxt = redis.call('ZRANGE', ${k.queue}, 0, 0)[1]
  redis.call('${publish}', ${a.channel}, ${LUA.handedMessage(a.lockerId, 'head', a.handoffMs, 'nxt')})
else
  redis.call('DEL', ${k.lock})
  redis.call('${publish}', ${a.channel}, ${LUA.freedMessage(a.lockerId)})
end`

/**
 * The release of a lock that a waiting locker marked: when the key still holds our owner id
 * (marked or not), hands it on (see `handOn`). Returns 0 when the lock was not ours, else the id
 * of the locker it was handed to, or 1 when it was freed.
 */
const handoffRelease = (publish: PublishCommand) =>
  defineScript({
    keys: ['lock', 'queue', 'leases'],
    args: ['ownerId', 'channel', 'lockerId', 'handoffMs'],
    lua: (k, a) => `
local v = redis.call('GET', ${k.lock})
if v ~= ${a.ownerId} and v ~= ${LUA.marked(a.ownerId)} then
  return 0
end
${handOn(k, a, publish)}
return head or 1
`,
  })

/** {@link handoffRelease} with classic pub/sub, and with sharded pub/sub (a Cluster). */
export const handoffReleaseScript = handoffRelease('PUBLISH')
export const shardedHandoffReleaseScript = handoffRelease('SPUBLISH')

/**
 * Takes our locker out of the resource's queue when nobody in it waits any more; should the lock
 * have been handed to it meanwhile, passes it on. Returns 0, or what {@link handoffReleaseScript}
 * returns when it passed the lock on.
 */
const leave = (publish: PublishCommand) =>
  defineScript({
    keys: ['lock', 'queue', 'leases'],
    args: ['channel', 'lockerId', 'handoffMs'],
    lua: (k, a) => `
redis.call('ZREM', ${k.queue}, ${a.lockerId})
redis.call('HDEL', ${k.leases}, ${a.lockerId})
if redis.call('GET', ${k.lock}) ~= ${LUA.handedTo(a.lockerId)} then
  return 0
end
${handOn(k, a, publish)}
return head or 1
`,
  })

/** {@link leave} with classic pub/sub, and with sharded pub/sub (a Cluster). */
export const leaveScript = leave('PUBLISH')
export const shardedLeaveScript = leave('SPUBLISH')

/** The reply of {@link handoffReleaseScript} or {@link leaveScript} as an outcome. */
export function toReleaseOutcome(reply: unknown): ReleaseOutcome {
  if (reply === 0) return NOT_OURS
  if (typeof reply === 'string') return { freed: true, handedTo: reply }
  return FREED
}
