/**
 * The conditional writes. Each takes the caller's own model delegate (`db.product`, or
 * `tx.product` inside the caller's transaction) and rewrites one call into writes on that same
 * delegate, so everything runs in the caller's transaction when there is one, and nothing here
 * opens a transaction or sends raw SQL.
 *
 * The condition is `fence <= token` in the statement's own WHERE, and the write sets
 * `fence = token`: PostgreSQL evaluates both atomically on the row (under READ COMMITTED a
 * concurrent writer's update is waited for and the condition re-checked on the new row
 * version), so no interleaving lets an older token write after a newer one.
 */
import type { DataModel } from './data-model.js'
import { StaleFencingTokenError, UnsupportedFencedWriteError } from './errors.js'
import type { ResolvedFencingOptions } from './options.js'

/** What one `$fenced(token)` client carries to its writes. */
export interface FenceScope {
  readonly token: bigint
  readonly options: ResolvedFencingOptions
  /** `undefined` when the client carries no runtime data model we understand. */
  readonly dataModel: DataModel | undefined
  /** Delegate property (`product`) → model name (`Product`), for every model whose writes a fenced client looks at. */
  readonly delegates: ReadonlyMap<string, string>
}

/** The Prisma operations that write. Reads pass through every fenced client untouched. */
export const WRITE_OPERATIONS: ReadonlySet<string> = new Set([
  'create',
  'createMany',
  'createManyAndReturn',
  'update',
  'updateMany',
  'updateManyAndReturn',
  'upsert',
  'delete',
  'deleteMany',
])

type Args = Record<string, unknown>

/** Calls `delegate[operation](args)` with the delegate as `this`, as Prisma expects. */
export function invoke(delegate: object, operation: string, args: unknown): Promise<unknown> {
  const fn = (delegate as Record<string, unknown>)[operation]
  if (typeof fn !== 'function') throw new TypeError(`this Prisma client has no ${operation}()`)
  return Reflect.apply(fn, delegate, [args]) as Promise<unknown>
}

/**
 * Runs `operation` on a fenced model as a conditional write. `delegate` is the caller's model
 * delegate, `field` the model's fence column.
 */
export async function fencedWrite(delegate: object, model: string, field: string, operation: string, args: unknown, scope: FenceScope): Promise<unknown> {
  const a = (args ?? {}) as Args
  const { token } = scope
  switch (operation) {
    case 'create':
      checkData(model, operation, field, a.data, scope)
      return invoke(delegate, operation, { ...a, data: withToken(a.data, field, token) })

    case 'createMany':
    case 'createManyAndReturn': {
      const rows = Array.isArray(a.data) ? a.data : [a.data]
      for (const row of rows) checkData(model, operation, field, row, scope)
      const data = Array.isArray(a.data) ? a.data.map((row) => withToken(row, field, token)) : withToken(a.data, field, token)
      return invoke(delegate, operation, { ...a, data })
    }

    case 'update':
    case 'delete': {
      if (operation === 'update') checkData(model, operation, field, a.data, scope)
      const fenced: Args = { ...a, where: withCondition(a.where, field, { lte: token }) }
      if (operation === 'update') fenced.data = withToken(a.data, field, token)
      try {
        return await invoke(delegate, operation, fenced)
      } catch (error) {
        // "Not found" has two causes now: no such row (Prisma's own error, which we keep), or
        // a row whose fence is newer than our token. Only the stored token tells them apart.
        if (isRecordNotFound(error)) await rejectIfStale(delegate, model, field, operation, a.where, scope)
        throw error
      }
    }

    case 'updateMany':
    case 'updateManyAndReturn':
    case 'deleteMany': {
      if (operation !== 'deleteMany') checkData(model, operation, field, a.data, scope)
      const fenced: Args = { ...a, where: withCondition(a.where, field, { lte: token }) }
      if (operation !== 'deleteMany') fenced.data = withToken(a.data, field, token)
      const result = await invoke(delegate, operation, fenced)
      // The condition already kept newer rows out; a row the caller's filter matched but the
      // fence excluded means the caller's token is stale, and it must hear so, not get a
      // smaller count. Inside a transaction the error rolls back the rows that were written.
      await rejectIfSkipped(delegate, model, field, operation, a.where, scope)
      return result
    }

    case 'upsert':
      checkData(model, operation, field, a.create, scope)
      checkData(model, operation, field, a.update, scope)
      return fencedUpsert(delegate, model, field, a, scope)

    default:
      return invoke(delegate, operation, args)
  }
}

