import { defineScript } from './define-script.js'
import { MARKER_LOST } from './node-marker.js'

/**
 * Quorum mode's lease record (quorum/restart-guard.ts), kept on every node: a hash from the
 * identity (run_id and marker epoch) of each node that was asked to grant lately to the server
 * time (ms) until which a lease it granted may live. Sent to every node asked, before the
 * acquire (or renewal) that grants a lease of `leaseMs` there: each listed node's entry is moved
 * to at least `now + 2 × leaseMs`, and entries that ran out are dropped. A Locker sends it again
 * before its entries are `leaseMs` old, so an entry outlives every lease it covers. A node
 * restarted without persistence comes back with a new run_id (one that lost its data, with a new
 * marker epoch): the other nodes still list its old identity, which is how it is found out.
 * Written only while the node's marker (scripts/node-marker.ts) holds `epoch`, the one the Locker
 * learned: otherwise the node lost its data, and the reply says so (`{2, epoch in force}`) — a
 * Locker that only renews finds it out here. Returns 1 when written.
 *
 * Sent with EVAL, not EVALSHA: it must land before the acquire sent behind it on the same
 * connection, and a NOSCRIPT fallback would go out after that acquire. It is sent rarely.
 */
export const recordLeaseScript = defineScript({
  keys: ['record', 'marker'],
  args: ['leaseMs', 'runIds', 'epoch'],
  lua: (k, a) => `
local markedAs = redis.call('GET', ${k.marker})
if markedAs ~= ${a.epoch} then
  return {${MARKER_LOST}, markedAs}
end
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
