/**
 * `locker.inspect(resource)`: what Redis knows of a resource, read in one round trip without
 * taking the lock or joining its queue. The script is read-only; the quorum's view of it is
 * {@link majorityView}.
 */
import { HANDED_TO } from '../fair-queue/formats.js'
import { defineScript } from '../scripts/define-script.js'

/** What Redis says of a lock resource at one moment. */
export interface LockInspection {
  readonly resource: string
  /**
   * `free`; `held` by a grant; or `handing-on`: released while lockers waited, and kept for the
   * one that waited longest for up to `handoffMs` (nobody else can take it meanwhile).
   */
  readonly state: 'free' | 'held' | 'handing-on'
  /** The holder's remaining lease (or the hand-on's), in ms; 0 when free. */
  readonly holderTtlMs: number
  /** The last fencing token minted for the resource; undefined without a counter (none yet, or it expired). */
  readonly lastToken: bigint | undefined
  /**
   * Lockers waiting in the resource's queue in Redis (live ones: their lease in the queue has not
   * run out). One per Locker, however many acquires wait in it.
   */
  readonly waiting: number
  /**
   * Quorum mode only: each node's own view, in the order of the clients given to the Locker
   * (undefined for a node that did not answer in time). The fields above are then the majority's
   * view (see docs/LOCK.md).
   */
  readonly nodes?: readonly (NodeInspection | undefined)[]
}

/** One node's view, in quorum mode. */
export type NodeInspection = Omit<LockInspection, 'resource' | 'nodes'>

/**
 * Replies `{state, pttl, lastToken, waiting}`: state 0 free, 1 held, 2 handed on; pttl the lock
 * key's PTTL (negative when there is none); lastToken the counter's value as a string ('' when
 * missing: a string, so no token above 2^53 loses digits); waiting the queued lockers whose
 * lease is live by the server's clock.
 */
export const inspectScript = defineScript({
  keys: ['lock', 'fence', 'queue', 'leases'],
  args: [],
  lua: (k) => `
local value = redis.call('GET', ${k.lock})
local state = 0
if value then
  if string.sub(value, 1, 1) == '${HANDED_TO}' then state = 2 else state = 1 end
end
local pttl = redis.call('PTTL', ${k.lock})
local lastToken = redis.call('GET', ${k.fence}) or ''
local t = redis.call('TIME')
local nowMs = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local waiting = 0
for _, locker in ipairs(redis.call('ZRANGE', ${k.queue}, 0, -1)) do
  local untilMs = tonumber(redis.call('HGET', ${k.leases}, locker))
  if untilMs and untilMs > nowMs then waiting = waiting + 1 end
end
return {state, pttl, lastToken, waiting}
`,
})

const STATES = ['free', 'held', 'handing-on'] as const

/** The script's reply as a node's view; throws on a reply it cannot be. */
export function toNodeInspection(reply: unknown): NodeInspection {
  if (Array.isArray(reply) && reply.length === 4) {
    const [state, pttl, lastToken, waiting] = reply as unknown[]
    if (
      (state === 0 || state === 1 || state === 2) &&
      typeof pttl === 'number' &&
      typeof lastToken === 'string' &&
      (lastToken === '' || /^\d+$/.test(lastToken)) &&
      typeof waiting === 'number'
    ) {
      return {
        state: STATES[state],
        holderTtlMs: state === 0 ? 0 : Math.max(0, pttl),
        lastToken: lastToken === '' ? undefined : BigInt(lastToken),
        waiting,
      }
    }
  }
  throw new TypeError(`unexpected reply from the inspect script: ${JSON.stringify(reply)}`)
}

/**
 * The view of a quorum of `n` nodes from the views of those that answered (a majority at least):
 * - `state`: what a majority of all nodes agree on; `free` when no state has a majority (a lock
 *   that no majority holds is nobody's: no grant counts without one);
 * - `holderTtlMs`: the lease a majority still holds: the `quorum`-th longest of the nodes in that
 *   state;
 * - `lastToken`: the token a majority of the nodes has reached: the `quorum`-th largest counter, a
 *   node that did not answer counted as above all others. Every token handed out was written back
 *   to a majority, so it is never below the last token handed out (it is above it when a try that
 *   did not win minted on a majority, or a node's own first seed ran ahead: a single node's
 *   counter alone can be far above any token handed out);
 * - `waiting`: the most lockers queued on any node.
 */
export function majorityView(
  resource: string,
  views: readonly (NodeInspection | undefined)[],
  quorum: number,
): LockInspection {
  const answered = views.filter((v): v is NodeInspection => v !== undefined)
  let state: LockInspection['state'] = 'free'
  for (const s of STATES) if (answered.filter((v) => v.state === s).length >= quorum) state = s
  const ttls = answered
    .filter((v) => v.state === state)
    .map((v) => v.holderTtlMs)
    .sort((a, b) => b - a)
  const tokens = answered.map((v) => v.lastToken ?? 0n).sort((a, b) => (a > b ? -1 : a < b ? 1 : 0))
  const missing = views.length - answered.length
  const lastToken = tokens[Math.max(0, quorum - 1 - missing)]
  return {
    resource,
    state,
    holderTtlMs: state === 'free' ? 0 : (ttls[quorum - 1] ?? 0),
    lastToken: lastToken === 0n ? undefined : lastToken,
    waiting: Math.max(0, ...answered.map((v) => v.waiting)),
    nodes: views,
  }
}
