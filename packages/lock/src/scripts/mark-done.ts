import { LUA } from '../fair-queue/formats.js'
import { defineScript } from './define-script.js'

/**
 * Records that the holder finished its work under this grant (a run-once tick: election/run-once.ts):
 * writes the grant's token to the resource's done key, for `ttlMs`, only while the lock still holds
 * our owner id — in the same script, so a holder whose lease ran out (another holder may have it
 * now) records nothing. Returns 1 when recorded, 0 when the lock is not ours.
 */
export const markDoneScript = defineScript({
  keys: ['lock', 'done'],
  args: ['ownerId', 'token', 'ttlMs'],
  lua: (k, a) => `
local v = redis.call('GET', ${k.lock})
if v == ${a.ownerId} or v == ${LUA.marked(a.ownerId)} then
  redis.call('SET', ${k.done}, ${a.token}, 'PX', ${a.ttlMs})
  return 1
end
return 0
`,
})

/** The token a holder of the resource recorded as done ({@link markDoneScript}), or false when none did. */
export const readDoneScript = defineScript({
  keys: ['done'],
  args: [],
  lua: (k) => `
return redis.call('GET', ${k.done})
`,
})

/** The reply of {@link readDoneScript}: the token recorded, or undefined. */
export function toDoneToken(reply: unknown): bigint | undefined {
  if (reply === null || reply === undefined) return undefined
  if (typeof reply === 'string' && /^[0-9]+$/.test(reply)) return BigInt(reply)
  throw new TypeError(`unexpected reply from the read-done script: ${JSON.stringify(reply)}`)
}
