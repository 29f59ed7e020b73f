/** The function that refuses an UPDATE lowering the fence (its trigger's WHEN decides; it only raises). */
import { FENCE_GUARD_SQLSTATE } from '../protocol.js'
import { detail, type GuardSql } from './context.js'

export function refuseLowerFunction(g: GuardSql): string {
  return `${g.create} ${g.fn(g.names.functions[0] as string)}() RETURNS trigger LANGUAGE plpgsql${g.pin} AS ${g.$}
BEGIN
  RAISE EXCEPTION 'stale fencing token: %.% cannot go down from % to %', TG_TABLE_NAME, ${g.column}, OLD.${g.f}, coalesce(NEW.${g.f}::text, 'NULL')
    USING ERRCODE = '${FENCE_GUARD_SQLSTATE}', DETAIL = ${detail(g, `OLD.${g.f}`, `NEW.${g.f}`)},
          HINT = 'a newer fencing token has written this row; the writer''s lock is no longer current';
END
${g.$};
`
}
