/**
 * The scripts of the read-write lock (family/read-write.ts). One resource's keys share a hash tag,
 * so each script touches one slot (Cluster). Its keys:
 * - `writer`: a hash `{ owner, token }` with the writer's lease as its expiry, while a writer holds;
 * - `readers`: a sorted set of the readers' owner ids, each scored by the end of its own lease
 *   (server ms); a member whose score has passed is no reader any more, and every script that
 *   reads the set prunes it first — one stalled reader expires alone;
 * - `writers`: the waiting writers, a sorted set by arrival (server ms), with `writerLeases`, a
 *   hash of when (server ms) each counts as gone unless it tries again. While a live writer waits,
 *   no new reader enters (writer preference); writers are granted in arrival order;
 * - `released`: the channel on which a release that may let a waiter in is announced;
 * - `fence`: the token counter, the same kind as a lock's (scripts/mint-token.ts). Only a write
 *   increments it; a read returns its current value: the token of the last write granted before
 *   the read.
 *
 * Times are the server's (`TIME`), so that every client compares the same clock.
 */
import { defineScript, type PublishCommand } from './define-script.js'
import { mintToken } from './mint-token.js'

/** The Lua locals of a read's or write's keys. */
type ReadWriteLua = { readonly [k in 'writer' | 'readers' | 'writers' | 'writerLeases' | 'fence']: string }
type ReadArgs = { readonly [a in 'ownerId' | 'ttlMs' | 'fenceTtlMs']: string }
type WriteArgs = { readonly [a in 'ownerId' | 'ttlMs' | 'fenceTtlMs' | 'queueLeaseMs' | 'join' | 'arrival']: string }

/** The server's time in ms, as the Lua local `now`. */
const NOW = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)`

/** Raises a key's expiry to at least `ms` (a shorter lease never cuts a longer one short). */
const KEEP_FOR = `
local function keepFor(key, ms)
  if redis.call('PTTL', key) < ms then redis.call('PEXPIRE', key, ms) end
end`

/** Drops readers whose lease has passed. */
const PRUNE_READERS = (readersKey: string): string => `
redis.call('ZREMRANGEBYSCORE', ${readersKey}, '-inf', now)`

/** Drops waiting writers whose lease has passed; leaves the oldest live one in `head` (or false). */
const PRUNE_WRITERS = (writersKey: string, leasesKey: string): string => `
local head = false
for _, id in ipairs(redis.call('ZRANGE', ${writersKey}, 0, -1)) do
  local lease = tonumber(redis.call('HGET', ${leasesKey}, id) or '0')
  if lease <= now then
    redis.call('ZREM', ${writersKey}, id)
    redis.call('HDEL', ${leasesKey}, id)
  elseif not head then
    head = id
  end
end`

/**
 * A read: granted unless a writer holds or a live writer waits. Replies `{1, token}` (the counter's
 * value: the last write's token; a missing counter is seeded from the clock, above every token it
 * had), or `{0, ms}`: the writer's remaining lease, or -1 when writers wait.
 */
export const readSpec = {
  keys: ['writer', 'readers', 'writers', 'writerLeases', 'fence'],
  args: ['ownerId', 'ttlMs', 'fenceTtlMs'],
  lua: (k: ReadWriteLua, a: ReadArgs): string => `${NOW}${KEEP_FOR}${PRUNE_READERS(k.readers)}
local held = redis.call('PTTL', ${k.writer})
if held ~= -2 then return {0, held} end
${PRUNE_WRITERS(k.writers, k.writerLeases)}
if head then return {0, -1} end
redis.call('ZADD', ${k.readers}, now + tonumber(${a.ttlMs}), ${a.ownerId})
keepFor(${k.readers}, tonumber(${a.ttlMs}))
local token = redis.call('GET', ${k.fence})
if token then
  redis.call('PEXPIRE', ${k.fence}, ${a.fenceTtlMs})
else
  token = t[1] .. string.format('%06d', tonumber(t[2]))
  redis.call('SET', ${k.fence}, token, 'PX', ${a.fenceTtlMs})
end
return {1, token}`,
} as const

export const readScript = defineScript(readSpec)

/**
 * A write: granted when no writer holds, no reader's lease is live and no writer waits before it.
 * `join` '1': on a miss, take (or keep) a place among the waiting writers, which also stops new
 * readers. The place is scored by `arrival` (ms), or by the server's clock when it is '': quorum
 * mode gives every node the same arrival, so that every node puts its writers in the same order
 * (ties by owner id) and a majority of them grant the same one. Replies `{1, token}` (a fresh
 * token from the counter) or `{0, ms}`: the writer's remaining lease, the first reader lease to
 * end, or -1 when a writer waits before us.
 */
export const writeSpec = {
  keys: ['writer', 'readers', 'writers', 'writerLeases', 'fence'],
  args: ['ownerId', 'ttlMs', 'fenceTtlMs', 'queueLeaseMs', 'join', 'arrival'],
  lua: (k: ReadWriteLua, a: WriteArgs): string => `${NOW}${KEEP_FOR}${PRUNE_READERS(k.readers)}
if ${a.join} == '1' then
  if not redis.call('ZSCORE', ${k.writers}, ${a.ownerId}) then
    local arrival = now
    if ${a.arrival} ~= '' then arrival = tonumber(${a.arrival}) end
    redis.call('ZADD', ${k.writers}, arrival, ${a.ownerId})
  end
  redis.call('HSET', ${k.writerLeases}, ${a.ownerId}, now + tonumber(${a.queueLeaseMs}))
  keepFor(${k.writers}, tonumber(${a.queueLeaseMs}))
  keepFor(${k.writerLeases}, tonumber(${a.queueLeaseMs}))
