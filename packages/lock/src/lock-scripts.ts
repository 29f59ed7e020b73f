import { ACQUIRE_LUA } from './acquire-script.js'
import { EXTEND_LUA } from './extend-script.js'
import { RELEASE_LUA } from './release-script.js'

/**
 * The Lua source of the three scripts a Locker runs, for auditing them or loading them ahead
 * (`SCRIPT LOAD`); the Locker needs neither. Their KEYS and ARGV are described above each script
 * in the package source. Changing them here changes nothing: they are copies of strings.
 */
export const LOCK_SCRIPTS: Readonly<{ acquire: string; release: string; extend: string }> = Object.freeze({
  acquire: ACQUIRE_LUA,
  release: RELEASE_LUA,
  extend: EXTEND_LUA,
})