/**
 * Upsert as a conditional update, then a create when the row does not exist. Prisma's own
 * upsert cannot carry the condition: with an extra filter it reads first and writes later (a
 * window for a newer token), and when the filter excludes an existing row it tries to create
 * it. Here every step is one atomic statement: the update only matches a row with an older
 * fence, and the create fails with Prisma's unique-constraint error if the row appeared in the
 * meantime, as Prisma's own upsert does under a concurrent create.
 */
async function fencedUpsert(delegate: object, model: string, field: string, a: Args, scope: FenceScope): Promise<unknown> {
  const shape: Args = {}
  for (const key of ['select', 'include', 'omit'] as const) if (a[key] !== undefined) shape[key] = a[key]
  const update = { ...shape, where: withCondition(a.where, field, { lte: scope.token }), data: withToken(a.update, field, scope.token) }
  let notFound: unknown
  // Two rounds at most: a row created between our update and our read makes the update worth
  // one more try; it cannot happen twice, rows with our unique key do not reappear.
  for (let round = 0; round < 2; round++) {
    try {
      return await invoke(delegate, 'update', update)
    } catch (error) {
      if (!isRecordNotFound(error)) throw error
      notFound = error
    }
    const stored = await readFence(delegate, field, a.where)
    if (stored === null) return invoke(delegate, 'create', { ...shape, data: withToken(a.create, field, scope.token) })
    if (stored !== undefined && stored > scope.token) throw reject(model, 'upsert', scope, stored)
  }
  throw notFound
}

/** After a refused single-row write: throws StaleFencingTokenError when the row holds a newer token, else returns. */
async function rejectIfStale(delegate: object, model: string, field: string, operation: string, where: unknown, scope: FenceScope): Promise<void> {
  const stored = await readFence(delegate, field, where)
  if (stored !== null && stored !== undefined && stored > scope.token) throw reject(model, operation, scope, stored)
}

/** After a many-row write: throws StaleFencingTokenError when the caller's filter matches a row with a newer token. */
async function rejectIfSkipped(delegate: object, model: string, field: string, operation: string, where: unknown, scope: FenceScope): Promise<void> {
  const row = (await invoke(delegate, 'findFirst', {
    where: withCondition(where, field, { gt: scope.token }),
    select: { [field]: true },
    orderBy: { [field]: 'desc' },
  })) as Args | null
  if (row !== null) throw reject(model, operation, scope, asToken(row[field]))
}

/** The stored fence of the row `where` selects: `null` when there is no such row, `undefined` when unreadable. */
async function readFence(delegate: object, field: string, where: unknown): Promise<bigint | null | undefined> {
  const row = (await invoke(delegate, 'findUnique', { where, select: { [field]: true } })) as Args | null
  return row === null ? null : asToken(row[field])
}

function asToken(value: unknown): bigint | undefined {
  return typeof value === 'bigint' ? value : undefined
}

/** Builds the error and tells `onRejection`, whose exceptions must not replace the error. */
function reject(model: string, operation: string, scope: FenceScope, storedToken: bigint | undefined): StaleFencingTokenError {
  const onRejection = scope.options.onRejection
  if (onRejection !== undefined) {
    try {
      onRejection({ model, operation, token: scope.token, storedToken })
    } catch {
      // Observing a rejection must never change its outcome.
    }
  }
  return new StaleFencingTokenError(model, operation, scope.token, storedToken)
}

