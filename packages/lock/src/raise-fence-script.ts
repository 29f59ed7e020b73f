import { defineScript, type Handling, type ScriptClient } from './script.js'

/**
 * Quorum mode's second phase: raises a node's token counter to `token` unless it is there or
 * above already, so that the node's next grant mints above it. Returns 1 when it raised the
 * counter, 0 when the counter was at `token` or above (both mean: this node now knows `token`).
 *
 * Tokens are compared as decimal strings (length, then bytes): exact at any size, where Lua's
 * doubles are not above 2^53. Counters are written without leading zeros (INCR, the clock seed,
 * this script), so the comparison is numeric. A raised counter keeps the TTL it had (the
 * counter's lifetime runs from its seed); a missing one gets `fenceTtlMs`, like a seed.
 */
export const raiseFenceScript = defineScript({
  keys: ['fence'],
  args: ['token', 'fenceTtlMs'],
  lua: (k, a) => `
local cur = redis.call('GET', ${k.fence})
if cur and (#cur > #${a.token} or (#cur == #${a.token} and cur >= ${a.token})) then
  return 0
end
local ttl = redis.call('PTTL', ${k.fence})
if ttl > 0 then
  redis.call('SET', ${k.fence}, ${a.token}, 'PX', ttl)
else
  redis.call('SET', ${k.fence}, ${a.token}, 'PX', ${a.fenceTtlMs})
end
return 1
`,
})

/** The reply of {@link raiseFenceScript}: true when the counter was raised, false when it was at the token or above. */
export function toRaised(reply: unknown): boolean {
  if (reply === 1) return true
  if (reply === 0) return false
  throw new TypeError(`unexpected reply from the raise-fence script: ${JSON.stringify(reply)}`)
}

/** The raise as a plain round trip (the quorum backend sends the same with its deadline). */
export function raiseFenceOnce(client: ScriptClient, keys: { readonly fence: string }, token: bigint, fenceTtlMs: number): Promise<boolean> {
  return raiseFenceScript.run(client, keys, { token: token.toString(), fenceTtlMs }, PLAIN)
}

const PLAIN: Handling<boolean> = { map: toRaised }
