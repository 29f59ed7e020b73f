/**
 * The conditional writes. Each rewrites one call on a fenced model into writes on the caller's
 * own client (the Prisma client, or the transaction client inside the caller's transaction), so
 * everything runs in the caller's transaction when there is one. Nothing here sends raw SQL.
 *
 * The condition is `fence <= token` in the statement's own WHERE, and the write sets
 * `fence = token`: PostgreSQL evaluates both atomically on the row (under READ COMMITTED a
 * concurrent writer's update is waited for and the condition re-checked on the new row
 * version), so no interleaving lets an older token write after a newer one.
 *
 * A write that needs more than that one statement (a check after a many-row write, the retry of
 * an upsert, the fence raised before a delete) runs in a transaction of its own — a savepoint when
 * the caller is already in one — so a refusal leaves nothing of it behind.
 *
 * A delete raises the fence to the token before it deletes. A DELETE carries no token to the
 * database (its `fence <= token` is a filter, which no trigger sees): the guard's tombstone can
 * only keep the fence the row holds when it goes, so an unraised row would leave its older fence
 * behind, and a token between the two could recreate what the newer one deleted.
 */
import type { DataModel } from './data-model.js'
import { delegateKey } from './data-model.js'
import { StaleFencingTokenError, UnsupportedFencedWriteError } from './errors.js'
import { fenceGuardRefusal } from './guard-error.js'
import type { BatchTransaction, WritePlan } from './lazy-write.js'
import type { ResolvedFencingOptions } from './options.js'
import { findCascade, findNestedWrite, type NestedWrite } from './nested-writes.js'
import { isSent, readCallArguments, readFields, sentEntries, type Fields } from './prisma-arguments.js'

