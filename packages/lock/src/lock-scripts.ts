import { ACQUIRE_LUA, QUEUED_ACQUIRE_LUA } from './acquire-script.js'
import { EXTEND_LUA } from './extend-script.js'
import { HANDOFF_RELEASE_LUA, LEAVE_LUA, RELEASE_LUA } from './release-script.js'

/**
 * The Lua source of the scripts a Locker runs (`queuedAcquire`, `handoffRelease` and `leave` only when acquires wait), for auditing them or loading them ahead
 * (`SCRIPT LOAD`); the Locker needs neither. Their KEYS and ARGV are described above each script
 * in the package source. Changing them here changes nothing: they are copies of strings.
 */
export const LOCK_SCRIPTS: Readonly<{
  acquire: string
  queuedAcquire: string
  release: string
  handoffRelease: string
  leave: string
  extend: string
}> = Object.freeze({
  acquire: ACQUIRE_LUA,
  queuedAcquire: QUEUED_ACQUIRE_LUA,
  release: RELEASE_LUA,
  handoffRelease: HANDOFF_RELEASE_LUA,
  leave: LEAVE_LUA,
  extend: EXTEND_LUA,
})
