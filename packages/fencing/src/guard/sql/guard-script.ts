/** The whole script of one table's guard, in the order PostgreSQL must run it. */
import type { ResolvedFenceGuardOptions } from '../guard-options.js'
import { guardSql, type GuardMode } from './context.js'
import { keepTombstonesFunction } from './keep-tombstones.js'
import { onTruncateFunction } from './on-truncate.js'
import { header, refusePartitioned, tombstoneComment, tombstoneTable } from './preamble.js'
import { refuseLowerFunction } from './refuse-lower.js'
import { rememberFunction } from './remember.js'
import { pinSearchPath } from './search-path.js'
import { strictSql } from './strict.js'
import { tokenFunction } from './token.js'
import { triggers } from './triggers.js'

/** The guard's SQL for `o`: a new guard (`install`), or the replacement of an older one's functions and triggers (`upgrade`). */
export function guardScript(o: ResolvedFenceGuardOptions, mode: GuardMode): string {
  const g = guardSql(o, mode)
  return [
    `${header(g)}${refusePartitioned(g)}${tombstoneTable(g)}`,
    refuseLowerFunction(g),
    rememberFunction(g),
    onTruncateFunction(g),
    keepTombstonesFunction(g),
    tokenFunction(g),
    `${strictSql(g)}${pinSearchPath(g)}`,
    `${triggers(g)}`,
    tombstoneComment(g),
  ].join('\n')
}
