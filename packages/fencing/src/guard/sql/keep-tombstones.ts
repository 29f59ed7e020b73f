/** The function that refuses lowering a tombstone or deleting one row by row. */
import { FENCE_GUARD_SQLSTATE } from '../protocol.js'
import type { GuardSql } from './context.js'
import { lit } from './quote.js'

export function keepTombstonesFunction(g: GuardSql): string {
  return `${g.create} ${g.fn(g.names.functions[3] as string)}() RETURNS trigger LANGUAGE plpgsql${g.pin} AS ${g.$}
BEGIN
  RAISE EXCEPTION 'stale fencing token: the tombstones of %.% are never lowered nor deleted row by row', ${lit(g.options.table)}, ${g.column}
    USING ERRCODE = '${FENCE_GUARD_SQLSTATE}', HINT = 'TRUNCATE the tombstone table to reset it, only when no holder of an old lock can still write';
END
${g.$};
`
}
