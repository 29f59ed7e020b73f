/**
 * Errors thrown by `@fencelock/fencing`. Every failure has its own class under
 * {@link FencingError}, with `name` set and read-only context, so callers branch on the class,
 * never on the text.
 */

/** Base class of every error this package throws. */
export class FencingError extends Error {
  /** The Prisma model the failure concerns (e.g. `Product`), when there is one. */
  readonly model: string | undefined

  constructor(message: string, options: { model?: string | undefined; cause?: unknown } = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause })
    this.name = new.target.name
    this.model = options.model
  }
}

/**
 * The database refused a fenced write: a newer token has already written the row (or deleted
 * it, where the database guard keeps its fence), so the caller's lock is no longer current (it
 * paused past its TTL, or another holder took over). Nothing of the refused call is kept: a
 * one-statement write changed nothing, and a write of several statements (`updateMany`,
 * `deleteMany`, `upsert`, `delete`) ran in a transaction — or a savepoint of yours — that was
 * rolled back. Inside your own transaction, let it propagate so what you wrote
 * before it rolls back too.
 */
export class StaleFencingTokenError extends FencingError {
  declare readonly model: string
  /** The Prisma operation that was refused (`update`, `upsert`, `deleteMany`, ...). */
  readonly operation: string
  /** The caller's (stale) token. */
  readonly token: bigint
  /** The newer token stored on the row, read right after the refusal; undefined when it could not be read. */
  readonly storedToken: bigint | undefined

  /** `cause`: the database's own error, when there is one to keep. */
  constructor(model: string, operation: string, token: bigint, storedToken: bigint | undefined, cause?: unknown) {
    const stored = storedToken === undefined ? 'a newer token' : `token ${storedToken}`
    super(`stale fencing token: ${model}.${operation} with token ${token} refused, the row was already written with ${stored}`, {
      model,
      cause,
    })
    this.operation = operation
    this.token = token
    this.storedToken = storedToken
  }
}

/** How `withFence` found its transaction gone when it came to commit. */
export type FenceTransactionLostReason =
  /** The transaction withFence opened had ended before its COMMIT (fn's own COMMIT or ROLLBACK on the same client); what fn ran after that ran outside it. */
  | 'ended'
  /** The transaction was aborted (fn caught an error of the database and returned): PostgreSQL rolled it back, nothing of it was kept. */
  | 'rolled-back'
  /** fn set another `fencelock.token` in the transaction: its writes were not fenced with withFence's token; rolled back. */
  | 'token-changed'

/**
 * `withFence` came to commit and its transaction, or its token, was no longer in force: `fn`
 * ended the transaction itself (an ORM's own `transaction()` on the same client sends `BEGIN`,
 * which PostgreSQL only warns about, and a `COMMIT` that ends withFence's), caught an error of the
 * database and returned (PostgreSQL answers the COMMIT with ROLLBACK), or set another token. What
 * `fn` meant as one fenced transaction did not commit as one: `reason` says what happened.
 */
export class FenceTransactionLostError extends FencingError {
  /** What happened to the transaction. */
  readonly reason: FenceTransactionLostReason
  /** The token withFence was given. */
  readonly token: bigint

  constructor(reason: FenceTransactionLostReason, token: bigint, cause?: unknown) {
    super(`withFence: the transaction under token ${token} ${LOST[reason]}`, { cause })
    this.reason = reason
    this.token = token
  }
}

const LOST: Record<FenceTransactionLostReason, string> = {
  ended:
    'had ended before withFence committed it (a COMMIT or ROLLBACK of fn on the same client, e.g. an ORM’s own transaction()): what fn ran after that ran outside it, and was not fenced by it. Do not open a transaction inside withFence; use the ORM’s nested transaction (a savepoint) or run the ORM’s own transaction with SET_FENCE_TOKEN_SQL as its first statement',
  'rolled-back': 'was rolled back by PostgreSQL: an error of the database aborted it (fn caught it and returned); nothing of it was kept',
  'token-changed': 'had its fencelock.token changed by fn; it was rolled back, nothing of it was kept',
}