/** What one `$fenced(token)` client carries to its writes. */
export interface FenceScope {
  readonly token: bigint
  readonly options: ResolvedFencingOptions
  /** `undefined` when the client carries no runtime data model we understand: then every check fails closed. */
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

/** One fenced call: where it goes and what it fences with. */
interface Call {
  /** The caller's client or transaction client (not the fenced view). */
  readonly client: object
  readonly model: string
  /** The model's fence column. */
  readonly field: string
  readonly operation: string
  readonly scope: FenceScope
}

/** Calls `delegate[operation](args)` with the delegate as `this`, as Prisma expects. */
export function invoke(delegate: object, operation: string, args: unknown): Promise<unknown> {
  const fn = (delegate as Record<string, unknown>)[operation]
  if (typeof fn !== 'function') throw new TypeError(`this Prisma client has no ${operation}()`)
  return Reflect.apply(fn, delegate, [args]) as Promise<unknown>
}

function delegateOf(client: object, model: string): object {
  const delegate = (client as Record<string, unknown>)[delegateKey(model)]
  if (delegate === null || typeof delegate !== 'object') throw new TypeError(`this Prisma client has no model ${model}`)
  return delegate
}

/**
 * A transaction client has no `$connect` (Prisma removes it, with `$disconnect`, `$on` and
 * `$extends`): the one public sign that the caller is inside a transaction.
 */
function inTransaction(client: object): boolean {
  return typeof (client as { $connect?: unknown }).$connect !== 'function'
}

// Prisma runs one nested transaction (savepoint) at a time per transaction, and refuses a second
// one started while the first is open ("Concurrent nested transactions are not supported"): the
// savepoints this module opens inside one caller's transaction wait for each other here, so
// `Promise.all([tx.$fenced(t).a.updateMany(...), tx.$fenced(t).b.updateMany(...)])` works.
const savepointQueues = new WeakMap<object, Promise<unknown>>()

/** Runs `fn` in a transaction of its own, or a savepoint when `client` is already in one. */
function atomically<R>(client: object, fn: (tx: object) => Promise<R>): Promise<R> {
  const transaction = (client as { $transaction?: unknown }).$transaction
  if (typeof transaction !== 'function') throw new TypeError('this Prisma client has no $transaction()')
  const start = () => Reflect.apply(transaction, client, [fn]) as Promise<R>
  if (!inTransaction(client)) return start()
  const previous = savepointQueues.get(client) ?? Promise.resolve()
  const run = previous.then(start, start)
  savepointQueues.set(
    client,
    run.then(
      () => undefined,
      () => undefined,
    ),
  )
  return run
}

/** A plan that refuses: the error when awaited, and it never joins a batch (so the batch never starts). */
export function refusedPlan(error: unknown): WritePlan<never> {
  return {
    run: () => Promise.reject(error),
    joinBatch: () => Promise.reject(error),
  }
}

/**
 * Plans `operation` on a fenced model as a conditional write. The arguments are read and checked
 * now, before any query; a refused call rejects when awaited.
 */
export function fencedWritePlan(client: object, model: string, field: string, operation: string, args: unknown, scope: FenceScope): WritePlan<unknown> {
  const call: Call = { client, model, field, operation, scope }
  try {
    return planCall(call, args)
  } catch (error) {
    return refusedPlan(error)
  }
}

function planCall(call: Call, args: unknown): WritePlan<unknown> {
  const { field, operation, scope } = call
  const a = readCallArguments(args)
  if (a === undefined) throw new UnsupportedFencedWriteError(call.model, operation, 'argument', 'args', 'is not an object')
  const token = scope.token
  switch (operation) {
    case 'create': {
      const data = requireFields(call, 'data', a.data)
      checkData(call, data)
      return oneStatement(call, { ...a, data: withToken(data, field, token) }, undefined)
    }

    case 'createMany':
    case 'createManyAndReturn': {
      const rows = Array.isArray(a.data) ? a.data.map((row, i) => requireFields(call, `data[${i}]`, row)) : [requireFields(call, 'data', a.data)]
      for (const row of rows) checkData(call, row)
      const data = rows.map((row) => withToken(row, field, token))
      return oneStatement(call, { ...a, data: Array.isArray(a.data) ? data : data[0] }, undefined)
    }

    case 'update': {
      const where = requireFields(call, 'where', a.where)
      const data = requireFields(call, 'data', a.data)
      checkData(call, data)
      return oneStatement(call, { ...a, where: withCondition(where, field, { lte: token }), data: withToken(data, field, token) }, where)
    }

    case 'delete': {
      const where = requireFields(call, 'where', a.where)
      checkCascade(call)
      return severalStatements(call, () => deleteRaised(call, a, where))
    }

    case 'updateMany':
    case 'updateManyAndReturn': {
      if (isSent(a.limit)) throw new UnsupportedFencedWriteError(call.model, operation, 'limit', 'limit')
      const where = a.where === undefined ? {} : requireFields(call, 'where', a.where)
      const data = requireFields(call, 'data', a.data)
      checkData(call, data)
      const args: Fields = { ...a, where: withCondition(where, field, { lte: token }), data: withToken(data, field, token) }
      return severalStatements(call, () => writeMany(call, where, (delegate) => invoke(delegate, operation, args)))
    }

    case 'deleteMany': {
      if (isSent(a.limit)) throw new UnsupportedFencedWriteError(call.model, operation, 'limit', 'limit')
      const where = a.where === undefined ? {} : requireFields(call, 'where', a.where)
      checkCascade(call)
      const key = primaryKeyOf(call)
      // Without the primary key the rows are deleted by the filter again, after their fence was
      // raised: a filter on the fence would then be read on the raised fence.
      if (key === undefined && filtersOn(where, field, 0)) throw new UnsupportedFencedWriteError(call.model, operation, 'fence-filter', field)
      return severalStatements(call, () =>
        writeMany(call, where, (delegate) => (key === undefined ? deleteManyByFilter(call, delegate, a, where) : deleteManyByKey(call, delegate, where, key))),
      )
    }

    case 'upsert': {
      const where = requireFields(call, 'where', a.where)
      const create = requireFields(call, 'create', a.create)
      const update = requireFields(call, 'update', a.update)
      checkData(call, create)
      checkData(call, update)
      return severalStatements(call, () => upsert(call, a, where, create, update))
    }

    default:
      return oneStatement(call, a, undefined)
  }
}

/**
 * A write of one statement: alone, or as one element of a batch. After a refusal it tells a
 * stale token from a missing row by reading the stored fence (outside the batch, which by then
 * has rolled back).
 */
function oneStatement(call: Call, args: Fields, where: Fields | undefined): WritePlan<unknown> {
  const settle = (error: unknown) => explainFailure(call, error, where)
  return {
    run: () => invoke(delegateOf(call.client, call.model), call.operation, args).then(undefined, settle),
    joinBatch(transaction: BatchTransaction) {
      const request = invoke(delegateOf(call.client, call.model), call.operation, args) as Promise<unknown> & {
        requestTransaction?: (transaction: BatchTransaction) => PromiseLike<unknown>
      }
      if (typeof request.requestTransaction !== 'function') throw new TypeError('this Prisma client does not batch its calls')
      return Promise.resolve(request.requestTransaction(transaction)).then(undefined, settle)
    },
  }
}

/** A write of several statements: runs when awaited, never as one element of a batch. */
function severalStatements(call: Call, run: () => Promise<unknown>): WritePlan<unknown> {
  return {
    run,
    joinBatch: () => Promise.reject(new UnsupportedFencedWriteError(call.model, call.operation, 'batch-transaction', call.operation)),
  }
}

/**
 * The error a failed statement ends with: the guard's refusal becomes `StaleFencingTokenError`;
 * "record not found" (P2025) of a unique `where` becomes one when the row holds a newer token,
 * and stays Prisma's own error when the row is missing; anything else is rethrown as it is.
 */
async function explainFailure(call: Call, error: unknown, where: Fields | undefined): Promise<never> {
  const refusal = fenceGuardRefusal(error)
  if (refusal !== undefined) throw reject(call, refusal.storedToken)
  if (where !== undefined && isRecordNotFound(error)) {
    const stored = await readFence(delegateOf(call.client, call.model), call.field, where)
    if (stored !== null && stored !== undefined && stored > call.scope.token) throw reject(call, stored)
  }
  throw error
}

/** The guard's refusal as `StaleFencingTokenError`; any other error unchanged. */
function guardToStale(call: Call, error: unknown): unknown {
  const refusal = fenceGuardRefusal(error)
  return refusal === undefined ? error : reject(call, refusal.storedToken)
}

/**
 * `updateMany`, `updateManyAndReturn`, `deleteMany`: the conditional write (for `deleteMany`, the
 * raise of the fence, then the delete), then a check that the caller's filter matched no row with
 * a newer token, in one transaction (or savepoint): a row the fence kept out means the token is
 * stale, and then nothing of the call is kept.
 */
function writeMany(call: Call, where: Fields, write: (delegate: object) => Promise<unknown>): Promise<unknown> {
  const { field, scope } = call
  return atomically(call.client, async (tx) => {
    const delegate = delegateOf(tx, call.model)
    let result: unknown
    try {
      result = await write(delegate)
    } catch (error) {
      throw guardToStale(call, error)
    }
    // Read in the same transaction, after the write: under READ COMMITTED it also sees a newer
    // token committed since. Either way a newer token wrote rows the caller meant, so its token
    // is stale, and rolling back is what the error promises.
    const newer = (await invoke(delegate, 'findFirst', {
      where: withCondition(where, field, { gt: scope.token }),
      select: { [field]: true },
      orderBy: { [field]: 'desc' },
    })) as Fields | null
    if (newer !== null) throw reject(call, asToken(newer[field]))
    return result
  })
}

/**
 * `delete`: raise the fence with the caller's filter and selection (the row lock is ours from
 * here to the end of the transaction), then delete that row, in one transaction (or savepoint).
 * The DELETE then removes a row whose fence is the token, which is what the guard's tombstone
 * keeps. It also serves a selection with relations, for which Prisma would read the row first and
 * delete without checking the count (a fenced DELETE that removed nothing would still return the
 * row). The record returned is the row as it was deleted, its fence raised to the token.
 */
function deleteRaised(call: Call, a: Fields, where: Fields): Promise<unknown> {
  const { field, scope } = call
  const selection = selectionOf(a)
  const key = primaryKeyOf(call)
  return atomically(call.client, async (tx) => {
    const delegate = delegateOf(tx, call.model)
    const raise = { where: withCondition(where, field, { lte: scope.token }), data: { [field]: scope.token } }
    let raised: unknown
    try {
      raised = await invoke(delegate, 'update', key === undefined ? { ...selection, ...raise } : { ...raise, select: selectKey(key) })
    } catch (error) {
      if (isRecordNotFound(error)) {
        const stored = await readFence(delegate, field, where)
        if (stored !== null && stored !== undefined && stored > scope.token) throw reject(call, stored)
      }
      throw guardToStale(call, error)
    }
    try {
      // By the primary key the raise returned: the caller's filter, read again, could miss the row
      // the raise changed (an @updatedAt column, a trigger, a relation filter).
      if (key !== undefined) return await invoke(delegate, 'delete', { ...selection, where: { ...uniqueKey(key, raised as Fields), [field]: scope.token } })
      await invoke(delegate, 'delete', { where: withCondition(sameRow(call, where), field, { lte: scope.token }), select: { [field]: true } })
    } catch (error) {
      throw guardToStale(call, error)
    }
    return raised
  })
}

/**
 * `deleteMany` with the primary key known: raise the fence of the rows the caller's filter matches
 * (`updateManyAndReturn`, which returns their keys and leaves them locked by this transaction), then
 * delete exactly those rows by key. Every raised row is deleted: a refused or empty call keeps
 * nothing of the raise.
 */
async function deleteManyByKey(call: Call, delegate: object, where: Fields, key: PrimaryKey): Promise<{ count: number }> {
  const { field, scope } = call
  const raised = (await invoke(delegate, 'updateManyAndReturn', {
    where: withCondition(where, field, { lte: scope.token }),
    data: { [field]: scope.token },
    select: selectKey(key),
  })) as Fields[]
  let count = 0
  // A bounded number of keys per statement (PostgreSQL takes at most 65 535 parameters).
  for (let i = 0; i < raised.length; i += KEYS_PER_DELETE) {
    const rows = raised.slice(i, i + KEYS_PER_DELETE)
    const [only] = key.fields
    const byKey: Fields = key.fields.length === 1 && only !== undefined ? { [only]: { in: rows.map((row) => row[only]) } } : { OR: rows.map((row) => pick(row, key.fields)) }
    count += ((await invoke(delegate, 'deleteMany', { where: { ...byKey, [field]: scope.token } })) as { count: number }).count
  }
  return { count }
}

const KEYS_PER_DELETE = 5_000

/**
 * `deleteMany` without a known primary key: raise, then delete the rows the filter matches whose
 * fence is the token. A raised row the filter no longer matches (the raise changed a filtered
 * column) would stay raised: then nothing of the call is kept.
 */
async function deleteManyByFilter(call: Call, delegate: object, a: Fields, where: Fields): Promise<{ count: number }> {
  const { field, scope } = call
  const raised = (await invoke(delegate, 'updateMany', { where: withCondition(where, field, { lte: scope.token }), data: withToken({}, field, scope.token) })) as { count: number }
  // Only rows whose fence is the token now: ours (locked since the raise), or written since by
  // the same token. A row committed since with an older fence is left alone, as if this call had
  // run before it; deleting it would tombstone its older fence.
  const deleted = (await invoke(delegate, 'deleteMany', { ...a, where: withCondition(where, field, { equals: scope.token }) })) as { count: number }
  if (deleted.count < raised.count) {
    throw new UnsupportedFencedWriteError(call.model, call.operation, 'argument', 'where', 'matched fewer rows after their fence was raised (the raise changed a filtered column), and without the primary key in the schema the rows cannot be deleted by key; nothing was kept')
  }
  return deleted
}

interface PrimaryKey {
  readonly fields: readonly string[]
  /** The selector of a unique filter: the field, or the compound id's name. */
  readonly name: string
}

function primaryKeyOf(call: Call): PrimaryKey | undefined {
  const shape = call.scope.dataModel?.get(call.model)
  const fields = shape?.primaryKey
  if (fields === undefined || shape?.primaryKeyName === undefined || fields.includes(call.field)) return undefined
  return { fields, name: shape.primaryKeyName }
}

function selectKey(key: PrimaryKey): Fields {
  return Object.fromEntries(key.fields.map((f) => [f, true]))
}

function pick(row: Fields, fields: readonly string[]): Fields {
  return Object.fromEntries(fields.map((f) => [f, row[f]]))
}

/** A unique filter of the row `row` (holding at least the key's fields). */
function uniqueKey(key: PrimaryKey, row: Fields): Fields {
  const [only] = key.fields
  return key.fields.length === 1 && only !== undefined ? { [only]: row[only] } : { [key.name]: pick(row, key.fields) }
}

/**
 * Upsert as a conditional update, then a create when the row does not exist. Prisma's own
 * upsert cannot carry the condition: with an extra filter it reads first and writes later (a
 * window for a newer token), and when the filter excludes an existing row it tries to create
 * it. Here each step is one atomic statement. A create that loses a race with a concurrent
 * create of the same key (unique violation) goes back to the update, which then either writes
 * (our token is current) or is refused (the other one was newer).
 */
async function upsert(call: Call, a: Fields, where: Fields, create: Fields, update: Fields): Promise<unknown> {
  const { field, scope } = call
  const selection = selectionOf(a)
  const delegate = delegateOf(call.client, call.model)
  const updateArgs = { ...selection, where: withCondition(where, field, { lte: scope.token }), data: withToken(update, field, scope.token) }
  const createArgs = { ...selection, data: withToken(create, field, scope.token) }
  let last: unknown
  // Two rounds: a row created between our update and our create is updated (or refused) in the
  // second; rows with our unique key do not keep reappearing.
  for (let round = 0; round < 2; round++) {
    try {
      return await invoke(delegate, 'update', updateArgs)
    } catch (error) {
      if (!isRecordNotFound(error)) throw guardToStale(call, error)
      last = error
    }
    const stored = await readFence(delegate, field, where)
    if (stored !== null) {
      if (stored !== undefined && stored > scope.token) throw reject(call, stored)
      continue
    }
    try {
      return await createOnce(call, createArgs)
    } catch (error) {
      if (!isUniqueViolation(error)) throw guardToStale(call, error)
      last = error
    }
  }
  throw last
}

/**
 * Records the scope's token as the fence of the row `where` selects by its unique key, creating
 * the row from `create` when it is missing: what a fenced service does per lock resource
 * (`withFencedResource`). As a fenced upsert, in fewer statements on the two common paths: a
 * conditional `UPDATE` (the row exists, the token is current: one statement), then an
 * `INSERT ... ON CONFLICT DO NOTHING` (a new resource: two statements, and no savepoint, since a
 * conflict is not an error). When neither wrote, the row exists with a newer fence (refused,
 * after one read of it) or another request created it meanwhile (one more round, then the
 * general upsert). The guard's refusals become `StaleFencingTokenError`; run it as the first
 * statement of a transaction, since a refusal by the guard ends the transaction.
 */
export async function recordFence(client: object, model: string, field: string, scope: FenceScope, where: Fields, create: Fields): Promise<void> {
  const call: Call = { client, model, field, operation: 'upsert', scope }
  const delegate = delegateOf(client, model)
  const token = scope.token
  for (let round = 0; round < 2; round++) {
    try {
      const updated = (await invoke(delegate, 'updateMany', { where: withCondition(where, field, { lte: token }), data: { [field]: token } })) as { count: number }
      if (updated.count > 0) return
      const created = (await invoke(delegate, 'createMany', { data: [withToken(create, field, token)], skipDuplicates: true })) as { count: number }
      if (created.count > 0) return
    } catch (error) {
      throw guardToStale(call, error)
    }
    const stored = await readFence(delegate, field, where)
    if (stored !== null && stored !== undefined && stored > token) throw reject(call, stored)
  }
  await upsert(call, { select: { [field]: true } }, where, create, {})
}

/**
 * A create that may lose a race on a unique key. Inside the caller's transaction it runs in a
 * savepoint: a failed INSERT would otherwise abort the caller's whole transaction.
 */
function createOnce(call: Call, args: Fields): Promise<unknown> {
  if (!inTransaction(call.client)) return invoke(delegateOf(call.client, call.model), 'create', args)
  return atomically(call.client, (tx) => invoke(delegateOf(tx, call.model), 'create', args))
}

/** The stored fence of the row `where` selects: `null` when there is no such row, `undefined` when unreadable. */
async function readFence(delegate: object, field: string, where: Fields): Promise<bigint | null | undefined> {
  const row = (await invoke(delegate, 'findUnique', { where, select: { [field]: true } })) as Fields | null
  return row === null ? null : asToken(row[field])
}

function asToken(value: unknown): bigint | undefined {
  return typeof value === 'bigint' ? value : undefined
}

/** Builds the error and tells `onRejection`, which must not change the outcome (nor reject unhandled). */
function reject(call: Call, storedToken: bigint | undefined): StaleFencingTokenError {
  const { model, operation, scope } = call
  const onRejection = scope.options.onRejection
  if (onRejection !== undefined) {
    try {
      const result = onRejection({ model, operation, token: scope.token, storedToken }) as unknown
      // An async observer that rejects must not become an unhandled rejection.
      if (typeof (result as { then?: unknown } | undefined)?.then === 'function') (result as PromiseLike<unknown>).then(undefined, () => {})
    } catch {
      // Observing a rejection must never change its outcome.
    }
  }
  return new StaleFencingTokenError(model, operation, scope.token, storedToken)
}

/** `select`, `include`, `omit` of the caller, for the statements a call is rewritten into. */
function selectionOf(a: Fields): Fields {
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
function sameRow(call: Call, where: Fields): Fields {
  const relations = call.scope.dataModel?.get(call.model)?.relations
  const row: Fields = {}
  for (const key of Object.keys(where)) {
    if (key === call.field || key === 'AND' || key === 'OR' || key === 'NOT' || relations?.has(key) === true) continue
    row[key] = where[key]
  }
  return row
}

/** Whether a filter reads the model's own `field`: at its top, or inside `AND`, `OR`, `NOT` (a relation filter reads another model). */
function filtersOn(where: unknown, field: string, depth: number): boolean {
  // Prisma filters are shallow; past the cap (a cyclic object) assume it does.
  if (depth > 64) return true
  for (const [key, value] of sentEntries(where)) {
    if (key === field) return true
    if ((key === 'AND' || key === 'OR' || key === 'NOT') && (Array.isArray(value) ? value : [value]).some((part) => filtersOn(part, field, depth + 1))) return true
  }
  return false
}

/** Reads an argument as Prisma does, or refuses it before any query. */
function requireFields(call: Call, name: string, value: unknown): Fields {
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
function withCondition(where: Fields, field: string, condition: Fields): Fields {
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

function withToken(data: Fields, field: string, token: bigint): Fields {
  const out: Fields = { ...data }
  out[field] = token
  return out
}

/** Prisma's "record to update/delete not found". */
export function isRecordNotFound(error: unknown): boolean {
  return typeof error === 'object' && error !== null && (error as { code?: unknown }).code === 'P2025'
}

function isUniqueViolation(error: unknown): boolean {
  return typeof error === 'object' && error !== null && (error as { code?: unknown }).code === 'P2002'
}

/** Refuses `data` of a fenced write that sets the fence column or writes through a relation. */
function checkData(call: Call, data: Fields): void {
  for (const [key] of sentEntries(data)) {
    if (key === call.field) throw new UnsupportedFencedWriteError(call.model, call.operation, 'fence-column', key)
  }
  const found = findNestedWrite(call.model, data, call.scope.dataModel, call.scope.options.models)
  if (found !== undefined) throw nestedWriteError(call.model, call.operation, found)
}

/** Refuses a delete whose rows the database would cascade to a fenced model. */
function checkCascade(call: Call): void {
  const found = findCascade(call.model, call.scope.dataModel, call.scope.options.models)
  if (found !== undefined) throw nestedWriteError(call.model, call.operation, found)
}

function nestedWriteError(model: string, operation: string, found: NestedWrite): UnsupportedFencedWriteError {
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
