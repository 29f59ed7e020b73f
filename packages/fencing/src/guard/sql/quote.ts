/** Quoting for the guard's SQL: every name the user gives reaches the SQL through these. */

/** Quotes a PostgreSQL identifier. */
export function q(name: string): string {
  return `"${name.replaceAll('"', '""')}"`
}

/** Quotes a string literal. */
export function lit(text: string): string {
  return `'${text.replaceAll("'", "''")}'`
}

/** A name as a comment shows it: a line break in a quoted name would end the comment and start SQL. */
export function shown(name: string): string {
  return q(name).replace(/[\p{Cc}\p{Zl}\p{Zp}]/gu, '?')
}

/**
 * The tag of the functions' dollar quotes: `$fencelock$`, unless a name contains that; then
 * `$fencelock_1$`, ... — the first no name contains, so no name can end a function body early.
 */
export function dollarTag(names: readonly string[]): string {
  let tag = '$fencelock$'
  for (let n = 1; names.some((name) => name.includes(tag)); n++) tag = `$fencelock_${n}$`
  return tag
}