/**
 * A fencing token that is not a non-negative integer of at most 2^63 − 1 (the `BIGINT` column's
 * range), given as a `bigint` or a string of digits. Thrown before any query.
 */
export class InvalidFenceTokenError extends FencingError {
  /** What the token must be. */
  readonly rule: string

  constructor(rule: string, value: unknown) {
    super(`invalid fencing token: ${rule} (got ${describe(value)})`)
    this.rule = rule
  }
}

/** `$fenced()` was called without a token outside {@link withFenceToken}: there is no token to fence with. */
export class MissingFenceTokenError extends FencingError {
  constructor() {
    super('no fencing token: pass one to $fenced(token) or run inside withFenceToken(token, fn)')
  }
}

/** Why a write cannot be fenced. */
export type UnsupportedFencedWriteReason =
  /** `data` sets the fence column itself; under `$fenced` the extension owns that column. */
  | 'fence-column'
  /**
   * The filter of `deleteMany` reads the fence column. A fenced `deleteMany` raises the fence of
   * the rows it deletes to the token first (so the guard's tombstone keeps the deleting token,
   * not the rows' older fences), and the filter would then be read on the raised fence.
   */
  | 'fence-filter'
  /**
   * A nested write (relation field in `data`) would write rows of a fenced model without the
   * condition — or writes another model from a fenced one, which Prisma runs apart from the fenced
   * statement; or the check cannot read it (too deep, cyclic, an unknown operation): fail closed.
   */
  | 'nested-write'
  /**
   * A delete that the database would cascade (`onDelete: Cascade`) to rows of a fenced model, whose
   * fences a DELETE of the parent does not check; `field` is the relation path (`invoices`).
   */
  | 'cascade'
  /**
   * `limit` on `updateMany`/`updateManyAndReturn`/`deleteMany`: Prisma moves the filter, and so
   * the fence, into `id IN (SELECT ... LIMIT n)`, which PostgreSQL does not re-check after waiting
   * for a concurrent writer of the row; an older token would then write over a newer one.
   */
  | 'limit'
  /** An argument (`where`, `data`, `create`, `update`) that is missing or not an object Prisma reads as fields. */
  | 'argument'
  /**
   * A write of several statements (`updateMany`, `updateManyAndReturn`, `deleteMany`, `upsert`,
   * `delete`) as an element of the array form of `$transaction`, which runs one statement per
   * element. Refused before the batch starts: nothing of it runs.
   */
  | 'batch-transaction'

/**
 * A write under `$fenced` that the extension cannot make conditional, refused before any query
 * rather than run unfenced. Write the related rows through `$fenced` separately, and set
 * foreign keys as scalars (`productId: 1`) instead of `connect`.
 */
export class UnsupportedFencedWriteError extends FencingError {
  declare readonly model: string
  readonly operation: string
  readonly reason: UnsupportedFencedWriteReason
  /** The argument or field at fault: a field of `data` (`fence-column`, `nested-write`), the fence column (`fence-filter`), or the argument (`limit`, `where`, `data`, ...). */
  readonly field: string

  /** `detail` says what is wrong with an argument (reason `argument`). */
  constructor(model: string, operation: string, reason: UnsupportedFencedWriteReason, field: string, detail?: string) {
    super(`cannot fence ${model}.${operation}: ${explain(reason, field, detail)}`, { model })
    this.operation = operation
    this.reason = reason
    this.field = field
  }
}

/**
 * A request's fencing header that cannot be read: one header without the other, sent twice, a
 * token that is not 0 to 2^63 − 1 in decimal digits, a resource that is not visible ASCII. A
 * server answers it with 400 (the express middleware does).
 */
export class InvalidFencingHeaderError extends FencingError {
  /** The header at fault, e.g. `Fencing-Token`. */
  readonly header: string
  readonly rule: string

  constructor(header: string, rule: string, value: unknown) {
    super(`invalid ${header} header: ${rule} (got ${describe(value)})`)
    this.header = header
    this.rule = rule
  }
}

/** A bad option or argument, detected before any I/O. `field` names it; `rule` says what it must be. */
export class InvalidFencingOptionError extends FencingError {
  readonly field: string
  readonly rule: string

