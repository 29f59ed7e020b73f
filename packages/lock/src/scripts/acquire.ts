import { LUA } from '../fair-queue/formats.js'
import { defineScript, type ScriptSpec } from './define-script.js'
import { mintToken, type QuorumMint } from './mint-token.js'

// Replies of both acquire scripts (this one and fair-queue/queued-acquire.ts):
// - the token (an integer below 2^52, or a string of digits): granted;
// - {1, token}: granted, taking over a lock handed to our locker (it left the queue in Redis);
// - {0, pttl}: missed; pttl is the holder's remaining lease in ms (-1 when the key has no expiry).

/**
 * The acquire of a single try, and the first try of an acquire (most acquires find the lock
 * free): `SET NX PX` of our owner id, then the token. A key handed to our locker (see
 * fair-queue/formats.ts) is ours to take as well; any other held key is a miss.
 *
 * A key that already holds our owner id is our own grant: this very try, run once already and
 * sent again by the client after its reply was lost to a reconnect (ioredis resends what was in
 * flight). It is granted again, with a fresh token (the first one never reached anyone); as a
 * miss it would hold the lock for nobody until its TTL ran out.
 */
export const acquireSpec: ScriptSpec<'lock' | 'fence', 'ownerId' | 'ttlMs' | 'fenceTtlMs' | 'lockerId' | 'reseed'> = {
  keys: ['lock', 'fence'],
  args: ['ownerId', 'ttlMs', 'fenceTtlMs', 'lockerId', 'reseed'],
  lua: (k, a) => acquireLua(k, a),
}

/** The Lua of {@link acquireSpec}, minted with quorum mode's hooks when given (scripts/node-marker.ts). */
export function acquireLua(
  k: { readonly lock: string; readonly fence: string },
  a: {
    readonly ownerId: string
    readonly ttlMs: string
    readonly fenceTtlMs: string
    readonly lockerId: string
    readonly reseed: string
  },
  quorum?: QuorumMint,
): string {
  return `
local handed = false
if not redis.call('SET', ${k.lock}, ${a.ownerId}, 'NX', 'PX', ${a.ttlMs}) then
  local v = redis.call('GET', ${k.lock})
  if v == ${LUA.handedTo(a.lockerId)} then
    redis.call('SET', ${k.lock}, ${a.ownerId}, 'PX', ${a.ttlMs})
    handed = true
  elseif v ~= ${a.ownerId} and v ~= ${LUA.marked(a.ownerId)} then
    return {0, redis.call('PTTL', ${k.lock})}
  end
end
${mintToken(k.fence, a.fenceTtlMs, a.reseed, quorum)}
if handed then
  return {1, token}
end
return token
`
}

export const acquireScript = defineScript({ ...acquireSpec, batched: true })

/** Outcome of one acquire round trip. */
export type AcquireReply =
  { granted: true; token: bigint; handedOver: boolean } | { granted: false; holderTtlMs: number }

/** The reply of either acquire script as an outcome; throws on a reply it cannot be. */
export function toAcquireReply(reply: unknown): AcquireReply {
  if (typeof reply === 'number') return { granted: true, token: BigInt(reply), handedOver: false }
  if (typeof reply === 'string' && DIGITS.test(reply)) return { granted: true, token: BigInt(reply), handedOver: false }
  if (Array.isArray(reply) && reply.length === 2) {
    const [tag, value] = reply as unknown[]
    if (tag === 0 && typeof value === 'number') return { granted: false, holderTtlMs: value }
    if (tag === 1 && (typeof value === 'number' || (typeof value === 'string' && DIGITS.test(value)))) {
      return { granted: true, token: BigInt(value), handedOver: true }
    }
  }
  throw new TypeError(`unexpected reply from the acquire script: ${JSON.stringify(reply)}`)
}

const DIGITS = /^\d+$/
