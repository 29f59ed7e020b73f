import { LUA } from '../fair-queue/formats.js'
import { defineScript } from './define-script.js'

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