  constructor(field: string, rule: string, value: unknown) {
    super(`invalid ${field}: ${rule} (got ${describe(value)})`)
    this.field = field
    this.rule = rule
  }
}

/** One object of the database guard that {@link assertFenceGuard} did not find as `fenceGuardSql` installs it. */
export interface MissingGuardObject {
  /** The fenced model whose guard it belongs to. */
  readonly model: string
  /** The model's table, schema-qualified as found (`public.Invoice`). */
  readonly table: string
  readonly kind: 'tombstone table' | 'function' | 'trigger'
  /** Its name, without the schema (`Invoice_fence_refuse_lower`). */
  readonly name: string
  /** `missing`; `disabled` (a trigger turned off, or firing only in replica mode); `other column` (it guards another column than the fence). */
  readonly problem: 'missing' | 'disabled' | 'other column'
}

/**
 * The database guard (`fenceGuardSql`) is not installed, or not completely, on a fenced model's
 * table: found by `assertFenceGuard` at startup, instead of an UPDATE that lowers a fence going
 * through unnoticed later. `missing` lists every object it did not find, by model.
 */
export class MissingFenceGuardError extends FencingError {
  /** What is missing, disabled or guarding another column, for every model checked. */
  readonly missing: readonly MissingGuardObject[]

  constructor(missing: readonly MissingGuardObject[], installed: ReadonlySet<string>, hints: ReadonlyMap<string, string>) {
    const models = [...new Set(missing.map((m) => m.model))]
    const parts = models.map((model) => {
      const of = missing.filter((m) => m.model === model)
      const table = (of[0] as MissingGuardObject).table
      const what = (['tombstone table', 'function', 'trigger'] as const)
        .map((kind) => {
          const objects = of.filter((m) => m.kind === kind).map((m) => (m.problem === 'missing' ? m.name : `${m.name} (${m.problem})`))
          return objects.length === 0 ? '' : `${kind}${objects.length > 1 ? 's' : ''} ${objects.join(', ')}`
        })
        .filter((text) => text !== '')
        .join('; ')
      const state = installed.has(model) ? 'is incomplete (missing or not in effect' : 'is not installed (missing'
      return `${model} (table ${table}): the guard ${state}: ${what}). ${hints.get(model) ?? ''}`.trim()
    })
    super(`database fence guard:\n${parts.join('\n')}`, { model: models.length === 1 ? models[0] : undefined })
    this.missing = Object.freeze([...missing])
  }
}

function explain(reason: UnsupportedFencedWriteReason, field: string, detail: string | undefined): string {
  switch (reason) {
    case 'fence-column':
      return `data sets the fence column "${field}", which the extension sets to the token itself`
    case 'fence-filter':
      return `the filter "where" reads the fence column "${field}": a fenced deleteMany raises the fence of its rows to the token before it deletes them, and would then read the filter on the raised fence; select the rows first (their keys), or filter without the fence column`
    case 'nested-write':
      return `the nested write through "${field}" ${detail ?? 'would write a fenced model without the fencing condition; write that row through $fenced on its own and set foreign keys as scalars'}`
    case 'cascade':
      return `deleting it ${detail ?? `may cascade through "${field}" to a fenced model`}`
    case 'limit':
      return 'the argument "limit" cannot carry the fence (Prisma moves the filter into "id IN (SELECT ... LIMIT n)", which PostgreSQL does not re-check after a row-lock wait); select the rows first, or write without limit'
    case 'argument':
      return `the argument "${field}" ${detail ?? 'is not an object'}: it must be an object (Prisma reads its enumerable properties, as it does a plain object's)`
    case 'batch-transaction':
      return 'it takes more than one statement, so it cannot be one element of $transaction([...]); nothing of the batch was run. Use the interactive form, $transaction(async (tx) => ...)'
  }
}

function describe(value: unknown): string {
  if (typeof value === 'string') return value.length > 40 ? `a string of ${value.length} characters` : JSON.stringify(value)
  if (typeof value === 'number' || typeof value === 'boolean' || value == null) return `${typeof value === 'number' ? 'the number ' : ''}${String(value)}`
  if (typeof value === 'bigint') return `${value}n`
  return typeof value
}
