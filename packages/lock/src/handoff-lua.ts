// The Lua shared by the release and leave scripts: hand a freed lock to the oldest queued locker
// that is still there, or free it. Expects KEYS[1] lock, KEYS[2] queue, KEYS[3] leases and
// ARGV[2] channel, ARGV[3] the sender's locker id, ARGV[4] how long a hand-off is held (ms).
//
// A handed-off lock key holds '~' .. <locker id> (never an owner id: those are 32 hex digits)
// for ARGV[4] ms: only that locker's acquire takes it; if it does not come in time, the key
// expires and the lock is free for anyone. The message names the locker ("<sender> <head> <ms>"),
// so the other waiting lockers stay asleep instead of all trying at once (they only set their
// next try to when the hand-off would run out). Queued lockers whose
// lease ran out (they stopped trying: a crashed process) are dropped on the way. Returns the
// head's id, or 1 when nobody was queued and the key was deleted.
export const HANDOFF_LUA = `
local head = redis.call('LPOP', KEYS[2])
if head then
  local t = redis.call('TIME')
  local nowMs = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  while head do
    local lease = redis.call('HGET', KEYS[3], head)
    redis.call('HDEL', KEYS[3], head)
    if lease and tonumber(lease) > nowMs then break end
    head = redis.call('LPOP', KEYS[2])
  end
end
if head then
  redis.call('SET', KEYS[1], '~' .. head, 'PX', ARGV[4])
  redis.call('PUBLISH', ARGV[2], ARGV[3] .. ' ' .. head .. ' ' .. ARGV[4])
  return head
end
redis.call('DEL', KEYS[1])
redis.call('PUBLISH', ARGV[2], ARGV[3])
return 1
`
