import { LUA } from './formats.js'
import { defineScript, type Handling, type ScriptClient } from './script.js'

/**
 * The token of a grant, minted in the script that grants it (Lua; `token` is left in a local).
 *
 * The counter is `INCR`ed: one call, no clock read, no formatting. Only when the counter is
 * missing (the resource's first grant, the counter expired after `fenceTtlMs`, or it was lost
 * with the data: a restart without persistence, a FLUSHALL) is it seeded from the server clock in
 * microseconds. A seed lies above every token minted since the previous seed as long as fewer
 * than one grant per microsecond (on average) were made since then, which no single Redis comes
 * near (~10^5 grants per second at most), and the clock did not step back. So tokens stay
 * strictly increasing across the loss of the counter.
 *
 * A counter can also go back without going missing: a failover to a replica that had not yet
 * seen the latest grants. Then `INCR` alone would mint a token already handed out. So a try sent
 * with `reseed` mints `max(INCR, clock)`: the backend sends it on the first grant of a resource
 * after each (re)connection or change of topology, which every failover causes, and the new
 * primary's clock lies far above a counter that grows by one per grant. docs/LOCK.md has the
 * whole argument.
 *
 * Lua numbers are doubles, and so are the client's: a token is returned as an integer only below
 * 2^52, and read back as a string (INCR works on exact 64-bit integers) from there on. Not 2^53:
 * ioredis's parser adds each digit to ten times the digits before, so its intermediate exceeds
 * the value, and integers just under 2^53 came back off by one in a test (2^53 - 1 as 2^53).
 * Tokens seeded from the clock are ~1.8e15; 2^52 is ~4.5e15 (the year 2112 in µs). The seed
 * itself is built from TIME's two strings.
 */
const mintToken = (fence: string, fenceTtlMs: string, reseed: string) => `
local token = redis.call('INCR', ${fence})
local seeded = false
if token == 1 or ${reseed} == '1' then
  local t = redis.call('TIME')
  local clock = t[1] .. string.format('%06d', tonumber(t[2]))
  if token == 1 or tonumber(clock) > token then
    token = clock
    seeded = true
    redis.call('SET', ${fence}, token, 'PX', ${fenceTtlMs})
  end
end
if (not seeded) and token >= 4503599627370496 then
  token = redis.call('GET', ${fence})
end`

// Replies of both acquire scripts:
// - the token (an integer below 2^52, or a string of digits): granted;
// - {1, token}: granted, taking over a lock handed to our locker (it left the queue in Redis);
// - {0, pttl}: missed; pttl is the holder's remaining lease in ms (-1 when the key has no expiry).

/**
 * The acquire of a single try, and the first try of an acquire (most acquires find the lock
 * free): `SET NX PX` of our owner id, then the token. A key handed to our locker (see
 * formats.ts) is ours to take as well; any other held key is a miss.
 */
export const acquireScript = defineScript({
  keys: ['lock', 'fence'],
  args: ['ownerId', 'ttlMs', 'fenceTtlMs', 'lockerId', 'reseed'],
  lua: (k, a) => `
local handed = false
if not redis.call('SET', ${k.lock}, ${a.ownerId}, 'NX', 'PX', ${a.ttlMs}) then
  if redis.call('GET', ${k.lock}) ~= ${LUA.handedTo(a.lockerId)} then
    return {0, redis.call('PTTL', ${k.lock})}
  end
  redis.call('SET', ${k.lock}, ${a.ownerId}, 'PX', ${a.ttlMs})
  handed = true
end
${mintToken(k.fence, a.fenceTtlMs, a.reseed)}
if handed then
  return {1, token}
end
return token
`,
})

/** `mode` of {@link queuedAcquireScript}. */
export type JoinMode = 'join' | 'stay'

