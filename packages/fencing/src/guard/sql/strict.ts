/**
 * The strict guard (`strict: true`): a write that carries no fencing token is refused. Its
 * function and its two triggers; for a guard that is not strict, an upgrade drops the triggers an
 * earlier strict one left.
 */
import { FENCE_STRICT_SQLSTATE } from '../protocol.js'
import type { GuardSql } from './context.js'
import { lit, q } from './quote.js'

/** The transaction-local setting in which the strict guard records the rows whose fence this transaction raised. */
const RAISED_SETTING = 'fencelock.raised'

export function strictSql(g: GuardSql): string {
  const { table, f, strictNames } = g
  const drop = `DROP TRIGGER IF EXISTS ${q(strictNames.triggers[0])} ON ${table};\nDROP TRIGGER IF EXISTS ${q(strictNames.triggers[1])} ON ${table};\n`
  if (!g.options.strict) return g.mode === 'upgrade' ? `-- Not strict: the strict guard's triggers, if an earlier migration made it strict, are dropped.\n${drop}` : ''
  const keyText = (row: 'OLD' | 'NEW') => `TG_RELID::text || ':' || encode(convert_to(row(${g.options.key.map((k) => `${row}.${q(k)}`).join(', ')})::text, 'UTF8'), 'hex')`
  const raised = `coalesce(current_setting(${lit(RAISED_SETTING)}, true), '')`
  const fn = g.fn(strictNames.function)
  return `-- The strict guard: a write that carries no fencing token is refused. 'mark' (BEFORE UPDATE OF the
-- fence: the statement sets it) records the row as raised by this transaction, in a transaction-local
-- setting; 'check' then lets an UPDATE or DELETE of a raised row through, and an INSERT whose fence
-- is above 0. BEFORE ROW triggers fire by name: ..._strict_fenced before ..._strict_refuse. With the
-- transaction's token set, neither fires: the token trigger fences the write.
${g.create} ${fn}() RETURNS trigger LANGUAGE plpgsql${g.pin} AS ${g.$}
DECLARE
  me text;
BEGIN
  IF TG_ARGV[0] = 'mark' THEN
    me := ${keyText('NEW')};
    IF strpos(${raised} || ' ', ' ' || me || ' ') = 0 THEN
      PERFORM set_config(${lit(RAISED_SETTING)}, ${raised} || ' ' || me, true);
    END IF;
    RETURN NEW;
  END IF;
  IF TG_OP = 'INSERT' AND NEW.${f} > 0 THEN
    RETURN NEW;
  END IF;
  IF TG_OP <> 'INSERT' AND strpos(${raised} || ' ', ' ' || ${keyText('OLD')} || ' ') > 0
     OR TG_OP = 'UPDATE' AND strpos(${raised} || ' ', ' ' || ${keyText('NEW')} || ' ') > 0 THEN
    RETURN CASE TG_OP WHEN 'DELETE' THEN OLD ELSE NEW END;
  END IF;
  RAISE EXCEPTION 'fence guard (strict): % of % carries no fencing token: write it through $fenced(token), or in a transaction that set it (SET_FENCE_TOKEN_SQL)', TG_OP, TG_TABLE_NAME
    USING ERRCODE = '${FENCE_STRICT_SQLSTATE}', DETAIL = json_build_object('table', TG_TABLE_NAME, 'column', ${g.column}, 'operation', lower(TG_OP))::text,
          HINT = 'the table is guarded strictly (fenceGuardSql strict: true): every write must carry the token of a current lock';
END
${g.$};
${g.mode === 'upgrade' ? drop : ''}CREATE TRIGGER ${q(strictNames.triggers[0])} BEFORE UPDATE OF ${f} ON ${table}
  FOR EACH ROW WHEN (${g.setting} IS NULL OR ${g.setting} = '') EXECUTE FUNCTION ${fn}('mark');
CREATE TRIGGER ${q(strictNames.triggers[1])} BEFORE INSERT OR UPDATE OR DELETE ON ${table}
  FOR EACH ROW WHEN (${g.setting} IS NULL OR ${g.setting} = '') EXECUTE FUNCTION ${fn}('check');
`
}
