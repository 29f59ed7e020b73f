/**
 * What a write under `$fenced` would do to fenced rows besides its own statement: nested writes
 * (Prisma's relation operations in `data`) and database cascades (`onDelete: Cascade`). Prisma
 * writes those rows in statements the fencing condition cannot reach, so a call that would is
 * refused before any query.
 *
 * The walk follows Prisma's input grammar level by level — a model's fields, a relation field's
 * operations (`create`, `update`, ...), and that operation's payload, which holds fields of the
 * related model — so a field that is named like a payload key (a relation called `data`) is read as
 * what it is at its level, a filter (`where`, `connect`, a `deleteMany` filter) is never taken for a
 * write, and a Json value is never walked. It fails closed: an operation it does not know, a
 * relation whose shape it cannot tell, an argument deeper than {@link MAX_DEPTH} levels or cyclic is
 * reported, never let through.
 */
import type { DataModel, RelationShape } from './data-model.js'
import { sentEntries } from './prisma-arguments.js'

/** Levels of nesting the walk follows (a relation, its operation and its payload are three). */
export const MAX_DEPTH = 1_000

/** What the walk found. */
export interface NestedWrite {
  /** The path to it from the call's `data`, e.g. `docs.update.data.account` (relations and operations). */
  readonly path: string
  /**
   * `fenced`: a relation operation on a fenced model; `unfenced-from-fenced`: any nested write from a
   * fenced model; `cascade`: a delete that the database cascades to a fenced model; `unknown`: what
   * the walk cannot read (too deep, cyclic, an operation it does not know, no data model).
   */
  readonly kind: 'fenced' | 'unfenced-from-fenced' | 'cascade' | 'unknown'
  /** The model written, when known. */
  readonly target: string | undefined
}

interface Walk {
  readonly dataModel: DataModel | undefined
  readonly fenced: ReadonlySet<string> | ReadonlyMap<string, string>
  /** Objects on the current path: a cyclic argument would never end. */
  readonly open: Set<object>
}

// Relation write operations. Without a data model a relation is recognized by the shape of its
// value. `set` is also a scalar operator, so it counts only with an object or array value.
const NESTED_OPERATIONS = new Set(['create', 'createMany', 'connect', 'connectOrCreate', 'disconnect', 'update', 'updateMany', 'upsert', 'delete', 'deleteMany', 'set'])

/** Whether a value, read without a data model, looks like relation operations. */
export function looksLikeNestedWrite(value: unknown): boolean {
  return sentEntries(value).some(([k, v]) => (NESTED_OPERATIONS.has(k) && k !== 'set') || (k === 'set' && typeof v === 'object' && v !== null))
}

/**
 * The first nested write in `data` (fields of `model`) that reaches a fenced model, or that the
 * walk cannot read. A relation field at the top of a fenced model's `data` is reported whatever it
 * writes (`unfenced-from-fenced` when its target is not fenced).
 */
export function findNestedWrite(model: string, data: unknown, dataModel: DataModel | undefined, fenced: ReadonlyMap<string, string>): NestedWrite | undefined {
  const walk: Walk = { dataModel, fenced, open: new Set() }
  const found = fields(walk, model, data, '', 0)
  if (found !== undefined && found.kind === 'fenced' && found.target !== undefined && !fenced.has(found.target)) return { ...found, kind: 'unfenced-from-fenced' }
  return found
}

/**
 * Where deleting a row of `model` makes the database delete rows of a fenced model
 * (`onDelete: Cascade`, followed through unfenced models too): the relation path, e.g.
 * `invoices` or `ledgers.accounts`; `unknown` when a relation's cascade is not known.
 */
export function findCascade(model: string, dataModel: DataModel | undefined, fenced: ReadonlyMap<string, string>): NestedWrite | undefined {
  if (dataModel === undefined) return { path: '', kind: 'unknown', target: undefined }
  const seen = new Set<string>([model])
  let frontier: [string, string][] = [[model, '']]
  while (frontier.length > 0) {
    const next: [string, string][] = []
    for (const [from, path] of frontier) {
      const shape = dataModel.get(from)
      if (shape === undefined) return { path, kind: 'unknown', target: from }
      for (const [field, relation] of shape.relationShapes) {
        const here = path === '' ? field : `${path}.${field}`
        if (relation.cascadesOnDelete === false) continue
        if (relation.cascadesOnDelete === undefined) {
          // Unknown: it matters only if fenced rows could be reached that way.
          if (fenced.has(relation.target) || !seen.has(relation.target)) return { path: here, kind: 'unknown', target: relation.target }
          continue
        }
        if (fenced.has(relation.target)) return { path: here, kind: 'cascade', target: relation.target }
        if (!seen.has(relation.target)) {
          seen.add(relation.target)
          next.push([relation.target, here])
        }
      }
    }
    frontier = next
  }
  return undefined
}

