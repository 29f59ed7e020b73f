/**
 * What differs between the demo's modes, and nothing else: the business code in
 * `shop-service.ts` is the same in all three.
 *
 * - `unsafe`: no lock, plain reads and transactions.
 * - `lock`: `locker.using(resource)` around the work, plain reads and transactions — safe until a
 *   holder pauses past its TTL.
 * - `fenced`: the same lock, and every database step carries the lock's token: a read raises the
 *   row's fence, a write is conditional on it, a read-modify-write raises it first; so a stale
 *   holder's step fails at its first statement. And every outside call carries an idempotency key
 *   named after the business operation and the lock's token, so the outside service collapses a
 *   repeat and refuses an older holder.
 *
 * Each step of `fenced` costs the statements of its `lock` twin: the fence rides on a statement
 * the step runs anyway (`UPDATE ... RETURNING` for the read, the write's own condition), except
 * the read-modify-write, whose fence raise comes first.
 */
import { fencedTransaction, fencing, type FencingRejection } from '@fencelock/fencing'
import type { Locker } from '@fencelock/lock'
import type { Order, Prisma, PrismaClient, Product, StockSegment } from '../../../generated/prisma/client.js'
import type { ChargeProtection } from './payment-gateway.js'

/** The three modes of a run. */
export const PROTECTION_MODES = Object.freeze(['unsafe', 'lock', 'fenced'] as const)
export type ProtectionMode = (typeof PROTECTION_MODES)[number]

/** A transaction's client. */
export type Tx = Prisma.TransactionClient

/** The row a step works on, by a unique filter; in `fenced` mode its fence carries the token. */
export type GuardedRow =
  | { model: 'Product'; where: { sku: string } }
  | { model: 'Order'; where: { id: number } }
  | { model: 'StockSegment'; where: { id: number } }

/** The row `R` names. */
export type RowOf<R extends GuardedRow> = R extends { model: 'Product' } ? Product : R extends { model: 'StockSegment' } ? StockSegment : Order

/** What the business code gets while it runs under the protection of one resource. */
export interface Guard {
  /** The lock resource, e.g. `product:flash-1`. */
  readonly resource: string
  /** The fencing token of the lock held; undefined in `unsafe` mode (no lock). */
  readonly token: bigint | undefined
  /**
   * Reads `row` (null when missing, or when it does not also match `also`, e.g. `{ stock: { gt: 0 } }`);
   * in `fenced` mode the read raises its fence, in one `UPDATE ... RETURNING` — and a row `also`
   * rules out is not written at all (the buyer the stock cannot serve writes nothing).
   */
  read<R extends GuardedRow>(row: R, also?: Record<string, unknown>): Promise<RowOf<R> | null>
  /**
   * Runs one write statement on `row` outside any transaction (no BEGIN, no COMMIT); in `fenced`
   * mode on the client fenced with the token, so the statement is conditional on the fence.
   */
  writeOne<T>(row: GuardedRow, fn: (db: Tx) => Promise<T>): Promise<T>
  /**
   * Runs a transaction that writes `row` without reading it first; in `fenced` mode every write
   * to a fenced model is conditional on the token (the first one to `row` is its fence check).
   */
  write<T>(row: GuardedRow, fn: (tx: Tx) => Promise<T>): Promise<T>
  /**
   * Runs the two writes `build` makes, in order, as one transaction of Prisma's array form
   * (`BEGIN`, the statements, `COMMIT`, with no round trip through the business code between
   * them: half the client CPU of an interactive transaction): for writes computed before it. In
   * `fenced` mode on the client fenced with the token, so the first write to `row` is its fence
   * check and a stale one fails the whole batch. Optional: a Guard that wraps another (the chaos
   * app's recorder) may leave it out, and the caller then runs the same writes with `write`.
   */
  batch?<A, B>(row: GuardedRow, build: (db: Tx) => WriteBatch<A, B>): Promise<[A, B]>
  /** Runs a read-modify-write transaction on `row`; in `fenced` mode its fence is raised first. */
  transaction<T>(row: GuardedRow, fn: (tx: Tx) => Promise<T>): Promise<T>
  /**
   * What protects a call to an outside service made for the business operation `key` (e.g.
   * `order:27`): nothing in `unsafe` and `lock`, as naive code calls; in `fenced`, `key` as the
   * idempotency key and the lock's token as the fencing headers.
   */
  outsideCall(key: string): ChargeProtection
}

