/** The names of what the guard creates: its tombstone table, functions and triggers, from one prefix. */

/** What `fenceGuardSql` creates, by name (without the schema). */
export interface FenceGuardObjects {
  readonly tombstoneTable: string
  readonly functions: readonly string[]
  readonly triggers: readonly string[]
}

/** The names of the strict guard's function and triggers, for `name` (default `<table>_fence`). */
export function strictGuardObjects(name: string): { readonly function: string; readonly triggers: readonly [string, string] } {
  return { function: `${name}_strict`, triggers: [`${name}_strict_fenced`, `${name}_strict_refuse`] }
}

/** The names a guard installed with the default `name` has on `table` (for checking it, without the other options). */
export function defaultGuardObjects(table: string): FenceGuardObjects {
  return objectNames(`${table}_fence`)
}

const SUFFIXES = {
  tombstoneTable: '_tombstones',
  functions: ['_refuse_lower', '_remember', '_on_truncate', '_keep_tombstones', '_token'],
  triggers: ['_refuse_lower', '_on_insert', '_on_delete', '_on_rekey', '_on_truncate', '_tombstone_delete', '_tombstone_update', '_token'],
} as const
/** The longest suffix the guard appends to its prefix: a prefix must leave room for it in 63 bytes. */
export const LONGEST_SUFFIX = Math.max(...[SUFFIXES.tombstoneTable, ...SUFFIXES.functions, ...SUFFIXES.triggers].map((x) => x.length))

/** The objects of a guard whose prefix is `name`. */
export function objectNames(name: string): FenceGuardObjects {
  return {
    tombstoneTable: name + SUFFIXES.tombstoneTable,
    functions: SUFFIXES.functions.map((x) => name + x),
    triggers: SUFFIXES.triggers.map((x) => name + x),
  }
}

