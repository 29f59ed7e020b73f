import {
  handoffReleaseScript,
  leaveScript,
  shardedHandoffReleaseScript,
  shardedLeaveScript,
} from './fair-queue/hand-on.js'
import { queuedAcquireScript } from './fair-queue/queued-acquire.js'
import { acquireScript } from './scripts/acquire.js'
import { extendScript } from './scripts/extend.js'
import { raiseFenceScript } from './scripts/raise-fence.js'
import {
  markedAcquireScript,
  markedQueuedAcquireScript,
  markedRaiseFenceScript,
  markedReadScript,
  markedWriteScript,
  markNodeScript,
} from './scripts/node-marker.js'
import { readLeaseRecordScript, recordLeaseScript } from './scripts/record-lease.js'
import { markDoneScript, readDoneScript } from './scripts/mark-done.js'
import { releaseScript } from './scripts/release.js'
import { inspectScript } from './family/inspect.js'
import {
  extendReadScript,
  extendWriteScript,
  inspectReadWriteScript,
  readScript,
  releaseReadScript,
  releaseWriteScript,
  shardedReleaseReadScript,
  shardedReleaseWriteScript,
  writeScript,
} from './scripts/read-write.js'

/** One script as {@link LOCK_SCRIPTS} lists it. */
export interface LockScriptSource {
  /** The Lua source, as Redis runs it (`SCRIPT LOAD` it to load it ahead). */
  readonly lua: string
  /** SHA1 of the source, as `EVALSHA` wants it. */
  readonly sha: string
  /** The names of its KEYS, in order (the Lua names each `<name>Key`). */
  readonly keys: readonly string[]
  /** The names of its ARGV, in order (the Lua names each as is). */
  readonly args: readonly string[]
}

/** The names of the scripts a Locker runs. */
export type LockScriptName =
  | 'acquire'
  | 'queuedAcquire'
  | 'release'
  | 'handoffRelease'
  | 'leave'
  | 'shardedHandoffRelease'
  | 'shardedLeave'
  | 'extend'
  | 'raiseFence'
  | 'recordLease'
  | 'readLeaseRecord'
  | 'markNode'
  | 'markedAcquire'
  | 'markedQueuedAcquire'
  | 'markedRaiseFence'
  | 'inspect'
  | 'markDone'
  | 'readDone'
  | 'rwRead'
  | 'rwWrite'
  | 'rwReleaseRead'
  | 'rwReleaseWrite'
  | 'rwShardedReleaseRead'
  | 'rwShardedReleaseWrite'
  | 'rwExtendRead'
  | 'rwExtendWrite'
  | 'rwInspect'
  | 'rwMarkedRead'
  | 'rwMarkedWrite'

/**
 * The scripts a Locker runs (`queuedAcquire`, `handoffRelease` and `leave` only when acquires
 * wait, `shardedHandoffRelease` and `shardedLeave` in their place on a Cluster with sharded
 * pub/sub, as `rwShardedReleaseRead`/`rwShardedReleaseWrite` for the read-write lock's releases;
 * `raiseFence`, `recordLease` and `readLeaseRecord` only in quorum mode, `recordLease` by EVAL;
 * `markNode`, `markedAcquire`, `markedQueuedAcquire` and `markedRaiseFence` — the acquires and
 * the raise with the node marker's check — in quorum mode with the restart guard on, in place of
 * the two acquires and `raiseFence`; `inspect`, read-only, only for `locker.inspect()`; `markDone`
 * and `readDone` only for `locker.runOnce()`; the eleven `rw…` only for `locker.readWrite()`,
 * `rwMarkedRead`/`rwMarkedWrite` in quorum mode with the restart guard on), for
 * auditing them, loading them ahead (`SCRIPT LOAD`) or driving them from elsewhere (the
 * benchmark's bare loop); the Locker needs none of it. Each lists its keys and arguments by name,
 * in the order the script takes them. Changing them here changes nothing: they are copies.
 */
export const LOCK_SCRIPTS: Readonly<Record<LockScriptName, LockScriptSource>> = Object.freeze({
  acquire: source(acquireScript),
  queuedAcquire: source(queuedAcquireScript),
  release: source(releaseScript),
  handoffRelease: source(handoffReleaseScript),
  leave: source(leaveScript),
  shardedHandoffRelease: source(shardedHandoffReleaseScript),
  shardedLeave: source(shardedLeaveScript),
  extend: source(extendScript),
  raiseFence: source(raiseFenceScript),
  recordLease: source(recordLeaseScript),
  readLeaseRecord: source(readLeaseRecordScript),
  markNode: source(markNodeScript),
  markedAcquire: source(markedAcquireScript),
  markedQueuedAcquire: source(markedQueuedAcquireScript),
  markedRaiseFence: source(markedRaiseFenceScript),
  inspect: source(inspectScript),
  markDone: source(markDoneScript),
  readDone: source(readDoneScript),
  rwRead: source(readScript),
  rwWrite: source(writeScript),
  rwReleaseRead: source(releaseReadScript),
  rwReleaseWrite: source(releaseWriteScript),
  rwShardedReleaseRead: source(shardedReleaseReadScript),
  rwShardedReleaseWrite: source(shardedReleaseWriteScript),
  rwExtendRead: source(extendReadScript),
  rwExtendWrite: source(extendWriteScript),
  rwInspect: source(inspectReadWriteScript),
  rwMarkedRead: source(markedReadScript),
  rwMarkedWrite: source(markedWriteScript),
})

function source(script: LockScriptSource): LockScriptSource {
  return Object.freeze({
    lua: script.lua,
    sha: script.sha,
    keys: Object.freeze([...script.keys]),
    args: Object.freeze([...script.args]),
  })
}