/**
 * The acquire of a locker that waits. A free key is taken with `SET NX` as above, and a key
 * handed to our locker is taken over. Any other miss puts our locker in the resource's queue
 * (a sorted set, by ticket) and renews its lease there, and marks the holder's key (`APPEND`
 * keeps its TTL), so that the holder's release hands the lock to the lockers in the order they
 * came, not to whoever asks fastest. A locker whose lease runs out (it stopped trying: a crashed
 * process) is skipped by the next hand-off.
 *
 * `ticket`: where our locker stands (ms; ties go by locker id). Empty: the server's clock when it
 * joins, the order of arrival, and a locker already queued keeps its place. Otherwise the
 * locker's own ticket, set as given on every try: quorum mode sends the same to every node, for
 * as long as the locker waits, so that every node's queue agrees on who came first although the
 * tries reach the nodes in different orders and a node may have dropped the locker meanwhile.
 *
 * `mode`: `join`, or `stay` when more of our waiters wait, so that our locker stays queued after
 * a grant (otherwise a grant takes it out of the queue): where it was, or at the back when the
 * hand-off took it out (the server's clock); with `stayTicket`, at that ticket on every node. A lock we take while other lockers are queued
 * is marked, so that our release hands it on (our own waiters are woken locally).
 */
export const queuedAcquireScript = defineScript({
  keys: ['lock', 'fence', 'queue', 'leases'],
  args: ['ownerId', 'ttlMs', 'fenceTtlMs', 'lockerId', 'leaseMs', 'mode', 'reseed', 'ticket', 'stayTicket'],
  lua: (k, a) => `
local function enqueue(ticket)
  local t = redis.call('TIME')
  local nowMs = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  local joined = redis.call('HSET', ${k.leases}, ${a.lockerId}, nowMs + tonumber(${a.leaseMs})) == 1
  if ticket ~= '' then
    redis.call('ZADD', ${k.queue}, ticket, ${a.lockerId})
  elseif joined then
    redis.call('ZADD', ${k.queue}, nowMs, ${a.lockerId})
  end
  redis.call('PEXPIRE', ${k.queue}, 2 * tonumber(${a.leaseMs}))
  redis.call('PEXPIRE', ${k.leases}, 2 * tonumber(${a.leaseMs}))
end
local handed = false
if not redis.call('SET', ${k.lock}, ${a.ownerId}, 'NX', 'PX', ${a.ttlMs}) then
  local v = redis.call('GET', ${k.lock})
  handed = v == ${LUA.handedTo(a.lockerId)}
  if not handed then
    enqueue(${a.ticket})
    if v and ${LUA.isUnmarkedHolder('v')} then
      redis.call('APPEND', ${k.lock}, ${LUA.waitingMark})
    end
    return {0, redis.call('PTTL', ${k.lock})}
  end
end
-- Granted. More of our waiters wait: stay queued (a locker the hand-off took out goes to the
-- back; with a stayTicket, as quorum mode sends, every node puts it there); else leave the queue.
if ${a.mode} == 'stay' then
  if ${a.stayTicket} ~= '' or redis.call('HEXISTS', ${k.leases}, ${a.lockerId}) == 0 then
    enqueue(${a.stayTicket})
  end
elseif redis.call('HDEL', ${k.leases}, ${a.lockerId}) == 1 then
  redis.call('ZREM', ${k.queue}, ${a.lockerId})
end
-- Other lockers queued (our own waiters are woken locally): mark the lock, so that our release
-- hands it on. A locker that stays is in the queue itself.
local others = redis.call('ZCARD', ${k.queue})
if ${a.mode} == 'stay' then
  others = others - 1
end
if handed then
  redis.call('SET', ${k.lock}, others > 0 and ${LUA.marked(a.ownerId)} or ${a.ownerId}, 'PX', ${a.ttlMs})
elseif others > 0 then
  redis.call('APPEND', ${k.lock}, ${LUA.waitingMark})
end
${mintToken(k.fence, a.fenceTtlMs, a.reseed)}
if handed then
  return {1, token}
end
return token
`,
})

/** Outcome of one acquire round trip. */
export type AcquireReply = { granted: true; token: bigint; handedOver: boolean } | { granted: false; holderTtlMs: number }

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

/** One single try, as a plain round trip (the backend sends it with its own deadline and clean-up). */
export function acquireOnce(
  client: ScriptClient,
  keys: { readonly lock: string; readonly fence: string },
  args: { readonly ownerId: string; readonly ttlMs: number; readonly fenceTtlMs: number; readonly lockerId: string; readonly reseed?: '0' | '1' },
): Promise<AcquireReply> {
  return acquireScript.run(client, keys, { ...args, reseed: args.reseed ?? '0' }, PLAIN)
}

const PLAIN: Handling<AcquireReply> = { map: toAcquireReply }
