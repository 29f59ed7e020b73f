/**
 * The Prisma model of a guard's tombstone table, for `schema.prisma`. Prisma Migrate compares the
 * schema with the database its migrations build: a table that no model lists is one that the next
 * `prisma migrate dev` drops. The guard's migration creates `<name>_tombstones` as `CREATE TABLE ...
 * AS SELECT <key>, <fence>` with a primary key on the key, so the model has the key's fields as
 * they are in the fenced model (type, native type, `@map`), required, and the fence as `BigInt`.
 */
import { InvalidFencingOptionError } from '../shared/errors.js'
import { fenceGuardObjects, type FenceGuardOptions } from './fence-guard.js'
import { readSchemaModels, type SchemaField } from '../shared/prisma-schema.js'

/**
 * The tombstone model for the guard `options` describe (`table`, `column` and `key` are the
 * database's names), read off the fenced table's model in `schemaText` (your schema.prisma).
 * Throws `InvalidFencingOptionError` when the schema has no model of that table, or the model no
 * field of a column named. `fencelock-guard --prisma-model` prints it.
 *
 * @example
 * ```ts
 * const schema = readFileSync('prisma/schema.prisma', 'utf8')
 * appendFileSync('prisma/schema.prisma', fenceGuardPrismaModel(schema, { table: 'Invoice', column: 'fenceToken', key: 'id' }))
 * ```
 */
export function fenceGuardPrismaModel(schemaText: string, options: FenceGuardOptions): string {
  const names = fenceGuardObjects(options)
  const models = readSchemaModels(schemaText)
  if (models === undefined) throw new InvalidFencingOptionError('schemaText', 'must be a Prisma schema this reader understands', schemaText)
  const found = [...models].find(([, m]) => m.dbName === options.table)
  if (found === undefined) {
    throw new InvalidFencingOptionError('table', `must be the table of a model of the schema (${[...models.values()].map((m) => m.dbName).join(', ')})`, options.table)
  }
  const [modelName, model] = found
  const byColumn = new Map([...model.fields.values()].map((f) => [f.column, f]))
  const field = (option: string, column: string): SchemaField => {
    const f = byColumn.get(column)
    if (f === undefined || f.relationName !== undefined) {
      throw new InvalidFencingOptionError(option, `must be a column of ${modelName} (${[...byColumn.keys()].join(', ')})`, column)
    }
    return f
  }
  const keys = (typeof options.key === 'string' ? [options.key] : [...options.key]).map((k) => field('key', k))
  const fence = field('column', options.column)
  if (fence.type !== 'BigInt' || fence.optional || fence.list) {
    throw new InvalidFencingOptionError('column', `must be a required BigInt column of ${modelName} (${fence.name} is ${fence.type}${fence.list ? '[]' : ''}${fence.optional ? '?' : ''})`, options.column)
  }
  const rows = [...keys.map((k) => ({ f: k, type: k.type })), { f: fence, type: 'BigInt' }].map(({ f, type }) => {
    const attributes = [keys.length === 1 && f === keys[0] ? '@id' : '', f.column === f.name ? '' : `@map(${JSON.stringify(f.column)})`, f.nativeType ?? '']
    return [f.name, type, attributes.filter((a) => a !== '').join(' ')] as const
  })
  const nameWidth = Math.max(...rows.map((r) => r[0].length))
  const typeWidth = Math.max(...rows.map((r) => r[1].length))
  const lines = rows.map(([name, type, attributes]) => `  ${name.padEnd(nameWidth)} ${attributes === '' ? type : `${type.padEnd(typeWidth)} ${attributes}`}`)
  const blockAttributes = [...(keys.length > 1 ? [`  @@id([${keys.map((k) => k.name).join(', ')}])`] : []), `  @@map(${JSON.stringify(names.tombstoneTable)})`]
  return `// The database guard's tombstone table (fenceGuardSql of @fencelock/fencing): the highest fence each
// key of ${modelName} held, written only by the guard's triggers. Listed so that Prisma Migrate keeps it.
model ${modelName}FenceTombstone {
${lines.join('\n')}

${blockAttributes.join('\n')}
}
`
}
