/**
 * Recognizes the database guard's refusal (SQLSTATE FL001, see protocol.ts) in the errors a
 * client raises: Prisma's (the driver adapter's error under `meta.driverAdapterError.cause`),
 * `pg`'s (`code`, `detail`), and either one wrapped as a `cause`.
 */
import { FENCE_GUARD_SQLSTATE } from './protocol.js'

/** A guard refusal: the newer fence the database holds, when its detail said so. */
export interface FenceGuardRefusal {
  readonly storedToken: bigint | undefined
  /** The table, when the detail named it. */
  readonly table: string | undefined
  /** The refused operation (`update`, `delete`, `insert`, `truncate`), when the detail named it. */
  readonly operation: string | undefined
}

interface DatabaseErrorFields {
  code?: unknown
  detail?: unknown
}

function databaseErrorOf(error: unknown, depth = 0): DatabaseErrorFields | undefined {
  if (error === null || typeof error !== 'object' || depth > 4) return undefined
  const e = error as { code?: unknown; meta?: { driverAdapterError?: { cause?: unknown } }; cause?: unknown }
  if (e.code === FENCE_GUARD_SQLSTATE) return e as DatabaseErrorFields
  const adapterCause = e.meta?.driverAdapterError?.cause
  if (adapterCause !== undefined) {
    const found = databaseErrorOf(adapterCause, depth + 1)
    if (found !== undefined) return found
  }
  return databaseErrorOf(e.cause, depth + 1)
}

/** The guard's refusal carried by `error`, or `undefined` when `error` is something else. */
export function fenceGuardRefusal(error: unknown): FenceGuardRefusal | undefined {
  const found = databaseErrorOf(error)
  if (found === undefined) return undefined
  let storedToken: bigint | undefined
  let table: string | undefined
  let operation: string | undefined
  if (typeof found.detail === 'string') {
    try {
      const detail = JSON.parse(found.detail) as { stored?: unknown; table?: unknown; operation?: unknown }
      if (typeof detail.stored === 'string' && /^[0-9]{1,19}$/.test(detail.stored)) storedToken = BigInt(detail.stored)
      if (typeof detail.table === 'string') table = detail.table
      if (typeof detail.operation === 'string') operation = detail.operation
    } catch {
      // A detail we did not write (or none): the refusal stands without the stored token.
    }
  }
  return { storedToken, table, operation }
}

/**
 * Whether `error` is the database guard refusing a write (an UPDATE lowering a fence, a row
 * recreated under an older token): for code that writes to a guarded table outside `$fenced`
 * (raw SQL, the plain client, `pg`) and wants to treat it as a stale token.
 *
 * @example
 * ```ts
 * try {
 *   await prisma.$executeRaw`UPDATE "Product" SET stock = 0, "fenceToken" = ${token} WHERE sku = ${sku}`
 * } catch (error) {
 *   if (isFenceGuardError(error)) return 'stale'
 *   throw error
 * }
 * ```
 */
export function isFenceGuardError(error: unknown): boolean {
  return databaseErrorOf(error) !== undefined
}
