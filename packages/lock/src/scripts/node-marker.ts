import { queuedAcquireSpec } from '../fair-queue/queued-acquire.js'
import { acquireLua, acquireSpec } from './acquire.js'
import { defineScript } from './define-script.js'
import { readSpec, writeSpec } from './read-write.js'

/**
 * Quorum mode's node marker (quorum/restart-guard.ts): one key per node and prefix, with no
 * expiry, holding a random epoch. A node that loses its data without restarting — FLUSHALL, an
 * operator's DEL of the prefix's keys, eviction under an `allkeys-*` policy — loses the marker
 * too; a node that restarted without persistence comes back without it. Either way the epoch a
 * Locker learned no longer matches, and the node is treated as restarted.
 */

/**
 * The restart guard's check: sets the marker to `epoch` unless it is there, and returns the epoch
 * in force (ours when the node had none: a new node, or one that lost its data).
 */
export const markNodeScript = defineScript({
  keys: ['marker'],
  args: ['epoch'],
  lua: (k, a) => `
redis.call('SET', ${k.marker}, ${a.epoch}, 'NX')
return redis.call('GET', ${k.marker})
`,
})

/**
 * The reply of a script that found the node's marker gone or changed: `{2, epoch in force or
 * false}`. Nothing was written.
 */
export const MARKER_LOST = 2

/** A Lua fragment: return {@link MARKER_LOST} unless the marker holds `epoch`. Writes nothing. */
const markerCheck = (marker: string, epoch: string): string => `
local markedAs = redis.call('GET', ${marker})
if markedAs ~= ${epoch} then
  return {${MARKER_LOST}, markedAs}
end
`

/**
 * The acquires as quorum mode sends them with the restart guard on, so that a node that lost its
 * data grants nothing — not even the acquire that finds it out.
 *
 * The lean acquire (most acquires) checks the marker only when the resource's token counter is
 * missing: a counter lives at least `fenceTtlMs` after every grant of the resource, so a node
 * that lost the key of a lock someone holds has lost the counter with it (a restart, FLUSHALL,
 * a DEL of the prefix's keys), and the grant that finds it missing reads the marker. Found gone,
 * the script deletes what it just wrote (our lock key, the new counter) and replies
 * {@link MARKER_LOST}. A node that kept its counters grants without reading the marker: one
 * command less per grant and node than a check on every grant. (A counter can also come back by a
 * raise, the second phase: {@link markedRaiseFenceScript} never creates one on a node without its
 * marker.) `touch`: see scripts/mint-token.ts.
 *
 * The queued acquire (a locker that waits) checks the marker first, on every try.
 */
export const markedAcquireScript = defineScript({
  batched: true,
  keys: [...acquireSpec.keys, 'marker'],
  args: [...acquireSpec.args, 'epoch', 'touch'],
  lua: (k, a) =>
    acquireLua(k, a, {
      touch: a.touch,
      onMissing: `
  local markedAs = redis.call('GET', ${k.marker})
  if markedAs ~= ${a.epoch} then
    redis.call('DEL', ${k.lock}, ${k.fence})
    return {${MARKER_LOST}, markedAs}
  end
`,
    }),
})

export const markedQueuedAcquireScript = defineScript({
  batched: true,
  keys: [...queuedAcquireSpec.keys, 'marker'],
  args: [...queuedAcquireSpec.args, 'epoch'],
  lua: (k, a) => markerCheck(k.marker, a.epoch) + queuedAcquireSpec.lua(k, a),
})

/**
 * Quorum mode's second phase with the restart guard on (scripts/raise-fence.ts): raises the
 * counter as that script does, but creates a missing one only on a node whose marker holds
 * `epoch` — else replies {@link MARKER_LOST} and writes nothing. A counter raised back onto a node
 * that lost its data would let its next grant skip the marker's check (see
 * {@link markedAcquireScript}).
 */
export const markedRaiseFenceScript = defineScript({
  keys: ['fence', 'marker'],
  args: ['token', 'fenceTtlMs', 'epoch'],
  lua: (k, a) => `
local cur = redis.call('GET', ${k.fence})
if cur and (#cur > #${a.token} or (#cur == #${a.token} and cur >= ${a.token})) then
  redis.call('PEXPIRE', ${k.fence}, ${a.fenceTtlMs})
  return 0
end
if not cur then
  local markedAs = redis.call('GET', ${k.marker})
  if markedAs ~= ${a.epoch} then
    return {${MARKER_LOST}, markedAs}
  end
end
redis.call('SET', ${k.fence}, ${a.token}, 'PX', ${a.fenceTtlMs})
return 1
`,
})

/**
 * The read-write lock's read and write as quorum mode sends them with the restart guard on
 * (quorum/quorum-read-write.ts): the marker is checked first, on every try, and a node whose
 * marker is gone or changed grants nothing (replies {@link MARKER_LOST}).
 */
export const markedReadScript = defineScript({
  keys: [...readSpec.keys, 'marker'],
  args: [...readSpec.args, 'epoch'],
  lua: (k, a) => markerCheck(k.marker, a.epoch) + readSpec.lua(k, a),
})

export const markedWriteScript = defineScript({
  keys: [...writeSpec.keys, 'marker'],
  args: [...writeSpec.args, 'epoch'],
  lua: (k, a) => markerCheck(k.marker, a.epoch) + writeSpec.lua(k, a),
})

/** Whether a script's reply says the node's marker was gone or changed. */
export function isMarkerLost(reply: unknown): boolean {
  return Array.isArray(reply) && reply.length === 2 && reply[0] === MARKER_LOST
}

/** The error of a call that found a node's marker gone: the node lost what it knew. */
export class NodeDataLostError extends Error {
  constructor() {
    super(
      "the node lost its data without restarting (its marker key is gone or changed: FLUSHALL, eviction, a DEL of the lock's keys); it sits out acquires like a restarted node",
    )
    this.name = 'NodeDataLostError'
  }
}
