/**
 * The arguments of a fenced call: read as Prisma reads them, refused before any query when they cannot be
 * fenced (a nested write into a fenced model, a cascade to one, the fence column set by the caller),
 * and rewritten into conditional ones (`fence <= token` in the filter, `fence = token` in the data).
 */
import { UnsupportedFencedWriteError } from '../shared/errors.js'
import { findCascade, findNestedWrite, type NestedWrite } from './nested-writes.js'
import { isSent, readCallArguments, readFields, sentEntries, type Fields } from './prisma-arguments.js'
import type { Call, FenceScope } from './fenced-call.js'

/** Reads an argument as Prisma does, or refuses it before any query. */
export function requireFields(call: Call, name: string, value: unknown): Fields {
  const read = readFields(value)
  if ('reason' in read) throw new UnsupportedFencedWriteError(call.model, call.operation, 'argument', name, `is ${read.reason}`)
  return read.fields
}

/**
 * Adds `{ [field]: condition }` to a filter, keeping every condition of the caller and the unique
 * fields at the top level, where `update` needs them. Next to the caller's fields when the caller
 * does not filter on the fence column itself (the smaller query: Prisma spends measurably less
 * CPU on it than on an `AND` list), else appended to `AND`.
 */
export function withCondition(where: Fields, field: string, condition: Fields): Fields {
  const out: Fields = { ...where }
  if (!isSent(where[field])) {
    out[field] = condition
    return out
  }
  const and = !isSent(where.AND) ? [] : Array.isArray(where.AND) ? where.AND : [where.AND]
  const fence: Fields = {}
  fence[field] = condition
  out.AND = [...and, fence]
  return out
}

export function withToken(data: Fields, field: string, token: bigint): Fields {
  const out: Fields = { ...data }
  out[field] = token
  return out
}

/** `select`, `include`, `omit` of the caller, for the statements a call is rewritten into. */
export function selectionOf(a: Fields): Fields {
  const selection: Fields = {}
  for (const key of ['select', 'include', 'omit'] as const) if (isSent(a[key])) selection[key] = a[key]
  return selection
}

/**
 * The part of a unique filter that names the row, for the second statement on a row this
 * transaction has locked: the filter's own columns but the fence (which the first statement
 * raised), the unique selector among them; these cannot have changed since. `AND`, `OR`, `NOT`
 * and relation filters were met by the first statement; read again they could see the raised
 * fence or what other transactions wrote since. Without a data model relation filters stay (a
 * miss then fails the call, and rolls it back).
 */
export function sameRow(call: Call, where: Fields): Fields {
  const relations = call.scope.dataModel?.get(call.model)?.relations
  const row: Fields = {}
  for (const key of Object.keys(where)) {
    if (key === call.field || key === 'AND' || key === 'OR' || key === 'NOT' || relations?.has(key) === true) continue
    row[key] = where[key]
  }
  return row
}

/** Whether a filter reads the model's own `field`: at its top, or inside `AND`, `OR`, `NOT` (a relation filter reads another model). */
export function filtersOn(where: unknown, field: string, depth: number): boolean {
  // Prisma filters are shallow; past the cap (a cyclic object) assume it does.
  if (depth > 64) return true
  for (const [key, value] of sentEntries(where)) {
    if (key === field) return true
    if ((key === 'AND' || key === 'OR' || key === 'NOT') && (Array.isArray(value) ? value : [value]).some((part) => filtersOn(part, field, depth + 1))) return true
  }
  return false
}

export interface PrimaryKey {
  readonly fields: readonly string[]
  /** The selector of a unique filter: the field, or the compound id's name. */
  readonly name: string
}

export function primaryKeyOf(call: Call): PrimaryKey | undefined {
  const shape = call.scope.dataModel?.get(call.model)
  const fields = shape?.primaryKey
  if (fields === undefined || shape?.primaryKeyName === undefined || fields.includes(call.field)) return undefined
  return { fields, name: shape.primaryKeyName }
}

