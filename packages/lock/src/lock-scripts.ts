import { acquireScript, queuedAcquireScript } from './acquire-script.js'
import { extendScript } from './extend-script.js'
import { raiseFenceScript } from './raise-fence-script.js'
import { handoffReleaseScript, leaveScript, releaseScript } from './release-script.js'

/** One script as {@link LOCK_SCRIPTS} lists it. */
export interface LockScriptSource {
  /** The Lua source (`SCRIPT LOAD` it to load it ahead). */
  readonly lua: string
  /** SHA1 of the source, as `EVALSHA` wants it. */
  readonly sha: string
  /** The names of its KEYS, in order. */
  readonly keys: readonly string[]
  /** The names of its ARGV, in order. */
  readonly args: readonly string[]
}

/**
 * The scripts a Locker runs (`queuedAcquire`, `handoffRelease` and `leave` only when acquires
 * wait, `raiseFence` only in quorum mode), for auditing them, loading them ahead (`SCRIPT LOAD`) or driving them from elsewhere
 * (the benchmark's bare loop); the Locker needs none of it. Each lists its keys and arguments by
 * name, in the order the script takes them. Changing them here changes nothing: they are copies.
 */
export const LOCK_SCRIPTS: Readonly<Record<'acquire' | 'queuedAcquire' | 'release' | 'handoffRelease' | 'leave' | 'extend' | 'raiseFence', LockScriptSource>> = Object.freeze({
  acquire: source(acquireScript),
  queuedAcquire: source(queuedAcquireScript),
  release: source(releaseScript),
  handoffRelease: source(handoffReleaseScript),
  leave: source(leaveScript),
  extend: source(extendScript),
  raiseFence: source(raiseFenceScript),
})

function source(script: LockScriptSource): LockScriptSource {
  return Object.freeze({ lua: script.lua, sha: script.sha, keys: Object.freeze([...script.keys]), args: Object.freeze([...script.args]) })
}
