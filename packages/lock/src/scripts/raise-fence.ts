import { defineScript } from './define-script.js'

/**
 * Quorum mode's second phase: raises a node's token counter to `token` unless it is there or
 * above already, so that the node's next grant mints above it. Returns 1 when it raised the
 * counter, 0 when the counter was at `token` or above (both mean: this node now knows `token`).
 * Either way the counter gets a fresh expiry of `fenceTtlMs`: it lives that long from its last
 * touch, as after a grant (mint-token.ts), so that what a majority knows is not lost on a
 * schedule counted from an older seed.
 *
 * Tokens are compared as decimal strings (length, then bytes): exact at any size, where Lua's
 * doubles are not above 2^53. Counters are written without leading zeros (INCR, the clock seed,
 * this script), so the comparison is numeric.
 */
export const raiseFenceScript = defineScript({
  keys: ['fence'],
  args: ['token', 'fenceTtlMs'],
  lua: (k, a) => `
local cur = redis.call('GET', ${k.fence})
if cur and (#cur > #${a.token} or (#cur == #${a.token} and cur >= ${a.token})) then
  redis.call('PEXPIRE', ${k.fence}, ${a.fenceTtlMs})
  return 0
end
redis.call('SET', ${k.fence}, ${a.token}, 'PX', ${a.fenceTtlMs})
return 1
`,
})

/** The reply of {@link raiseFenceScript}: true when the counter was raised, false when it was at the token or above. */
export function toRaised(reply: unknown): boolean {
  if (reply === 1) return true
  if (reply === 0) return false
  throw new TypeError(`unexpected reply from the raise-fence script: ${JSON.stringify(reply)}`)
}
