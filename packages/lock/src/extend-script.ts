import { LUA } from './formats.js'
import { defineScript, type Handling, type ScriptClient } from './script.js'

/**
 * Owner-checked `PEXPIRE`: when the key holds our owner id (marked by a waiting locker or not),
 * resets its TTL and returns 1; returns 0 when someone else holds it or nobody does.
 */
export const extendScript = defineScript({
  keys: ['lock'],
  args: ['ownerId', 'ttlMs'],
  lua: (k, a) => `
local v = redis.call('GET', ${k.lock})
if v == ${a.ownerId} or v == ${LUA.marked(a.ownerId)} then
  return redis.call('PEXPIRE', ${k.lock}, ${a.ttlMs})
end
return 0
`,
})

/** The reply of {@link extendScript}: true when the lease was ours and now runs `ttlMs` from the server's now. */
export function isExtended(reply: unknown): boolean {
  return reply === 1
}

/** The extend as a plain round trip (the backend sends the same with its deadline). */
export function extendOnce(client: ScriptClient, keys: { readonly lock: string }, ownerId: string, ttlMs: number): Promise<boolean> {
  return extendScript.run(client, keys, { ownerId, ttlMs }, PLAIN)
}

const PLAIN: Handling<boolean> = { map: isExtended }
