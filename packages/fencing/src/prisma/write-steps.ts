/**
 * The statements of the fenced writes: each write on the caller's own client (or transaction client),
 * the ones of several statements in a transaction of their own (a savepoint inside the caller's), and
 * a failure explained — a refusal by a newer token becomes `StaleFencingTokenError`, a missing row
 * stays Prisma's own error.
 */
import { StaleFencingTokenError, UnsupportedFencedWriteError } from '../shared/errors.js'
import { fenceGuardRefusal } from '../guard/refusal.js'
import type { BatchTransaction, WritePlan } from './lazy-write.js'
import type { Fields } from './prisma-arguments.js'
import { type Call, delegateOf, type FenceScope, invoke } from './fenced-call.js'
import { pick, type PrimaryKey, primaryKeyOf, sameRow, selectionOf, selectKey, uniqueKey, withCondition, withToken } from './write-arguments.js'

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
export function atomically<R>(client: object, fn: (tx: object) => Promise<R>): Promise<R> {
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

/**
 * A write of one statement: alone, or as one element of a batch. After a refusal it tells a
 * stale token from a missing row by reading the stored fence (outside the batch, which by then
 * has rolled back).
 */
export function oneStatement(call: Call, args: Fields, where: Fields | undefined): WritePlan<unknown> {
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
export function severalStatements(call: Call, run: () => Promise<unknown>): WritePlan<unknown> {
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
export function writeMany(call: Call, where: Fields, write: (delegate: object) => Promise<unknown>): Promise<unknown> {
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
export function deleteRaised(call: Call, a: Fields, where: Fields): Promise<unknown> {
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
export async function deleteManyByKey(call: Call, delegate: object, where: Fields, key: PrimaryKey): Promise<{ count: number }> {
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
export async function deleteManyByFilter(call: Call, delegate: object, a: Fields, where: Fields): Promise<{ count: number }> {
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

/**
 * Upsert as a conditional update, then a create when the row does not exist. Prisma's own
 * upsert cannot carry the condition: with an extra filter it reads first and writes later (a
 * window for a newer token), and when the filter excludes an existing row it tries to create
 * it. Here each step is one atomic statement. A create that loses a race with a concurrent
 * create of the same key (unique violation) goes back to the update, which then either writes
 * (our token is current) or is refused (the other one was newer).
 */
export async function upsert(call: Call, a: Fields, where: Fields, create: Fields, update: Fields): Promise<unknown> {
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
export function reject(call: Call, storedToken: bigint | undefined): StaleFencingTokenError {
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

/** Prisma's "record to update/delete not found". */
function isRecordNotFound(error: unknown): boolean {
  return typeof error === 'object' && error !== null && (error as { code?: unknown }).code === 'P2025'
}

function isUniqueViolation(error: unknown): boolean {
  return typeof error === 'object' && error !== null && (error as { code?: unknown }).code === 'P2002'
}
