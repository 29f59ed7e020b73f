import type { ResourceKeys } from './keys.js'
import type { Deadlines } from './deadline.js'
import { defineScript, type ScriptClient } from './script.js'

// KEYS[1] lock key; ARGV[1] owner id, ARGV[2] channel, ARGV[3] message. Deletes the key only
// when it still holds our owner id, and then announces the release to blocked waiters.
// Returns 1 when it deleted our lock, 0 otherwise.
export const RELEASE_LUA = `
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  redis.call('PUBLISH', ARGV[2], ARGV[3])
  return 1
end
return 0
`

const releaseScript = defineScript(RELEASE_LUA)

/**
 * Owner-checked delete plus a release message. Also the clean-up of an acquire whose outcome is
 * unknown: if that acquire did land, this removes it (and wakes the waiters) before it can block
 * anyone for a whole TTL. `message` identifies the releasing locker, so it can skip its own echo.
 */
export function releaseOnce(client: ScriptClient, keys: ResourceKeys, ownerId: string, message: string, within?: { deadlines: Deadlines; ms: number; sentAt?: number }): Promise<boolean> {
  return releaseScript.run(client, [keys.lock], [ownerId, keys.channel, message], within ? { deadlines: within.deadlines, ms: within.ms, sentAt: within.sentAt, map: isOne } : ONE)
}

function isOne(reply: unknown): boolean {
  return reply === 1
}

const ONE = { map: isOne }
