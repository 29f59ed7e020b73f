/**
 * What the runtime data model of a Prisma 7 client leaves out and the fencing checks need: each
 * model's primary key, whether a relation field is a list, which side of a relation holds the
 * foreign key, and its `onDelete`. Read from the schema text every generated client carries
 * (`_engineConfig.inlineSchema`, the schema it was generated from). A small reader of the model
 * blocks, not a Prisma schema parser: what it cannot read it reports as unknown (`undefined`), and
 * the callers then fail closed.
 */

/** One field of a model as the schema declares it. */
export interface SchemaField {
  readonly name: string
  readonly type: string
  readonly list: boolean
  readonly id: boolean
  /** For a relation field: the relation's name as declared (`@relation("name")`), or undefined. */
  readonly relationName: string | undefined
  /** Whether `@relation(fields: [...])` is on this side: this model's row holds the foreign key. */
  readonly holdsForeignKey: boolean
  /** `@relation(onDelete: ...)` as written, or undefined (Prisma's default: Restrict, or SetNull when optional). */
  readonly onDelete: string | undefined
  /** Whether the type is optional (`String?`). */
  readonly optional: boolean
  /** Its column in the database: `@map("...")`, else the field's name. */
  readonly column: string
  /** Its native type attribute as written (`@db.VarChar(64)`), or undefined. */
  readonly nativeType: string | undefined
}

/** One model as the schema declares it. */
export interface SchemaModel {
  readonly fields: ReadonlyMap<string, SchemaField>
  /** `@id` or `@@id([...])` fields, in order; undefined when it has none (a model with only `@unique`). */
  readonly primaryKey: readonly string[] | undefined
  /** The name of the compound id's selector in a unique filter (`@@id(name: ...)`, default the fields joined by `_`). */
  readonly primaryKeyName: string | undefined
  /** Its table in the database: `@@map("...")`, else the model's name. */
  readonly dbName: string
}

/** Model name → model, or undefined when the text is not a schema this reader understands. */
export function readSchemaModels(text: unknown): ReadonlyMap<string, SchemaModel> | undefined {
  if (typeof text !== 'string' || text.length === 0) return undefined
  try {
    return parse(stripComments(text))
  } catch {
    return undefined
  }
}

/** Removes `//` comments (and `///` doc comments), leaving strings alone. */
function stripComments(text: string): string {
  let out = ''
  let inString = false
  for (let i = 0; i < text.length; i++) {
    const c = text[i] as string
    if (inString) {
      out += c
      if (c === '\\') out += text[++i] ?? ''
      else if (c === '"') inString = false
    } else if (c === '"') {
      inString = true
      out += c
    } else if (c === '/' && text[i + 1] === '/') {
      while (i < text.length && text[i] !== '\n') i++
      out += '\n'
    } else {
      out += c
    }
  }
  if (inString) throw new Error('unterminated string')
  return out
}

const BLOCK = /^\s*(model|view|enum|type|generator|datasource)\s+([A-Za-z_][A-Za-z0-9_]*)\s*\{\s*$/

function parse(text: string): Map<string, SchemaModel> {
  const models = new Map<string, SchemaModel>()
  const lines = text.split('\n')
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i] as string
    if (line.trim() === '') continue
    const block = BLOCK.exec(line)
    if (block === null) throw new Error(`unexpected line ${i + 1}`)
    const body: string[] = []
    for (i++; i < lines.length && (lines[i] as string).trim() !== '}'; i++) body.push(lines[i] as string)
    if (i >= lines.length) throw new Error('unterminated block')
    if (block[1] === 'model' || block[1] === 'view') models.set(block[2] as string, model(block[2] as string, joinContinued(body)))
  }
  return models
}

/** Joins lines while a bracket or parenthesis is open (an attribute's arguments written over several lines). */
function joinContinued(lines: readonly string[]): string[] {
  const out: string[] = []
  let current = ''
  for (const line of lines) {
    current = current === '' ? line : `${current} ${line}`
    if (depth(current) === 0) {
      if (current.trim() !== '') out.push(current.trim())
      current = ''
    }
  }
  if (current.trim() !== '') throw new Error('unbalanced brackets')
  return out
}

function depth(text: string): number {
  let d = 0
  let inString = false
  for (let i = 0; i < text.length; i++) {
    const c = text[i]
    if (inString) {
      if (c === '\\') i++
      else if (c === '"') inString = false
    } else if (c === '"') inString = true
    else if (c === '(' || c === '[') d++
    else if (c === ')' || c === ']') d--
  }
  return d
}

