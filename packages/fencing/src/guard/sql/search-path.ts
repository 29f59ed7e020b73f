/** A guard without a schema: each function's search_path is pinned to the schema the migration created it in. */
import type { GuardSql } from './context.js'
import { lit, q } from './quote.js'

export function pinSearchPath(g: GuardSql): string {
  if (g.options.schema !== undefined) return ''
  const functions = [...g.names.functions, ...(g.options.strict ? [g.strictNames.function] : [])]
  return `-- Each function's search_path: the schema the migration created them in, then pg_temp.
DO ${g.$}
DECLARE
  f text;
BEGIN
  FOREACH f IN ARRAY ARRAY[${functions.map((n) => lit(q(n))).join(', ')}] LOOP
    EXECUTE format('ALTER FUNCTION %s() SET search_path = %I, pg_temp', f, current_schema());
  END LOOP;
END
${g.$};
`
}