export function selectKey(key: PrimaryKey): Fields {
  return Object.fromEntries(key.fields.map((f) => [f, true]))
}

export function pick(row: Fields, fields: readonly string[]): Fields {
  return Object.fromEntries(fields.map((f) => [f, row[f]]))
}

/** A unique filter of the row `row` (holding at least the key's fields). */
export function uniqueKey(key: PrimaryKey, row: Fields): Fields {
  const [only] = key.fields
  return key.fields.length === 1 && only !== undefined ? { [only]: row[only] } : { [key.name]: pick(row, key.fields) }
}

/** Refuses `data` of a fenced write that sets the fence column or writes through a relation. */
export function checkData(call: Call, data: Fields): void {
  for (const [key] of sentEntries(data)) {
    if (key === call.field) throw new UnsupportedFencedWriteError(call.model, call.operation, 'fence-column', key)
  }
  const found = findNestedWrite(call.model, data, call.scope.dataModel, call.scope.options.models)
  if (found !== undefined) throw nestedWriteError(call.model, call.operation, found)
}

/** Refuses a delete whose rows the database would cascade to a fenced model. */
export function checkCascade(call: Call): void {
  const found = findCascade(call.model, call.scope.dataModel, call.scope.options.models)
  if (found !== undefined) throw nestedWriteError(call.model, call.operation, found)
}

export function nestedWriteError(model: string, operation: string, found: NestedWrite): UnsupportedFencedWriteError {
  const target = found.target === undefined ? 'another model' : found.target
  switch (found.kind) {
    case 'cascade':
      return new UnsupportedFencedWriteError(
        model,
        operation,
        'cascade',
        found.path,
        `would delete rows of the fenced model ${target} through "${found.path}" (onDelete: Cascade in the database), without their fences: delete those rows first, each with its own $fenced call under its own lock, or make the relation onDelete: Restrict`,
      )
    case 'fenced':
      return new UnsupportedFencedWriteError(model, operation, 'nested-write', found.path, `would write the fenced model ${target} through "${found.path}" without its fencing condition; write that row through $fenced on its own and set foreign keys as scalars`)
    case 'unfenced-from-fenced':
      return new UnsupportedFencedWriteError(
        model,
        operation,
        'nested-write',
        found.path,
        `is a nested write through "${found.path}" (to ${target}, which is not fenced) from the fenced model ${model}: Prisma runs it as statements of its own, apart from the fenced one, so it is refused; write ${target} with its own call (in a transaction with this one) and set foreign keys as scalars`,
      )
    case 'unknown':
      return new UnsupportedFencedWriteError(
        model,
        operation,
        found.path === '' ? 'cascade' : 'nested-write',
        found.path,
        `cannot be checked for writes into fenced models at "${found.path}" (${found.path === '' ? "Prisma's data model or the schema's cascades are unknown" : 'an operation the check does not know, an argument too deep or cyclic, or no data model'}): refused rather than run unchecked`,
      )
  }
}

/**
 * For a write to a model that is not fenced: throws when a nested write in it reaches a fenced
 * model, or a delete of it cascades to one, which would otherwise be written unconditionally.
 * Without the data model, any nested write and any delete is refused (it could reach a fenced
 * model, and we cannot tell).
 */
export function checkUnfencedWrite(model: string, operation: string, args: unknown, scope: FenceScope): void {
  const a = readCallArguments(args)
  if (a === undefined) return
  if (operation === 'delete' || operation === 'deleteMany') {
    const found = findCascade(model, scope.dataModel, scope.options.models)
    if (found !== undefined) throw nestedWriteError(model, operation, found)
    return
  }
  for (const key of ['data', 'create', 'update'] as const) {
    const found = findNestedWrite(model, a[key], scope.dataModel, scope.options.models)
    if (found !== undefined) throw nestedWriteError(model, operation, found)
  }
}
