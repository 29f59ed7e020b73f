/**
 * What the extension needs to know about the schema: which fields are relations (and to which
 * model), the type of each scalar, and — from the schema text the client carries — each model's
 * primary key, whether a relation is a list, and which relations cascade a delete. Read from the
 * client's runtime data model and `inlineSchema`, which every generated Prisma 7 client carries;
 * neither is a public API, so everything here degrades to "unknown" (and the callers to stricter
 * checks) when it is missing or does not agree.
 */
import { readSchemaModels, type SchemaModel } from '../shared/prisma-schema.js'

/** A relation field of a model. */
export interface RelationShape {
  /** The model it points to. */
  readonly target: string
  /** Whether it is a list (to-many); undefined when the schema text could not be read. */
  readonly list: boolean | undefined
  /**
   * Whether deleting a row of this model deletes the related rows of `target` in the database
   * (their foreign key is `onDelete: Cascade`); undefined when unknown.
   */
  readonly cascadesOnDelete: boolean | undefined
}

/** The shape of one model. */
export interface ModelShape {
  /** Relation field → the model it points to. */
  readonly relations: ReadonlyMap<string, string>
  /** Relation field → what else is known of it. */
  readonly relationShapes: ReadonlyMap<string, RelationShape>
  /** Scalar or enum field → its Prisma type (`BigInt`, `String`, ...). */
  readonly scalars: ReadonlyMap<string, string>
  /** The primary key's fields (`@id`, `@@id`); undefined when unknown or when the model has none. */
  readonly primaryKey: readonly string[] | undefined
  /** The primary key's selector in a unique filter: the field for one, `a_b` (or its name) for a compound id. */
  readonly primaryKeyName: string | undefined
  /** The table's name in the database: `@@map`, else the model's name. */
  readonly dbName: string
  /** Scalar field → its column in the database: `@map`, else the field's name. */
  readonly columns: ReadonlyMap<string, string>
}

/** Model name → shape. */
export type DataModel = ReadonlyMap<string, ModelShape>

interface RuntimeField {
  name: string
  kind: string
  type: string
  relationName?: string
  dbName?: string | null
}

/** Reads the data model of a Prisma client, or `undefined` when this client has no runtime data model we understand. */
export function readDataModel(client: object): DataModel | undefined {
  let raw: unknown
  let schemaText: unknown
  try {
    raw = (client as { _runtimeDataModel?: unknown })._runtimeDataModel
    schemaText = (client as { _engineConfig?: { inlineSchema?: unknown } })._engineConfig?.inlineSchema
  } catch {
    return undefined
  }
  const models = (raw as { models?: unknown } | undefined)?.models
  if (models === null || typeof models !== 'object') return undefined
  const runtime = new Map<string, RuntimeField[]>()
  const tables = new Map<string, string>()
  for (const [name, model] of Object.entries(models as Record<string, unknown>)) {
    const fields = (model as { fields?: unknown } | null)?.fields
    if (!Array.isArray(fields)) return undefined
    for (const f of fields as RuntimeField[]) if (typeof f?.name !== 'string' || typeof f.type !== 'string') return undefined
    runtime.set(name, fields as RuntimeField[])
    const dbName = (model as { dbName?: unknown }).dbName
    tables.set(name, typeof dbName === 'string' && dbName !== '' ? dbName : name)
  }
  const schema = agreeing(readSchemaModels(schemaText), runtime)
  const result = new Map<string, ModelShape>()
  for (const [name, fields] of runtime) {
    const relations = new Map<string, string>()
    const relationShapes = new Map<string, RelationShape>()
    const scalars = new Map<string, string>()
    const columns = new Map<string, string>()
    for (const f of fields) {
      if (f.kind !== 'object') {
        scalars.set(f.name, f.type)
        columns.set(f.name, typeof f.dbName === 'string' && f.dbName !== '' ? f.dbName : f.name)
        continue
      }
      relations.set(f.name, f.type)
      const declared = schema?.get(name)?.fields.get(f.name)
      relationShapes.set(f.name, { target: f.type, list: declared?.list, cascadesOnDelete: schema === undefined ? undefined : cascades(runtime, schema, name, f) })
    }
    const declared = schema?.get(name)
    const primaryKey = declared?.primaryKey
    result.set(name, {
      relations,
      relationShapes,
      scalars,
      primaryKey,
      primaryKeyName: primaryKey?.length === 1 ? primaryKey[0] : declared?.primaryKeyName,
      dbName: tables.get(name) ?? name,
      columns,
    })
  }
  return result
}

/** The schema models when they declare every model and field the runtime data model has; else undefined. */
function agreeing(schema: ReadonlyMap<string, SchemaModel> | undefined, runtime: ReadonlyMap<string, RuntimeField[]>): ReadonlyMap<string, SchemaModel> | undefined {
  if (schema === undefined) return undefined
  for (const [name, fields] of runtime) {
    const model = schema.get(name)
    if (model === undefined) return undefined
    for (const f of fields) if (model.fields.get(f.name)?.type.replace(/\?$/, '') !== f.type && f.kind !== 'enum') return undefined
  }
  return schema
}

/**
 * Whether deleting a row of `model` deletes rows of `field.type` through `field`: the other side of
 * the relation (the field of the target with the same relation name) holds the foreign key and
 * says `onDelete: Cascade`.
 */
function cascades(runtime: ReadonlyMap<string, RuntimeField[]>, schema: ReadonlyMap<string, SchemaModel>, model: string, field: RuntimeField): boolean | undefined {
  const back = runtime.get(field.type)?.filter((g) => g.kind === 'object' && g.type === model && g.relationName === field.relationName && !(field.type === model && g.name === field.name))
  if (back === undefined || back.length !== 1) return undefined
  const declared = schema.get(field.type)?.fields.get((back[0] as RuntimeField).name)
  if (declared === undefined) return undefined
  return declared.holdsForeignKey && declared.onDelete === 'Cascade'
}

/** The client property of a model's delegate: Prisma lower-cases the first letter (`OrderItem` → `orderItem`). */
export function delegateKey(model: string): string {
  return model.charAt(0).toLowerCase() + model.slice(1)
}
