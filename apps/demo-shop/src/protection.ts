/**
 * What differs between the demo's modes, and nothing else: the business code in
 * `shop-service.ts` is the same in all three.
 *
 * - `unsafe`: no lock, plain transactions.
 * - `lock`: `locker.using(resource)` around the work, plain transactions — safe until a holder
 *   pauses past its TTL.
 * - `fenced`: the same lock, and every transaction is a `fencedTransaction` that first raises the
 *   row's fence to the lock's token, so a stale holder's transaction fails at its first statement;
 *   and every outside call carries an idempotency key named after the business operation and the
 *   lock's token, so the outside service collapses a repeat and refuses an older holder.
 */
import type { Locker } from '@fencelock/lock'
import type { Prisma } from '../../../generated/prisma/client.js'
import type { ChargeProtection } from './payment-gateway.js'

/** The three modes of a run. */
export const PROTECTION_MODES = Object.freeze(['unsafe', 'lock', 'fenced'] as const)
export type ProtectionMode = (typeof PROTECTION_MODES)[number]

/** A transaction's client. */
export type Tx = Prisma.TransactionClient

/** The row a transaction works on, by a unique filter; in `fenced` mode its fence is raised first. */
export type GuardedRow = { model: 'Product'; where: { sku: string } } | { model: 'Order'; where: { id: number } }

/** What the business code gets while it runs under the protection of one resource. */
export interface Guard {
  /** The lock resource, e.g. `product:flash-1`. */
  readonly resource: string
  /** The fencing token of the lock held; undefined in `unsafe` mode (no lock). */
  readonly token: bigint | undefined
  /** Runs one interactive transaction on `row` (fenced in `fenced` mode). */
  transaction<T>(row: GuardedRow, fn: (tx: Tx) => Promise<T>): Promise<T>
  /**
   * What protects a call to an outside service made for the business operation `key` (e.g.
   * `order:27`): nothing in `unsafe` and `lock`, as naive code calls; in `fenced`, `key` as the
   * idempotency key and the lock's token as the fencing headers.
   */
  outsideCall(key: string): ChargeProtection
}

/** Runs business code under a mode's protection. */
export interface Protection {
  readonly mode: ProtectionMode
  run<T>(resource: string, fn: (guard: Guard) => Promise<T>): Promise<T>
}

/** A plain interactive transaction (`db.$transaction(fn, limits)`). */
export type PlainTransaction = <T>(fn: (tx: Tx) => Promise<T>) => Promise<T>
/** A transaction that raises `row`'s fence to `token` first (`fencedTransaction` of `@fencelock/fencing`). */
export type FencedTransaction = <T>(token: bigint, row: GuardedRow, fn: (tx: Tx) => Promise<T>) => Promise<T>

/** What {@link createProtection} needs; `locker` for `lock` and `fenced`, `fenced` for `fenced`. */
export interface ProtectionDeps {
  readonly plain: PlainTransaction
  readonly fenced?: FencedTransaction
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
 * const protection = createProtection('fenced', { plain, fenced, locker, ttlMs: 1000, waitMs: 30_000 })
 * await protection.run('product:flash-1', (guard) => guard.transaction({ model: 'Product', where: { sku } }, (tx) => ...))
 * ```
 */
export function createProtection(mode: ProtectionMode, deps: ProtectionDeps): Protection {
  const { plain, locker, fenced } = deps
  if (mode === 'unsafe') {
    return {
      mode,
      run: (resource, fn) => fn({ resource, token: undefined, transaction: (_row, work) => plain(work), outsideCall: () => ({}) }),
    }
  }
  if (locker === undefined) throw new Error(`mode ${mode} needs a locker`)
  if (mode === 'lock') {
    return {
      mode,
      run: (resource, fn) =>
        locker.using(resource, (lock) => fn({ resource, token: lock.token, transaction: (_row, work) => plain(work), outsideCall: () => ({}) }), {
          ttlMs: deps.ttlMs,
          waitMs: deps.waitMs,
        }),
    }
  }
  if (fenced === undefined) throw new Error('mode fenced needs fencedTransaction')
  return {
    mode,
    run: (resource, fn) =>
      locker.using(
        resource,
        (lock) =>
          fn({
            resource,
            token: lock.token,
            transaction: (row, work) => fenced(lock.token, row, work),
            outsideCall: (key) => ({ idempotencyKey: key, fencing: { token: lock.token, resource } }),
          }),
        { ttlMs: deps.ttlMs, waitMs: deps.waitMs },
      ),
  }
}