const FIELD = /^([A-Za-z_][A-Za-z0-9_]*)\s+([A-Za-z_][A-Za-z0-9_]*(?:\("(?:[^"\\]|\\.)*"\))?)(\[\])?(\?)?(?:\s+(.*))?$/

function model(name: string, lines: readonly string[]): SchemaModel {
  const fields = new Map<string, SchemaField>()
  let primaryKey: string[] | undefined
  let primaryKeyName: string | undefined
  let dbName = name
  for (const line of lines) {
    if (line.startsWith('@@')) {
      if (/^@@map\s*\(/.test(line)) dbName = mappedName(argumentOf(line, '@@map')) ?? name
      if (/^@@id\s*\(/.test(line)) {
        const argument = argumentOf(line, '@@id')
        primaryKey = names(argument)
        primaryKeyName = /\bname\s*:\s*"([A-Za-z_][A-Za-z0-9_]*)"/.exec(argument)?.[1] ?? primaryKey.join('_')
      }
      continue
    }
    const m = FIELD.exec(line)
    if (m === null) throw new Error(`unreadable field: ${line}`)
    const attributes = m[5] ?? ''
    const relation = /(?:^|\s)@relation\s*\(/.test(attributes) ? argumentOf(attributes, '@relation') : undefined
    fields.set(m[1] as string, {
      name: m[1] as string,
      type: m[2] as string,
      list: m[3] !== undefined,
      id: /(?:^|\s)@id(?=$|\s|\()/.test(attributes),
      relationName: relation === undefined ? undefined : (/^\s*"((?:[^"\\]|\\.)*)"/.exec(relation)?.[1] ?? /\bname\s*:\s*"((?:[^"\\]|\\.)*)"/.exec(relation)?.[1]),
      holdsForeignKey: relation !== undefined && /\bfields\s*:\s*\[/.test(relation),
      onDelete: relation === undefined ? undefined : /\bonDelete\s*:\s*([A-Za-z]+)/.exec(relation)?.[1],
      optional: m[4] !== undefined,
      column: (/(?:^|\s)@map\s*\(/.test(attributes) ? mappedName(argumentOf(attributes, '@map')) : undefined) ?? (m[1] as string),
      nativeType: /(?:^|\s)(@db\.[A-Za-z0-9_]+)(?=$|\s|\()/.test(attributes) ? nativeTypeOf(attributes) : undefined,
    })
  }
  if (primaryKey === undefined) {
    const ids = [...fields.values()].filter((f) => f.id).map((f) => f.name)
    if (ids.length > 1) throw new Error('several @id fields')
    if (ids.length === 1) primaryKey = ids
  }
  return { fields, primaryKey, primaryKeyName, dbName }
}

/** The name of `@map("x")` / `@@map("x")` / `@@map(name: "x")`. */
function mappedName(argument: string): string | undefined {
  const m = /^\s*(?:name\s*:\s*)?"((?:[^"\\]|\\.)*)"/.exec(argument)
  return m === null ? undefined : JSON.parse(`"${m[1] as string}"`)
}

/** `@db.VarChar(64)` as written: the attribute and its arguments, if any. */
function nativeTypeOf(attributes: string): string {
  const m = /(?:^|\s)(@db\.[A-Za-z0-9_]+)/.exec(attributes) as RegExpExecArray
  const name = m[1] as string
  const after = attributes.slice((m.index ?? 0) + m[0].length)
  return /^\s*\(/.test(after) ? `${name}(${argumentOf(after, '')})` : name
}

/** The text between the parentheses that follow `attribute` in `text`. */
function argumentOf(text: string, attribute: string): string {
  const start = text.indexOf(`${attribute}`)
  const open = text.indexOf('(', start)
  let d = 0
  let inString = false
  for (let i = open; i < text.length; i++) {
    const c = text[i]
    if (inString) {
      if (c === '\\') i++
      else if (c === '"') inString = false
    } else if (c === '"') inString = true
    else if (c === '(' || c === '[') d++
    else if (c === ')' || c === ']') {
      d--
      if (d === 0) return text.slice(open + 1, i)
    }
  }
  throw new Error(`unbalanced ${attribute}`)
}

/** The field names of `@@id([a, b])` or `@@id(fields: [a, b], ...)`; sort orders and lengths (`a(sort: Desc)`) dropped. */
function names(argument: string): string[] {
  const list = /\[([^\]]*)\]/.exec(argument)?.[1]
  if (list === undefined) throw new Error('no field list')
  const result = list.split(',').map((part) => /^\s*([A-Za-z_][A-Za-z0-9_]*)/.exec(part)?.[1])
  if (result.length === 0 || result.some((n) => n === undefined)) throw new Error('bad field list')
  return result as string[]
}
