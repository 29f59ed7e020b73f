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
import { AsyncLocalStorage } from 'node:async_hooks'
import { StaleFencingTokenError, UnsupportedFencedWriteError } from '../shared/errors.js'
import type { WritePlan } from './lazy-write.js'
import type { FencedWriteReport } from './options.js'
import { findNestedWrite } from './nested-writes.js'
import { isSent, readCallArguments, type Fields } from './prisma-arguments.js'
import { type Call, type FenceScope, invoke, WRITE_OPERATIONS } from './fenced-call.js'
import { checkCascade, checkData, filtersOn, nestedWriteError, primaryKeyOf, requireFields, withCondition, withToken } from './write-arguments.js'
import { deleteManyByFilter, deleteManyByKey, deleteRaised, oneStatement, severalStatements, upsert, writeMany } from './write-steps.js'

// A fenced write runs inside this context (its plan's `run`), which the extension's query hook reads
// to check what is actually sent, after every query extension.
const sending = new AsyncLocalStorage<FenceScope>()

/**
 * The query hook's check (see extension.ts): while a fenced write is being sent, the arguments
 * that reach the database — after every query extension, yours included, changed them — must
 * carry no nested write (a `connect` added by an extension would rewrite a fenced row
 * unconditionally). Throws `UnsupportedFencedWriteError` (`nested-write`).
 */
export function checkSent(model: string | undefined, operation: string, args: unknown): void {
  const scope = sending.getStore()
  if (scope === undefined || model === undefined || !WRITE_OPERATIONS.has(operation)) return
  const a = readCallArguments(args)
  if (a === undefined) return
  for (const key of ['data', 'create', 'update'] as const) {
    const found = findNestedWrite(model, a[key], scope.dataModel, scope.options.models)
    if (found !== undefined) throw nestedWriteError(model, operation, found)
  }
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
  let plan: WritePlan<unknown>
  try {
    plan = planCall(call, args)
  } catch (error) {
    return refusedPlan(error)
  }
  const report = scope.options.onFencedWrite
  if (report === undefined) return { run: () => sending.run(scope, () => plan.run()), joinBatch: (transaction) => plan.joinBatch(transaction) }
  return {
    run: () => reported(call, report, () => sending.run(scope, () => plan.run())),
    joinBatch: (transaction) => reported(call, report, () => Promise.resolve(plan.joinBatch(transaction))),
  }
}

/** Runs `write` and tells `report` how it settled (accepted, or refused by a newer token); the outcome is `write`'s, unchanged. */
async function reported<T>(call: Call, report: (write: FencedWriteReport) => unknown, write: () => Promise<T>): Promise<T> {
  const started = performance.now()
  const tell = (outcome: 'accepted' | 'refused', storedToken: bigint | undefined) => {
    try {
      const result = report({ model: call.model, operation: call.operation, token: call.scope.token, outcome, storedToken, durationMs: performance.now() - started }) as unknown
      if (result instanceof Promise) result.catch(() => {})
    } catch {
      // Observing never changes the write.
    }
  }
  let value: T
  try {
    value = await write()
  } catch (error) {
    if (error instanceof StaleFencingTokenError) tell('refused', error.storedToken)
    throw error
  }
  tell('accepted', undefined)
  return value
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