end
${PRUNE_WRITERS(k.writers, k.writerLeases)}
local held = redis.call('PTTL', ${k.writer})
if held ~= -2 then return {0, held} end
if head and head ~= ${a.ownerId} then return {0, -1} end
local first = redis.call('ZRANGE', ${k.readers}, 0, 0, 'WITHSCORES')
if first[2] then return {0, tonumber(first[2]) - now} end
redis.call('ZREM', ${k.writers}, ${a.ownerId})
redis.call('HDEL', ${k.writerLeases}, ${a.ownerId})
${mintToken(k.fence, a.fenceTtlMs, "'0'")}
redis.call('HSET', ${k.writer}, 'owner', ${a.ownerId}, 'token', token)
redis.call('PEXPIRE', ${k.writer}, ${a.ttlMs})
return {1, token}`,
} as const

export const writeScript = defineScript(writeSpec)

/**
 * A writer's owner-checked release; also takes the owner out of the waiting writers. Publishes on
 * `released` when it freed the lock or left the queue (readers may enter). 1: the lock was ours.
 */
const releaseWrite = (publish: PublishCommand) =>
  defineScript({
    keys: ['writer', 'writers', 'writerLeases', 'released'],
    args: ['ownerId'],
    lua: (k, a) => `
local left = redis.call('ZREM', ${k.writers}, ${a.ownerId})
redis.call('HDEL', ${k.writerLeases}, ${a.ownerId})
if redis.call('HGET', ${k.writer}, 'owner') == ${a.ownerId} then
  redis.call('DEL', ${k.writer})
  redis.call('${publish}', ${k.released}, 'w')
  return 1
end
if left == 1 then redis.call('${publish}', ${k.released}, 'q') end
return 0`,
  })

/** {@link releaseWrite} with classic pub/sub, and with sharded pub/sub (a Cluster). */
export const releaseWriteScript = releaseWrite('PUBLISH')
export const shardedReleaseWriteScript = releaseWrite('SPUBLISH')

/**
 * A reader's release; publishes on `released` when no live reader is left (a writer may enter).
 * 1: its lease was still live (ours until now).
 */
const releaseRead = (publish: PublishCommand) =>
  defineScript({
    keys: ['readers', 'released'],
    args: ['ownerId'],
    lua: (k, a) => `${NOW}
local score = redis.call('ZSCORE', ${k.readers}, ${a.ownerId})
if not score then return 0 end
redis.call('ZREM', ${k.readers}, ${a.ownerId})
if redis.call('ZCOUNT', ${k.readers}, '(' .. now, '+inf') == 0 then redis.call('${publish}', ${k.released}, 'r') end
if tonumber(score) <= now then return 0 end
return 1`,
  })

/** {@link releaseRead} with classic pub/sub, and with sharded pub/sub (a Cluster). */
export const releaseReadScript = releaseRead('PUBLISH')
export const shardedReleaseReadScript = releaseRead('SPUBLISH')

/** A writer's owner-checked renewal to `ttlMs`. 1: renewed; 0: not ours. */
export const extendWriteScript = defineScript({
  keys: ['writer'],
  args: ['ownerId', 'ttlMs'],
  lua: (k, a) => `
if redis.call('HGET', ${k.writer}, 'owner') ~= ${a.ownerId} then return 0 end
redis.call('PEXPIRE', ${k.writer}, ${a.ttlMs})
return 1`,
})

/**
 * A reader's renewal to `ttlMs` from now. 0 when its lease already passed (a writer may have been
 * granted since: it must not come back) or it is gone.
 */
export const extendReadScript = defineScript({
  keys: ['readers'],
  args: ['ownerId', 'ttlMs'],
  lua: (k, a) => `${NOW}${KEEP_FOR}
local score = redis.call('ZSCORE', ${k.readers}, ${a.ownerId})
if not score then return 0 end
if tonumber(score) <= now then
  redis.call('ZREM', ${k.readers}, ${a.ownerId})
  return 0
end
redis.call('ZADD', ${k.readers}, 'XX', now + tonumber(${a.ttlMs}), ${a.ownerId})
keepFor(${k.readers}, tonumber(${a.ttlMs}))
return 1`,
})

/**
 * What Redis holds, read-only: `{writerToken or false, writerTtlMs, live readers, live waiting
 * writers, last token or false, writer's owner id or false}`.
 */
export const inspectReadWriteScript = defineScript({
  keys: ['writer', 'readers', 'writers', 'writerLeases', 'fence'],
  args: [],
  lua: (k) => `${NOW}
local readers = redis.call('ZCOUNT', ${k.readers}, '(' .. now, '+inf')
local waiting = 0
for _, id in ipairs(redis.call('ZRANGE', ${k.writers}, 0, -1)) do
  if tonumber(redis.call('HGET', ${k.writerLeases}, id) or '0') > now then waiting = waiting + 1 end
end
return {redis.call('HGET', ${k.writer}, 'token'), redis.call('PTTL', ${k.writer}), readers, waiting,
  redis.call('GET', ${k.fence}), redis.call('HGET', ${k.writer}, 'owner')}`,
})
