import type { ResourceKeys } from './keys.js'
import { defineScript, type Handling, type ScriptClient } from './script.js'

// KEYS[1] lock key, KEYS[2] token counter; ARGV[1] owner id, ARGV[2] ttl ms, ARGV[3] counter ttl ms.
// On a grant: returns the new fencing token as a decimal string. On a miss: returns the holder's
// PTTL as an integer (-1 when the key has no expiry).
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

const acquireScript = defineScript(ACQUIRE_LUA)

/** Outcome of one acquire attempt. */
export type AcquireAttempt = { granted: true; token: bigint } | { granted: false; holderTtlMs: number }

/** One atomic attempt: `SET NX PX` of our owner id and, on success, the fencing token. */
export function acquireOnce(
  client: ScriptClient,
  keys: ResourceKeys,
  ownerId: string,
  ttlMs: number,
  fenceTtlMs: number,
): Promise<AcquireAttempt> {
  return sendAcquire(client, keys, ownerId, ttlMs, fenceTtlMs, { map: toAttempt })
}

/** The acquire script with the caller's handling of its reply (see `toAttempt`). */
export function sendAcquire<T>(client: ScriptClient, keys: ResourceKeys, ownerId: string, ttlMs: number, fenceTtlMs: number, handling: Handling<T>): Promise<T> {
  return acquireScript.run(client, [keys.lock, keys.fence], [ownerId, ttlMs, fenceTtlMs], handling)
}

/** The reply of the acquire script as an outcome; throws on a reply it cannot be. */
export function toAttempt(reply: unknown): AcquireAttempt {
  if (typeof reply === 'number') return { granted: false, holderTtlMs: reply }
  if (typeof reply === 'string' && /^\d+$/.test(reply)) return { granted: true, token: BigInt(reply) }
  throw new TypeError(`unexpected reply from the acquire script: ${String(reply)}`)
}