/**
 * Adds `{ [field]: condition }` to a filter, keeping every condition of the caller and the unique
 * fields at the top level, where `update` needs them. Next to the caller's fields when the caller
 * does not filter on the fence column itself (the smaller query: Prisma spends measurably less
 * CPU on it than on an `AND` list), else appended to `AND`.
 */
function withCondition(where: unknown, field: string, condition: Args): Args {
  const w = isPlainObject(where) ? where : {}
  if (!Object.hasOwn(w, field)) return { ...w, [field]: condition }
  const and = w.AND === undefined ? [] : Array.isArray(w.AND) ? w.AND : [w.AND]
  return { ...w, AND: [...and, { [field]: condition }] }
}

function withToken(data: unknown, field: string, token: bigint): Args {
  return { ...(isPlainObject(data) ? data : {}), [field]: token }
}

/** Prisma's "record to update/delete not found". */
export function isRecordNotFound(error: unknown): boolean {
  return typeof error === 'object' && error !== null && (error as { code?: unknown }).code === 'P2025'
}

// Relation write operations. Only for a client without a runtime data model: then a relation
// field is recognized by the shape of its value. `set` is also a scalar operator, so it counts
// only with an object or array value.
const NESTED_OPERATIONS = new Set(['create', 'createMany', 'connect', 'connectOrCreate', 'disconnect', 'update', 'updateMany', 'upsert', 'delete', 'deleteMany'])

/** Refuses `data` of a fenced write that sets the fence column or writes through a relation. */
function checkData(model: string, operation: string, field: string, data: unknown, scope: FenceScope): void {
  if (!isPlainObject(data)) return
  if (Object.hasOwn(data, field)) throw new UnsupportedFencedWriteError(model, operation, 'fence-column', field)
  const shape = scope.dataModel?.get(model)
  for (const [key, value] of Object.entries(data)) {
    const nested = shape !== undefined ? shape.relations.has(key) : looksLikeNestedWrite(value)
    if (nested) throw new UnsupportedFencedWriteError(model, operation, 'nested-write', key)
  }
}

function looksLikeNestedWrite(value: unknown): boolean {
  if (!isPlainObject(value)) return false
  return Object.entries(value).some(([k, v]) => NESTED_OPERATIONS.has(k) || (k === 'set' && typeof v === 'object' && v !== null))
}

/**
 * For a write to a model that is not fenced: refuses it when a nested write in it reaches a
 * fenced model, which would otherwise be written unconditionally. Needs the data model; without
 * one such writes pass through (documented).
 */
export function checkUnfencedWrite(model: string, operation: string, args: unknown, scope: FenceScope): void {
  if (scope.dataModel === undefined || !isPlainObject(args)) return
  for (const key of ['data', 'create', 'update'] as const) {
    const path = findFencedRelation(model, args[key], scope, 0)
    if (path !== undefined) throw new UnsupportedFencedWriteError(model, operation, 'nested-write', path)
  }
}

function findFencedRelation(model: string, value: unknown, scope: FenceScope, depth: number): string | undefined {
  // Prisma payloads are shallow; the cap only guards against cyclic objects.
  if (depth > 64) return undefined
  if (Array.isArray(value)) {
    for (const item of value) {
      const found = findFencedRelation(model, item, scope, depth + 1)
      if (found !== undefined) return found
    }
    return undefined
  }
  if (!isPlainObject(value)) return undefined
  const relations = scope.dataModel?.get(model)?.relations
  for (const [key, inner] of Object.entries(value)) {
    const target = relations?.get(key)
    if (target !== undefined && scope.options.models.has(target)) return key
    // Keys that are not relations (`create`, `data`, `where`, ...) keep the current model.
    const found = findFencedRelation(target ?? model, inner, scope, depth + 1)
    if (found !== undefined) return target === undefined ? found : `${key}.${found}`
  }
  return undefined
}

function isPlainObject(value: unknown): value is Args {
  if (value === null || typeof value !== 'object') return false
  const proto = Object.getPrototypeOf(value) as unknown
  return proto === Object.prototype || proto === null
}
