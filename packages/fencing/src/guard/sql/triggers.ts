/** The guard's triggers: which function runs on which write, and the WHEN that keeps it from running. */
import type { GuardSql } from './context.js'
import { q } from './quote.js'

export function triggers(g: GuardSql): string {
  const { table, tombstones, f, keys, oldKeys, newKeys, names } = g
  const [refuseLower, remember, onTruncate, keepTombstones, token] = names.functions.map(g.fn) as [string, string, string, string, string]
  const trigger = (n: number, definition: string) => {
    const name = q(names.triggers[n] as string)
    const drop = g.mode === 'upgrade' ? `DROP TRIGGER IF EXISTS ${name} ON ${n >= 5 && n <= 6 ? tombstones : table};\n` : ''
    return `${drop}CREATE TRIGGER ${name} ${definition};`
  }
  const tokenTrigger = g.options.tokenPath
    ? `BEFORE INSERT OR UPDATE OR DELETE ON ${table}
  FOR EACH ROW WHEN (${g.setting} <> '') EXECUTE FUNCTION ${token}()`
    : `BEFORE INSERT OR UPDATE OR DELETE ON ${table}
  FOR EACH STATEMENT WHEN (${g.setting} <> '') EXECUTE FUNCTION ${token}()`
  const about = g.options.tokenPath
    ? `The token trigger's WHEN is
-- one setting lookup, false unless the transaction set a token.`
    : `Without the token path, its
-- trigger is a statement's, and its WHEN one setting lookup per statement.`
  return `-- UPDATE OF: an UPDATE that does not set the fence (or the key) skips these triggers at the cost of
-- a column-list test, so the guard costs a plain update next to nothing. ${about}
${trigger(0, `AFTER UPDATE OF ${f} ON ${table}
  FOR EACH ROW WHEN (NEW.${f} < OLD.${f} OR NEW.${f} IS NULL) EXECUTE FUNCTION ${refuseLower}()`)}
${trigger(1, `AFTER INSERT ON ${table}
  FOR EACH ROW EXECUTE FUNCTION ${remember}()`)}
${trigger(2, `AFTER DELETE ON ${table}
  FOR EACH ROW EXECUTE FUNCTION ${remember}()`)}
${trigger(3, `AFTER UPDATE OF ${keys} ON ${table}
  FOR EACH ROW WHEN ((${oldKeys}) IS DISTINCT FROM (${newKeys})) EXECUTE FUNCTION ${remember}()`)}
${trigger(4, `BEFORE TRUNCATE ON ${table}
  FOR EACH STATEMENT EXECUTE FUNCTION ${onTruncate}()`)}
${trigger(5, `BEFORE DELETE ON ${tombstones}
  FOR EACH ROW EXECUTE FUNCTION ${keepTombstones}()`)}
${trigger(6, `BEFORE UPDATE ON ${tombstones}
  FOR EACH ROW WHEN (NEW.${f} < OLD.${f} OR NEW.${f} IS NULL OR (${oldKeys}) IS DISTINCT FROM (${newKeys})) EXECUTE FUNCTION ${keepTombstones}()`)}
${trigger(7, tokenTrigger)}
`
}
