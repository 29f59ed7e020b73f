/**
 * The function of the token path: a transaction that set its token (SET_FENCE_TOKEN_SQL) writes
 * under it — a row with a newer fence is neither updated nor deleted, and every row written gets
 * at least the token as its fence.
 */
import { FENCE_CASCADE_SQLSTATE, FENCE_GUARD_SQLSTATE, FENCE_NO_TOKEN_PATH_SQLSTATE, FENCE_TOKEN_SETTING } from '../protocol.js'
import { detail, scopeCheck, type GuardSql } from './context.js'

export function tokenFunction(g: GuardSql): string {
  if (!g.options.tokenPath) return noTokenPathFunction(g)
  const { f } = g
  return `-- The transaction's token (${FENCE_TOKEN_SETTING}), for clients that cannot add the fencing condition
-- themselves: a row with a newer fence is neither updated nor deleted, and every row written gets at
-- least the token as its fence. BEFORE the write, so the row it sees is the newest committed version
-- (a writer that waited for another's row lock sees what that one committed).
${g.create} ${g.fn(g.names.functions[4] as string)}() RETURNS trigger LANGUAGE plpgsql${g.pin} AS ${g.$}
DECLARE
  setting text := ${g.setting};
  token bigint;
BEGIN
  IF setting !~ '^[0-9]{1,19}$' OR length(setting) = 19 AND setting > '9223372036854775807' THEN
    RAISE EXCEPTION 'invalid ${FENCE_TOKEN_SETTING}: % (decimal digits, 0 to 9223372036854775807)', setting USING ERRCODE = '22023';
  END IF;
${scopeCheck(g, '  ')}
  token := setting::bigint;
  -- A DELETE the statement did not name (a foreign key's ON DELETE CASCADE, a trigger's): its rows
  -- are fenced by their own locks; comparing them with this token would compare two locks' tokens.
  IF TG_OP = 'DELETE' AND pg_trigger_depth() > 1 THEN
    RAISE EXCEPTION 'fence guard: a DELETE under ${FENCE_TOKEN_SETTING} % reached %.% through a cascade (or a trigger): its rows are fenced by their own locks, not by this token', token, TG_TABLE_NAME, ${g.column}
      USING ERRCODE = '${FENCE_CASCADE_SQLSTATE}', DETAIL = ${detail(g, `OLD.${f}`, 'token', ", 'operation', 'delete'")},
            HINT = 'delete those rows first, each under its own lock''s token, or make the foreign key ON DELETE RESTRICT';
  END IF;
  IF TG_OP <> 'INSERT' AND OLD.${f} > token THEN
    RAISE EXCEPTION 'stale fencing token: % of %.% under token % refused, the row holds %', TG_OP, TG_TABLE_NAME, ${g.column}, token, OLD.${f}
      USING ERRCODE = '${FENCE_GUARD_SQLSTATE}', DETAIL = ${detail(g, `OLD.${f}`, 'token', ", 'operation', lower(TG_OP)")},
            HINT = 'a newer fencing token has written this row; the writer''s lock is no longer current';
  END IF;
  IF TG_OP = 'DELETE' THEN
    RETURN OLD;
  END IF;
  NEW.${f} := GREATEST(NEW.${f}, token);
  RETURN NEW;
END
${g.$};
`
}

/**
 * Without the token path (`tokenPath: false`): the same function name, run once per statement that
 * writes in a transaction that set the token — and refusing it, since no row trigger would fence it.
 */
function noTokenPathFunction(g: GuardSql): string {
  return `-- No token path (tokenPath: false): the table is written through the Prisma extension, whose statements
-- carry the fence themselves, so no BEFORE row trigger makes PostgreSQL lock and WAL-log each row before
-- an UPDATE or DELETE. A write in a transaction that set ${FENCE_TOKEN_SETTING} would not be fenced: refused.
${g.create} ${g.fn(g.names.functions[4] as string)}() RETURNS trigger LANGUAGE plpgsql${g.pin} AS ${g.$}
BEGIN
  RAISE EXCEPTION 'fence guard: % of % under ${FENCE_TOKEN_SETTING} %: the guard of this table has no token path (tokenPath: false), so the write would not be fenced', TG_OP, TG_TABLE_NAME, ${g.setting}
    USING ERRCODE = '${FENCE_NO_TOKEN_PATH_SQLSTATE}', DETAIL = json_build_object('table', TG_TABLE_NAME, 'column', ${g.column}, 'operation', lower(TG_OP))::text,
          HINT = 'write it through $fenced(token), or give the table the token path (fenceGuardUpgradeSql without tokenPath: false)';
END
${g.$};
`
}
