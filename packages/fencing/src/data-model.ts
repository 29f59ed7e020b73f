/**
 * What the extension needs to know about the schema: which fields are relations (and to which
 * model), and the type of each scalar. Read from the client's runtime data model, which every
 * generated Prisma 7 client carries; it is not a public API, so everything here degrades to
 * "unknown" (and the callers to stricter checks) when it is missing.
 */

/** The shape of one model. */
export interface ModelShape {
  /** Relation field → the model it points to. */
  readonly relations: ReadonlyMap<string, string>
  /** Scalar or enum field → its Prisma type (`BigInt`, `String`, ...). */
  readonly scalars: ReadonlyMap<string, string>
}

/** Model name → shape. */
export type DataModel = ReadonlyMap<string, ModelShape>

interface RuntimeField {
  name: string
  kind: string
  type: string
}

/** Reads the runtime data model of a Prisma client, or `undefined` when this client has none we understand. */
export function readDataModel(client: object): DataModel | undefined {
  let raw: unknown
  try {
    raw = (client as { _runtimeDataModel?: unknown })._runtimeDataModel
  } catch {
    return undefined
  }
  const models = (raw as { models?: unknown } | undefined)?.models
  if (models === null || typeof models !== 'object') return undefined
  const result = new Map<string, ModelShape>()
  for (const [name, model] of Object.entries(models as Record<string, unknown>)) {
    const fields = (model as { fields?: unknown } | null)?.fields
    if (!Array.isArray(fields)) return undefined
    const relations = new Map<string, string>()
    const scalars = new Map<string, string>()
    for (const f of fields as RuntimeField[]) {
      if (typeof f?.name !== 'string' || typeof f.type !== 'string') return undefined
      if (f.kind === 'object') relations.set(f.name, f.type)
      else scalars.set(f.name, f.type)
    }
    result.set(name, { relations, scalars })
  }
  return result
}

/** The client property of a model's delegate: Prisma lower-cases the first letter (`OrderItem` → `orderItem`). */
export function delegateKey(model: string): string {
  return model.charAt(0).toLowerCase() + model.slice(1)
}