/** Two writes of one batch, as Prisma's lazy query promises (nothing runs until the batch does). */
export type WriteBatch<A, B> = readonly [Prisma.PrismaPromise<A>, Prisma.PrismaPromise<B>]

/**
 * Runs the writes of `build` on `row` with `guard.batch` (one array-form transaction), or, on a
 * Guard without it, in `guard.write` one after the other (the same statements, interactively).
 */
export async function writeBatch<A, B>(guard: Guard, row: GuardedRow, build: (db: Tx) => WriteBatch<A, B>): Promise<[A, B]> {
  if (guard.batch !== undefined) return guard.batch(row, build)
  return guard.write(row, async (tx) => {
    const [first, second] = build(tx)
    const a = await first
    return [a, await second]
  })
}

/** Runs business code under a mode's protection. */
export interface Protection {
  readonly mode: ProtectionMode
  /**
   * `options.waitMs` overrides the wait for a held lock (0: one try, LockTimeoutError when held);
   * `options.signal` gives the wait up (LockAbortedError); `unsafe` takes no lock and ignores both.
   */
  run<T>(resource: string, fn: (guard: Guard) => Promise<T>, options?: RunOptions): Promise<T>
}

/** Per-call options of {@link Protection.run}. */
export interface RunOptions {
  readonly waitMs?: number
  /** Aborts the wait for the lock (not the work once it holds it): a race of segments was won elsewhere. */
  readonly signal?: AbortSignal
}

/** The shop's database as the protections use it: plain steps, and the same steps under a token. */
export interface ShopStores {
  read<R extends GuardedRow>(row: R, also?: Record<string, unknown>): Promise<RowOf<R> | null>
  transaction<T>(fn: (tx: Tx) => Promise<T>): Promise<T>
  /** The writes of `build` on the plain client, as one array-form transaction. */
  batch<A, B>(build: (db: Tx) => WriteBatch<A, B>): Promise<[A, B]>
  /** The writes of `build` on the client fenced with `token`, as one array-form transaction. */
  batchFenced<A, B>(token: bigint, build: (db: Tx) => WriteBatch<A, B>): Promise<[A, B]>
  /** `fn` on the plain client: one statement, no transaction. */
  writeOne<T>(fn: (db: Tx) => Promise<T>): Promise<T>
  /** The row with its fence raised to `token`, in one statement; null when missing or not matching `also`. */
  readFenced<R extends GuardedRow>(token: bigint, row: R, also?: Record<string, unknown>): Promise<RowOf<R> | null>
  /** `fn` on the client fenced with `token`, outside any transaction. */
  writeOneFenced<T>(token: bigint, fn: (db: Tx) => Promise<T>): Promise<T>
  /** A transaction on the client fenced with `token`. */
  writeFenced<T>(token: bigint, fn: (tx: Tx) => Promise<T>): Promise<T>
  /** `fencedTransaction`: `row`'s fence raised first, then `fn` on the fenced transaction client. */
  transactionFenced<T>(token: bigint, row: GuardedRow, fn: (tx: Tx) => Promise<T>): Promise<T>
}

/** The shop's fenced models and their fence columns. */
export const SHOP_FENCED_MODELS = Object.freeze({ Product: 'fenceToken', Order: 'fenceToken', StockSegment: 'fenceToken' } as const)

/** The shop's client extended with fencing of its fenced models; `onRejection` sees each refusal. */
export function fencedShopClient(prisma: PrismaClient, onRejection?: (rejection: FencingRejection) => void) {
  return prisma.$extends(fencing<typeof prisma>({ models: SHOP_FENCED_MODELS, ...(onRejection === undefined ? {} : { onRejection }) }))
}
export type FencedShopClient = ReturnType<typeof fencedShopClient>

/** Limits of the shop's interactive transactions. */
export interface TransactionLimits {
  readonly maxWait: number
  readonly timeout: number
}

/**
 * The database side of the protections, from the plain client and the fenced one: the one
 * wiring of it, for the shop instances, the chaos workers and the tests.
 */
