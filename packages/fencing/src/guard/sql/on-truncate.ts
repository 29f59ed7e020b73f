/** The function that keeps the fences of the rows a TRUNCATE removes (TRUNCATE fires no row triggers). */
import { FENCE_GUARD_SQLSTATE } from '../protocol.js'
import { detail, scopeCheck, type GuardSql } from './context.js'
import { lit } from './quote.js'

export function onTruncateFunction(g: GuardSql): string {
  const { f, keys } = g
  return `-- TRUNCATE fires no row triggers: keep the fences of every row it is about to remove (raised to
-- the transaction's token, which must not be older than any of them). The table is the trigger's own
-- (TG_RELID), not a name: after ALTER TABLE ... RENAME it is still the one truncated, and a new table
-- that takes the old name is not read.
${g.create} ${g.fn(g.names.functions[2] as string)}() RETURNS trigger LANGUAGE plpgsql${g.definer} AS ${g.$}
DECLARE
  token bigint := ${g.token};
  newest bigint;
BEGIN
  IF token IS NOT NULL THEN
${scopeCheck(g, '    ')}
    EXECUTE 'SELECT max(' || ${lit(f)} || ') FROM ' || TG_RELID::regclass::text INTO newest;
    IF newest > token THEN
      RAISE EXCEPTION 'stale fencing token: TRUNCATE of % under token %, a row holds %', TG_TABLE_NAME, token, newest
        USING ERRCODE = '${FENCE_GUARD_SQLSTATE}', DETAIL = ${detail(g, 'newest', 'token', ", 'operation', 'truncate'")};
    END IF;
  END IF;
  EXECUTE ${lit(`INSERT INTO ${g.tombstones} AS t (${keys}, ${f}) SELECT ${keys}, GREATEST(${f}, $1) FROM `)} || TG_RELID::regclass::text || ${lit(` WHERE (${keys}) IS NOT NULL
    ON CONFLICT (${keys}) DO UPDATE SET ${f} = GREATEST(t.${f}, EXCLUDED.${f})`)}
    USING token;
  RETURN NULL;
END
${g.$};
`
}
