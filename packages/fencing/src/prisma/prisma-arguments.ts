/**
 * How Prisma reads the values of a call's arguments, so the extension sees exactly what Prisma
 * will send. Prisma's serializer (runtime `serializeJsonQuery`) reads an object argument with
 * `for...in` — own and inherited enumerable properties, so a class instance (a NestJS DTO) is
 * read like a plain object — skips `undefined` and `Prisma.skip`, and sends what `toJSON()`
 * returns, verbatim, for an object that has one. Dates, byte arrays and decimals are values, not
 * objects of fields.
 */

/** A call argument read as Prisma reads it: field → value. */
export type Fields = Record<string, unknown>

/** Why a value cannot be read as an object of fields. */
export type NotFieldsReason = 'missing' | 'not an object' | 'an array' | 'a Date' | 'a byte array' | 'an object with toJSON()'

function notFieldsReason(value: unknown): NotFieldsReason | undefined {
  if (value === undefined) return 'missing'
  if (value === null || typeof value !== 'object') return 'not an object'
  if (Array.isArray(value)) return 'an array'
  if (value instanceof Date) return 'a Date'
  if (ArrayBuffer.isView(value)) return 'a byte array'
  // Prisma sends toJSON()'s result as raw JSON, past its own serializer; we cannot add a field
  // to it and keep the call what it was.
  if (typeof (value as { toJSON?: unknown }).toJSON === 'function') return 'an object with toJSON()'
  return undefined
}

/**
 * The fields of `value` as Prisma reads them (own and inherited enumerable properties), as a new
 * plain object; or why it cannot be read so.
 */
export function readFields(value: unknown): { fields: Fields } | { reason: NotFieldsReason } {
  const reason = notFieldsReason(value)
  if (reason !== undefined) return { reason }
  const fields: Fields = {}
  // for...in on purpose: Prisma's serializer reads inherited enumerable properties too.
  for (const key in value as object) fields[key] = (value as Fields)[key]
  return { fields }
}

/** The top-level arguments of a call: Prisma takes them apart with object rest, so own enumerable properties. */
export function readCallArguments(args: unknown): Fields | undefined {
  if (args === undefined) return {}
  if (args === null || typeof args !== 'object' || Array.isArray(args)) return undefined
  return { ...(args as Fields) }
}

/** Whether Prisma sends a field of this value at all: `undefined` and `Prisma.skip` are left out. */
export function isSent(value: unknown): boolean {
  return value !== undefined && (typeof value !== 'object' || value === null || !isSkip(value))
}

// Prisma.skip is an instance of a class named Skip; the extension entry point does not export
// the class, and one copy of Prisma may not be the caller's copy, so it is recognized by name.
function isSkip(value: unknown): boolean {
  return typeof value === 'object' && value !== null && (value as object).constructor?.name === 'Skip'
}

/**
 * The nested values Prisma would look into for `value`, for a walk that must miss nothing
 * (the nested-write check): an object's fields, an array's items, and what `toJSON()` returns.
 * Dates and byte arrays have none.
 */
export function nestedValues(value: unknown): unknown[] {
  if (value === null || typeof value !== 'object' || value instanceof Date || ArrayBuffer.isView(value)) return []
  if (Array.isArray(value)) return value
  const toJSON = (value as { toJSON?: unknown }).toJSON
  if (typeof toJSON === 'function') {
    let json: unknown
    try {
      json = Reflect.apply(toJSON, value, [])
    } catch {
      return []
    }
    return [json]
  }
  const values: unknown[] = []
  for (const key in value) values.push((value as Fields)[key])
  return values
}

/** The sent fields of an object-like value, as Prisma reads them, including what `toJSON()` returns; none for anything else. */
export function sentEntries(value: unknown): [string, unknown][] {
  if (value === null || typeof value !== 'object' || Array.isArray(value) || value instanceof Date || ArrayBuffer.isView(value)) return []
  const toJSON = (value as { toJSON?: unknown }).toJSON
  if (typeof toJSON === 'function') {
    let json: unknown
    try {
      json = Reflect.apply(toJSON, value, [])
    } catch {
      return []
    }
    return json === value ? [] : sentEntries(json)
  }
  const entries: [string, unknown][] = []
  for (const key in value) {
    const v = (value as Fields)[key]
    if (isSent(v)) entries.push([key, v])
  }
  return entries
}
