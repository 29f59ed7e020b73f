import type { ResourceKeys } from './keys.js'
import { defineScript, type Handling, type ScriptClient } from './script.js'

// KEYS[1] lock key, KEYS[2] token counter; ARGV[1] owner id, ARGV[2] ttl ms, ARGV[3] counter ttl
// ms. On a grant: returns the new fencing token as a decimal string. On a miss: returns the
// holder's PTTL as an integer (-1 when the key has no expiry). A key handed to a queued locker
// ('~' .. its id, see handoff-lua.ts) is a miss like any held key.
//
// The queued variant below adds KEYS[3] queue, KEYS[4] leases; ARGV[4] our locker id, ARGV[5]
// queue lease ms, ARGV[6] '1' when more of our waiters wait. A free key is still taken with SET
// NX; a key handed to us is taken over (and the token returned as {token}, an array of one); any
// other miss puts our locker at the back of the resource's queue (once), renews its lease and
// marks the holder's key with a trailing '+' (APPEND keeps its TTL), so the holder's release
// hands the lock to the lockers in the order they came, not to whoever asks fastest. A lock taken
// over is marked too while others are still queued.
//
// The token is max(last + 1, server time in µs). Server time keeps tokens above every earlier
// grant after the counter is lost (restart without persistence, FLUSHALL, a lagging replica,
// expiry of the counter), as long as the server clock does not step back. Lua numbers are
// doubles, so nothing above 2^53 is ever computed in Lua: time in µs is ~1.8e15 < 2^53 and
// built from TIME's two strings; a counter at or above 2^53 is advanced by INCR, which Redis
// does on exact 64-bit integers, and read back as a string. The counter is written with SET ... GET
// (one call, not GET then SET) since time moves on between grants nearly always; in the rare case
// it did not (a burst within one µs, a clock behind the counter) the old value is put back first.
export const ACQUIRE_LUA = `
if not redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return redis.call('PTTL', KEYS[1])
end
local t = redis.call('TIME')
local now = t[1] .. string.format('%06d', tonumber(t[2]))
local last = redis.call('SET', KEYS[2], now, 'PX', ARGV[3], 'GET')
if (not last) or (tonumber(last) < tonumber(now)) then
  return now
end
redis.call('SET', KEYS[2], last, 'PX', ARGV[3])
local n = redis.call('INCR', KEYS[2])
if n < 9007199254740992 then
  return string.format('%.0f', n)
end
return redis.call('GET', KEYS[2])
`

// The acquire of a locker that waits: as above, but on a miss it joins the resource's queue (once)
// and renews its lease, and it takes a lock handed to it; see the comment above.
export const QUEUED_ACQUIRE_LUA = `
local mine = false
if not redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  if ARGV[4] == '' then
    return redis.call('PTTL', KEYS[1])
  end
  local v = redis.call('GET', KEYS[1])
  mine = v == '~' .. ARGV[4]
  if (not mine) or ARGV[6] == '1' then
    local t = redis.call('TIME')
    local nowMs = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
    if redis.call('HSET', KEYS[4], ARGV[4], nowMs + tonumber(ARGV[5])) == 1 then
      redis.call('RPUSH', KEYS[3], ARGV[4])
    end
    redis.call('PEXPIRE', KEYS[3], 2 * tonumber(ARGV[5]))
    redis.call('PEXPIRE', KEYS[4], 2 * tonumber(ARGV[5]))
  end
  if mine then
    -- Ours now; marked with '+' when others are still queued, so our release hands it on.
    local mark = ''
    if redis.call('LLEN', KEYS[3]) > 0 then mark = '+' end
    redis.call('SET', KEYS[1], ARGV[1] .. mark, 'PX', ARGV[2])
  else
    -- Mark a holder's key (not a hand-off) so that its release hands the lock on to the queue.
    if v and string.sub(v, 1, 1) ~= '~' and string.sub(v, -1) ~= '+' then
      redis.call('APPEND', KEYS[1], '+')
    end
    return redis.call('PTTL', KEYS[1])
  end
end
local t = redis.call('TIME')
local now = t[1] .. string.format('%06d', tonumber(t[2]))
local token = now
local last = redis.call('SET', KEYS[2], now, 'PX', ARGV[3], 'GET')
if last and tonumber(last) >= tonumber(now) then
  redis.call('SET', KEYS[2], last, 'PX', ARGV[3])
  local n = redis.call('INCR', KEYS[2])
  if n < 9007199254740992 then
    token = string.format('%.0f', n)
  else
    token = redis.call('GET', KEYS[2])
  end
end
if mine then
  return {token}
end
return token
`

const acquireScript = defineScript(ACQUIRE_LUA)
const queuedAcquireScript = defineScript(QUEUED_ACQUIRE_LUA)

/** Outcome of one acquire attempt. */
export type AcquireAttempt = { granted: true; token: bigint; handedOver: boolean } | { granted: false; holderTtlMs: number }

/** One atomic attempt: `SET NX PX` of our owner id and, on success, the fencing token. */
export function acquireOnce(
  client: ScriptClient,
  keys: ResourceKeys,
  ownerId: string,
  ttlMs: number,
  fenceTtlMs: number,
): Promise<AcquireAttempt> {
  return sendAcquire(client, keys, ownerId, ttlMs, fenceTtlMs, NO_QUEUE, { map: toAttempt })
}

/** How an attempt queues on a miss: under which locker id, with which lease. */
export interface QueueArgs {
  /** '' for an attempt that does not wait (it never queues). */
  readonly lockerId: string
  readonly leaseMs: number
  /** More of this locker's waiters wait: stay in the queue after a grant. */
  readonly more: boolean
}

export const NO_QUEUE: QueueArgs = Object.freeze({ lockerId: '', leaseMs: 0, more: false })

/** The acquire script with the caller's handling of its reply (see `toAttempt`). */
export function sendAcquire<T>(
  client: ScriptClient,
  keys: ResourceKeys,
  ownerId: string,
  ttlMs: number,
  fenceTtlMs: number,
  queue: QueueArgs,
  handling: Handling<T>,
): Promise<T> {
  // An attempt that does not queue runs the lean script: fewer keys and arguments to send, and
  // the uncontended path (most acquires) pays for nothing it does not use.
  if (queue.lockerId === '') return acquireScript.run(client, [keys.lock, keys.fence], [ownerId, ttlMs, fenceTtlMs], handling)
  return queuedAcquireScript.run(
    client,
    [keys.lock, keys.fence, keys.queue, keys.leases],
    [ownerId, ttlMs, fenceTtlMs, queue.lockerId, queue.leaseMs, queue.more ? '1' : '0'],
    handling,
  )
}

/** The reply of the acquire script as an outcome; throws on a reply it cannot be. */
export function toAttempt(reply: unknown): AcquireAttempt {
  if (typeof reply === 'number') return { granted: false, holderTtlMs: reply }
  if (typeof reply === 'string' && /^\d+$/.test(reply)) return { granted: true, token: BigInt(reply), handedOver: false }
  if (Array.isArray(reply) && reply.length === 1 && typeof reply[0] === 'string' && /^\d+$/.test(reply[0])) {
    return { granted: true, token: BigInt(reply[0]), handedOver: true }
  }
  throw new TypeError(`unexpected reply from the acquire script: ${String(reply)}`)
}