export function shopStores(prisma: PrismaClient, db: FencedShopClient, limits: TransactionLimits): ShopStores {
  return {
    read: (row, also) => {
      const where = { ...row.where, ...also } as never
      return (row.model === 'Product'
        ? prisma.product.findUnique({ where })
        : row.model === 'StockSegment'
          ? prisma.stockSegment.findUnique({ where })
          : prisma.order.findUnique({ where })) as Promise<RowOf<typeof row> | null>
    },
    transaction: (fn) => prisma.$transaction(fn, limits),
    batch: (build) => prisma.$transaction([...build(prisma as unknown as Tx)]),
    batchFenced: (token, build) => db.$transaction([...build(db.$fenced(token) as unknown as Tx)]),
    writeOne: (fn) => fn(prisma as unknown as Tx),
    async readFenced(token, row, also) {
      // `data: {}` becomes `{ fenceToken: token }` under the condition: one UPDATE ... RETURNING.
      // With `also`, a row it rules out matches nothing: no row version written, null returned.
      const fenced = db.$fenced(token)
      const where = { ...row.where, ...also } as never
      try {
        const found =
          row.model === 'Product'
            ? await fenced.product.update({ where, data: {} })
            : row.model === 'StockSegment'
              ? await fenced.stockSegment.update({ where, data: {} })
              : await fenced.order.update({ where, data: {} })
        return found as RowOf<typeof row>
      } catch (error) {
        // An update's "not found" is a missing row: null, as a read says it.
        if ((error as { code?: unknown }).code === 'P2025') return null
        throw error
      }
    },
    writeOneFenced: (token, fn) => fn(db.$fenced(token) as unknown as Tx),
    writeFenced: (token, fn) => db.$transaction((tx) => fn(tx.$fenced(token) as unknown as Tx), limits),
    transactionFenced: (token, row, fn) =>
      fencedTransaction(db, token, { model: row.model, where: row.where as never, maxWaitMs: limits.maxWait, timeoutMs: limits.timeout }, (tx) =>
        fn(tx as unknown as Tx),
      ),
  }
}

/** What {@link createProtection} needs; `locker` for `lock` and `fenced`. */
export interface ProtectionDeps {
  readonly stores: ShopStores
  readonly locker?: Pick<Locker, 'using'>
  /** Lease of each lock, in ms. */
  readonly ttlMs: number
  /** How long a request waits for a held lock before it fails with LockTimeoutError, in ms. */
  readonly waitMs: number
}

/**
 * Builds the protection of `mode`.
 * @example
 * ```ts
 * const protection = createProtection('fenced', { stores, locker, ttlMs: 1000, waitMs: 30_000 })
 * await protection.run('product:flash-1', (guard) => guard.read({ model: 'Product', where: { sku } }))
 * ```
 */
export function createProtection(mode: ProtectionMode, deps: ProtectionDeps): Protection {
  const { stores, locker } = deps
  const plainGuard = (resource: string, token: bigint | undefined): Guard => ({
    resource,
    token,
    read: (row, also) => stores.read(row, also),
    writeOne: (_row, work) => stores.writeOne(work),
    write: (_row, work) => stores.transaction(work),
    batch: (_row, build) => stores.batch(build),
    transaction: (_row, work) => stores.transaction(work),
    outsideCall: () => ({}),
  })
  if (mode === 'unsafe') return { mode, run: (resource, fn) => fn(plainGuard(resource, undefined)) }
  if (locker === undefined) throw new Error(`mode ${mode} needs a locker`)
  const limitsOf = (options: RunOptions | undefined) => ({
    ttlMs: deps.ttlMs,
    waitMs: options?.waitMs ?? deps.waitMs,
    ...(options?.signal === undefined ? {} : { signal: options.signal }),
  })
  if (mode === 'lock')
    return { mode, run: (resource, fn, options) => locker.using(resource, (lock) => fn(plainGuard(resource, lock.token)), limitsOf(options)) }
  return {
    mode,
    run: (resource, fn, options) =>
      locker.using(
        resource,
        (lock) =>
          fn({
            resource,
            token: lock.token,
            read: (row, also) => stores.readFenced(lock.token, row, also),
            writeOne: (_row, work) => stores.writeOneFenced(lock.token, work),
            write: (_row, work) => stores.writeFenced(lock.token, work),
            batch: (_row, build) => stores.batchFenced(lock.token, build),
            transaction: (row, work) => stores.transactionFenced(lock.token, row, work),
            outsideCall: (key) => ({ idempotencyKey: key, fencing: { token: lock.token, resource } }),
          }),
        limitsOf(options),
      ),
  }
}