/** `value` as fields of `model` (a create or update payload; an array of them for createMany). */
function fields(walk: Walk, model: string, value: unknown, path: string, depth: number): NestedWrite | undefined {
  if (depth > MAX_DEPTH) return { path, kind: 'unknown', target: model }
  if (Array.isArray(value)) {
    for (const [i, item] of value.entries()) {
      const found = fields(walk, model, item, `${path}[${i}]`, depth + 1)
      if (found !== undefined) return found
    }
    return undefined
  }
  if (value === null || typeof value !== 'object') return undefined
  if (walk.open.has(value)) return { path, kind: 'unknown', target: model }
  walk.open.add(value)
  try {
    const shape = walk.dataModel?.get(model)
    for (const [key, inner] of sentEntries(value)) {
      const at = path === '' ? key : `${path}.${key}`
      if (shape === undefined) {
        if (looksLikeNestedWrite(inner)) return { path: at, kind: 'unknown', target: undefined }
        continue
      }
      const relation = shape.relationShapes.get(key)
      // A scalar (a Json value too): nothing of it is a write of another row.
      if (relation === undefined) continue
      if (walk.fenced.has(relation.target) || depth === 0 && walk.fenced.has(model)) return { path: at, kind: 'fenced', target: relation.target }
      const found = operations(walk, relation, inner, at, depth + 1)
      if (found !== undefined) return found
    }
    return undefined
  } finally {
    walk.open.delete(value)
  }
}

/** `value` as the operations of a relation field (`{ create: ..., update: ... }`) on its unfenced target. */
function operations(walk: Walk, relation: RelationShape, value: unknown, path: string, depth: number): NestedWrite | undefined {
  if (depth > MAX_DEPTH) return { path, kind: 'unknown', target: relation.target }
  const target = relation.target
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return { path, kind: 'unknown', target }
  for (const [operation, argument] of sentEntries(value)) {
    const at = `${path}.${operation}`
    const items = Array.isArray(argument) ? argument : [argument]
    let found: NestedWrite | undefined
    for (const item of items) {
      switch (operation) {
        case 'create':
          found = fields(walk, target, item, at, depth + 1)
          break
        case 'createMany':
          found = fields(walk, target, payload(item, 'data'), `${at}.data`, depth + 1)
          break
        case 'connectOrCreate':
          found = fields(walk, target, payload(item, 'create'), `${at}.create`, depth + 1)
          break
        case 'updateMany':
          found = fields(walk, target, payload(item, 'data'), `${at}.data`, depth + 1)
          break
        case 'update':
          // A list's update is `{ where, data }`; a single relation's is that, or the fields
          // themselves. Where the shape is not known, both readings are walked.
          found =
            relation.list !== false
              ? fields(walk, target, payload(item, 'data'), `${at}.data`, depth + 1)
              : (fields(walk, target, item, at, depth + 1) ?? (hasKey(item, 'data') ? fields(walk, target, payload(item, 'data'), `${at}.data`, depth + 1) : undefined))
          if (found === undefined && relation.list === undefined) found = fields(walk, target, item, at, depth + 1)
          break
        case 'upsert':
          found = fields(walk, target, payload(item, 'create'), `${at}.create`, depth + 1) ?? fields(walk, target, payload(item, 'update'), `${at}.update`, depth + 1)
          if (found === undefined && relation.list !== true && hasKey(payload(item, 'update'), 'data')) {
            found = fields(walk, target, payload(payload(item, 'update'), 'data'), `${at}.update.data`, depth + 1)
          }
          break
        case 'delete':
        case 'deleteMany': {
          // The rows deleted are the target's (unfenced): what the database deletes with them counts.
          const cascade = findCascade(target, walk.dataModel, walk.fenced as ReadonlyMap<string, string>)
          if (cascade !== undefined) found = { ...cascade, path: cascade.path === '' ? at : `${at}→${cascade.path}` }
          break
        }
        case 'connect':
        case 'disconnect':
        case 'set':
          // Filters naming rows of the (unfenced) target; their foreign keys are not fenced.
          break
        default:
          found = { path: at, kind: 'unknown', target }
      }
      if (found !== undefined) return found
    }
  }
  return undefined
}

function payload(value: unknown, key: string): unknown {
  for (const [k, v] of sentEntries(value)) if (k === key) return v
  return undefined
}

function hasKey(value: unknown, key: string): boolean {
  return sentEntries(value).some(([k]) => k === key)
}
