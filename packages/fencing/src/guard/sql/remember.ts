/**
 * The function that keeps a key's fence in the tombstones (AFTER INSERT, DELETE, re-key): a row that
 * takes a key must carry at least the key's last fence; a row that leaves one leaves its fence.
 */
import { FENCE_GUARD_SQLSTATE } from '../protocol.js'
import { detail, type GuardSql } from './context.js'

export function rememberFunction(g: GuardSql): string {
  const { f } = g
  return `-- A row takes a key (INSERT, re-key): its fence must be at least the key's last one. A row
-- leaves a key (DELETE, re-key): the key keeps the highest of the row's fence before and after
-- (a re-key by a newer token leaves that token) and the transaction's token. ON CONFLICT sees rows
-- that this transaction's snapshot does not (and fails under REPEATABLE READ if one appeared), so
-- two sessions deleting and recreating one key cannot slip past each other. A key with a NULL
-- names no row (a unique constraint lets many rows have it) and leaves no tombstone.
${g.create} ${g.fn(g.names.functions[1] as string)}() RETURNS trigger LANGUAGE plpgsql${g.definer} AS ${g.$}
DECLARE
  stored bigint;
  leaving bigint;
BEGIN
  IF TG_OP <> 'INSERT' AND (${g.oldKeys}) IS NOT NULL THEN
    leaving := GREATEST(OLD.${f}, ${g.token});
    IF TG_OP = 'UPDATE' THEN
      leaving := GREATEST(leaving, NEW.${f});
    END IF;
    INSERT INTO ${g.tombstones} AS t (${g.keys}, ${f}) VALUES (${g.oldKeys}, leaving)
      ON CONFLICT (${g.keys}) DO UPDATE SET ${f} = GREATEST(t.${f}, EXCLUDED.${f});
  END IF;
  IF TG_OP <> 'DELETE' AND (${g.newKeys}) IS NOT NULL THEN
    INSERT INTO ${g.tombstones} AS t (${g.keys}, ${f}) VALUES (${g.newKeys}, NEW.${f})
      ON CONFLICT (${g.keys}) DO UPDATE SET ${f} = GREATEST(t.${f}, EXCLUDED.${f})
      RETURNING t.${f} INTO stored;
    IF NEW.${f} IS NULL OR stored > NEW.${f} THEN
      RAISE EXCEPTION 'stale fencing token: %.% was written with % before, this row carries %', TG_TABLE_NAME, ${g.column}, stored, coalesce(NEW.${f}::text, 'NULL')
        USING ERRCODE = '${FENCE_GUARD_SQLSTATE}', DETAIL = ${detail(g, 'stored', `NEW.${f}`)},
              HINT = 'the row was deleted by a newer fencing token; an older one cannot recreate it';
    END IF;
  END IF;
  RETURN NULL;
END
${g.$};
`
}
