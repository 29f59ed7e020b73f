import { defineScript, type ScriptSpec } from '../scripts/define-script.js'
import { mintToken } from '../scripts/mint-token.js'
import { LUA } from './formats.js'

/** `mode` of {@link queuedAcquireScript}. */
export type JoinMode = 'join' | 'stay'

/**
 * The acquire of a locker that waits (its replies are those of scripts/acquire.ts). A free key is
 * taken with `SET NX`, a key handed to our locker is taken over, and a key that holds our own
 * owner id is our own grant sent again after a lost reply (see scripts/acquire.ts). Any other
 * miss puts our locker in the resource's queue (a sorted set, by ticket) and renews its lease
 * there, and marks the holder's key (`APPEND` keeps its TTL), so that the holder's release hands
 * the lock to the lockers in the order they came, not to whoever asks fastest. A locker whose
 * lease runs out (it stopped trying: a crashed process) is skipped by the next hand-off.
 *
 * `ticket`: where our locker stands (ms; ties go by locker id). Empty: the server's clock when it
 * joins, the order of arrival, and a locker already queued keeps its place. Otherwise the
 * locker's own ticket, set as given on every try: quorum mode sends the same to every node, for
 * as long as the locker waits, so that every node's queue agrees on who came first although the
 * tries reach the nodes in different orders and a node may have dropped the locker meanwhile.
 *
 * `mode`: `join`, or `stay` when more of our waiters wait, so that our locker stays queued after
 * a grant (otherwise a grant takes it out of the queue): where it was, or at the back when the
 * hand-off took it out (the server's clock); with `stayTicket`, at that ticket on every node. A
 * lock we take while other lockers are queued is marked, so that our release hands it on (our
 * own waiters are woken locally).
 */
export const queuedAcquireSpec: ScriptSpec<
  'lock' | 'fence' | 'queue' | 'leases',
  'ownerId' | 'ttlMs' | 'fenceTtlMs' | 'lockerId' | 'leaseMs' | 'mode' | 'reseed' | 'ticket' | 'stayTicket'
> = {
  keys: ['lock', 'fence', 'queue', 'leases'],
  args: ['ownerId', 'ttlMs', 'fenceTtlMs', 'lockerId', 'leaseMs', 'mode', 'reseed', 'ticket', 'stayTicket'],
  lua: (k, a) => `
local function enqueue(at)
  local t = redis.call('TIME')
  local nowMs = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  local joined = redis.call('HSET', ${k.leases}, ${a.lockerId}, nowMs + tonumber(${a.leaseMs})) == 1
  if at ~= '' then
    redis.call('ZADD', ${k.queue}, at, ${a.lockerId})
  elseif joined then
    redis.call('ZADD', ${k.queue}, nowMs, ${a.lockerId})
  end
  redis.call('PEXPIRE', ${k.queue}, 2 * tonumber(${a.leaseMs}))
  redis.call('PEXPIRE', ${k.leases}, 2 * tonumber(${a.leaseMs}))
end
local held = false
local handed = false
if not redis.call('SET', ${k.lock}, ${a.ownerId}, 'NX', 'PX', ${a.ttlMs}) then
  held = redis.call('GET', ${k.lock})
  if held == ${LUA.handedTo(a.lockerId)} then
    handed = true
  elseif held ~= ${a.ownerId} and held ~= ${LUA.marked(a.ownerId)} then
    enqueue(${a.ticket})
    if held and ${LUA.isUnmarkedHolder('held')} then
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
elseif others > 0 and held ~= ${LUA.marked(a.ownerId)} then
  redis.call('APPEND', ${k.lock}, ${LUA.waitingMark})
end
${mintToken(k.fence, a.fenceTtlMs, a.reseed)}
if handed then
  return {1, token}
end
return token
`,
}

export const queuedAcquireScript = defineScript({ ...queuedAcquireSpec, batched: true })
