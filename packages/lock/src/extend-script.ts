import type { ResourceKeys } from './keys.js'
import type { Deadlines } from './deadline.js'
import { defineScript, type ScriptClient } from './script.js'

// KEYS[1] lock key; ARGV[1] owner id, ARGV[2] new ttl ms. Returns 1 when the key held our owner
// id (with or without the '+' that says lockers are queued) and its TTL was reset, 0 when someone
// else holds it or nobody does.
export const EXTEND_LUA = `
local v = redis.call('GET', KEYS[1])
if v == ARGV[1] or v == ARGV[1] .. '+' then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
`

const extendScript = defineScript(EXTEND_LUA)

/** Owner-checked `PEXPIRE`: true when the lease is ours and now runs `ttlMs` from the server's now. */
export function extendOnce(client: ScriptClient, keys: ResourceKeys, ownerId: string, ttlMs: number, within?: { deadlines: Deadlines; ms: number; sentAt?: number }): Promise<boolean> {
  return extendScript.run(client, [keys.lock], [ownerId, ttlMs], within ? { deadlines: within.deadlines, ms: within.ms, sentAt: within.sentAt, map: isOne } : ONE)
}

function isOne(reply: unknown): boolean {
  return reply === 1
}

const ONE = { map: isOne }
