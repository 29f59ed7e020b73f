/**
 * Prisma's fluent API on a fenced write: `db.$fenced(t).account.update({ ... }).invoices()` runs the
 * fenced update selecting the relation, and resolves to the related records, as the plain call does
 * (Prisma re-issues the query with `select: { invoices: args }` and unpacks it; so does this).
 * Chained relations (`.account().ledger()`) nest the selection. Only the operations whose Prisma
 * promise has the fluent API: `create`, `update`, `upsert`, `delete`.
 */
import type { DataModel } from './data-model.js'
import { lazyWrite, type BatchTransaction, type PrismaPromiseLike, type WritePlan } from './lazy-write.js'
import type { Fields } from './prisma-arguments.js'

/** The Prisma operations whose promise has relation methods. */
export const FLUENT_OPERATIONS: ReadonlySet<string> = new Set(['create', 'update', 'upsert', 'delete'])

/** Plans the write again with `select` in place of the caller's selection (undefined: as called). */
export type Replan = (select: Fields | undefined) => WritePlan<unknown>

/** The lazy write of `plan`, with a method per relation of `model` that follows it. */
export function fluentWrite(plan: WritePlan<unknown>, model: string, dataModel: DataModel | undefined, replan: Replan, path: readonly (readonly [string, unknown])[] = []): PrismaPromiseLike<unknown> {
  const lazy = lazyWrite(plan)
  const relations = dataModel?.get(model)?.relations
  if (relations === undefined) return lazy
  // As a plain object: the methods are added to it, not awaited.
  const record: object = lazy
  for (const [relation, target] of relations) {
    Object.defineProperty(record, relation, {
      value: (args?: unknown) => {
        const next = [...path, [relation, args] as const]
        const inner = replan(selectionOf(next))
        const unpacked: WritePlan<unknown> = {
          run: () => inner.run().then((record) => unpack(record, next)),
          joinBatch: (transaction: BatchTransaction) => Promise.resolve(inner.joinBatch(transaction)).then((record) => unpack(record, next)),
        }
        return fluentWrite(unpacked, target, dataModel, replan, next)
      },
    })
  }
  return lazy
}

/** `[[a, x], [b, y]]` → `{ a: { select: { b: y ?? true } } }`. */
function selectionOf(path: readonly (readonly [string, unknown])[]): Fields {
  let select: unknown
  for (let i = path.length - 1; i >= 0; i--) {
    const [relation, args] = path[i] as readonly [string, unknown]
    select = { [relation]: i === path.length - 1 ? (args ?? true) : { select } }
  }
  return select as Fields
}

function unpack(record: unknown, path: readonly (readonly [string, unknown])[]): unknown {
  let value = record
  for (const [relation] of path) value = value === null || value === undefined ? null : ((value as Fields)[relation] ?? null)
  return value
}
