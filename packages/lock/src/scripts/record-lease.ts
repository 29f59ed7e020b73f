import { defineScript } from './define-script.js'

/**
 * Quorum mode's lease record (quorum/restart-guard.ts), kept on every node: a hash from the
 * run_id of each node that was asked to grant lately to the server time (ms) until which a lease
 * it granted may live. Sent to every node asked, before the acquire (or renewal) that grants a
 * lease of `leaseMs` there: each listed node's entry is moved to at least `now + 2 × leaseMs`, and
 * entries that ran out are dropped. A Locker sends it again before its entries are `leaseMs` old,
 * so an entry outlives every lease it covers. A node restarted without persistence comes back
 * with a new run_id: the other nodes still list its old one, which is how it is found out.
 * Returns nothing of use.
 *
 * Sent with EVAL, not EVALSHA: it must land before the acquire sent behind it on the same
 * connection, and a NOSCRIPT fallback would go out after that acquire. It is sent rarely.
 */
export const recordLeaseScript = defineScript({
  keys: ['record'],
  args: ['leaseMs', 'runIds'],
  lua: (k, a) => `
local t = redis.call('TIME')
local nowMs = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local lease = tonumber(${a.leaseMs})
local untilMs = nowMs + 2 * lease
for id in string.gmatch(${a.runIds}, '%S+') do
  if tonumber(redis.call('HGET', ${k.record}, id) or '0') < untilMs then
    redis.call('HSET', ${k.record}, id, untilMs)
  end
end
local entries = redis.call('HGETALL', ${k.record})
local longest = 0
for i = 1, #entries, 2 do
  local left = tonumber(entries[i + 1]) - nowMs
  if left <= 0 then
    redis.call('HDEL', ${k.record}, entries[i])
  elseif left > longest then
    longest = left
  end
end
redis.call('PEXPIRE', ${k.record}, math.max(longest, 1))
return 1
`,
})

/**
 * Reads a node's lease record: the run_ids it lists, each with the ms its entry still has (entries
 * that ran out are left out). Returns `{id, ms, id, ms, ...}`.
 */
export const readLeaseRecordScript = defineScript({
  keys: ['record'],
  args: [],
  lua: (k) => `
local t = redis.call('TIME')
local nowMs = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local entries = redis.call('HGETALL', ${k.record})
local live = {}
for i = 1, #entries, 2 do
  local left = tonumber(entries[i + 1]) - nowMs
  if left > 0 then
    live[#live + 1] = entries[i]
    live[#live + 1] = left
  end
end
return live
`,
})
