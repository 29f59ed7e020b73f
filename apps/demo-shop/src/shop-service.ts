/**
 * The shop's business code: a purchase and a payment, each a read-modify-write as real code
 * writes it. The same code runs in every mode; only the {@link Protection} differs.
 *
 * Each operation is two short steps around the external gateway call:
 *   a read (or a read-modify-write) → the gateway call (no transaction open) → a transaction that
 *   writes what was computed from the read.
 * Under the lock alone, a holder that pauses during the gateway call past its TTL wakes up and
 * writes anyway (lost update, oversell, a second payment recorded) — and a second holder has
 * meanwhile charged the order again at the gateway. Under `fenced`, every step carries the
 * holder's token: a newer holder's read has raised the row's fence meanwhile, so the stale
 * write fails at its first statement and writes nothing. The charge itself is outside the shop's database, so the fence
 * cannot reach it: the payment records its intent (the charge's idempotency key: the order's
 * random `reference`, minted with the order) in tx1, and the protection sends that key and the
 * lock's token with the charge, so the gateway answers a second holder's charge with the first
 * charge, and refuses an older holder's. The amount charged is the order's, fixed when the order
 * was made, so every repeat of the key is the same call. An intent left unpaid (the instance died
 * between the charge and the payment row) is settled by the reconciler (reconciler.ts).
 */
import { randomBytes } from 'node:crypto'
import { StaleFencingTokenError } from '@fencelock/fencing'
import { LockTimeoutError } from '@fencelock/lock'
import type { PrismaClient } from '../../../generated/prisma/client.js'
import { GatewayError, type PaymentGateway } from './payment-gateway.js'
import type { ShopStep } from './incident-log.js'
import { writeBatch, type Guard, type Protection } from './protection.js'
import type { SaleTimings } from './sale-timings.js'
import { loadSegments, sellFromSegments, type SegmentRef } from './segments.js'
import { lockResource } from './shop-keys.js'

/** Told when the code enters an external call while it may hold a lock: the chaos' target. */
export interface ShopObserver {
  externalCall(call: { operation: 'authorize' | 'charge'; resource: string; token: bigint | undefined }): void
  /** Told when a purchase's order committed, before the buyer is answered (a test hook dies here). */
  ordered?(call: { orderId: number }): void
  /** Told when the gateway has answered a charge, before the payment is recorded (a test hook dies here). */
  chargeAnswered?(call: { orderId: number; chargeId: string }): void
  /** Told each charge's answer and each write's outcome (the incident timeline's record). */
  step?(step: ShopStep): void
}

/** A new order's reference: `ord_` and 16 random bytes in base64url (node:crypto). Never reused. */
export function newOrderReference(): string {
  return `ord_${randomBytes(16).toString('base64url')}`
}

/** What a purchase did. */
export type PurchaseResult =
  /** `stockLeft`: of the product, or of the segment sold from when the stock is segmented. */
  | { kind: 'ordered'; sku: string; orderId: number; stockLeft: number; token: bigint | undefined; segment?: number }
  | { kind: 'sold-out'; sku: string }
  | { kind: 'unknown-product'; sku: string }

/** What a payment did. `already-paid` is the idempotent answer to a retried or duplicated payment. */
export type PaymentResult =
  | {
      kind: 'paid'
      orderId: number
      paymentId: number
      amountCents: number
      chargeId: string
      token: bigint | undefined
    }
  | { kind: 'already-paid'; orderId: number }
  | { kind: 'unknown-order'; orderId: number }
  /** Cancelled by the reconciler (no charge was found for its intent): nothing to pay. */
  | { kind: 'cancelled'; orderId: number }
  /**
   * Another delivery of this payment holds the order's lock (the queue's duplicate met the front
   * end's request, or the reverse): nothing was charged or written by this one. Never a "paid":
   * that delivery may yet fail. To be delivered again later (the app says when): it is then
   * answered from the order, or, the other delivery having stalled or died, takes its lease over.
   */
  | { kind: 'in-progress'; orderId: number }
  /**
   * The gateway holds another call under the order's key (422 `idempotency_key_reused`): not a
   * case for a retry — the reconciler settles the order from what the gateway holds.
   */
  | { kind: 'reconciling'; orderId: number }

/** What {@link ShopService} needs. */
export interface ShopDeps {
  /** The plain client, for existence checks made before taking any lock. */
  readonly db: Pick<PrismaClient, 'product' | 'order' | 'stockSegment'>
  readonly protection: Protection
  readonly gateway: PaymentGateway
  /** This process's name, recorded on each payment to attribute double charges. */
  readonly instanceId: string
  readonly observer?: ShopObserver
  /** Times each purchase that orders a unit, by phase (sale-timings.ts; SHOP_SALE_TIMERS=1). */
  readonly timings?: SaleTimings
  /** Picks a segmented product's first segment (default Math.random). */
  readonly random?: () => number
}

/** A segmented product as a purchase needs it, read once (segments and prices do not change in the demo). */
interface SegmentedProduct {
  readonly id: number
  readonly priceCents: number
  readonly segments: readonly SegmentRef[]
}

/**
 * The flash-sale shop.
 * @example
 * ```ts
 * const shop = new ShopService({ db, protection, gateway, instanceId: 'shop-1' })
 * const bought = await shop.purchase('flash-1', 'buyer-7')
 * if (bought.kind === 'ordered') await shop.pay(bought.orderId)
 * ```
 */
export class ShopService {
  readonly #deps: ShopDeps
  readonly #knownSkus = new Set<string>()
  /** Per sku seen: its segments, or null when it sells from Product.stock. */
  readonly #segmented = new Map<string, SegmentedProduct | null>()
  /**
   * Skus this instance saw run out (a sale left none, or the read under the lock found none):
   * for them a plain read decides "sold out" before any lock, so a buyer the stock cannot serve
   * takes no lock and writes nothing. A read that finds stock again (the reconciler returned a
   * unit) forgets it; the sale itself is still decided under the lock and the fence.
   */
  readonly #soldOut = new Set<string>()

  constructor(deps: ShopDeps) {
    this.#deps = deps
  }

  /** Buys one unit of `sku` for `buyerId` under the lock `product:<sku>`. */
  async purchase(sku: string, buyerId: string): Promise<PurchaseResult> {
    const { db, protection, gateway, observer } = this.#deps
    // Checked before the lock, so an unknown sku costs no lock and mints no token. Products are
    // never deleted here, so a sku found once is remembered (one query less per purchase).
    if (!this.#knownSkus.has(sku)) {
      const found = await db.product.findUnique({ where: { sku }, select: { id: true, priceCents: true } })
      if (found === null) return { kind: 'unknown-product', sku }
      const segments = await loadSegments(db, found.id)
      if (this.#knownSkus.size < 10_000) {
        this.#knownSkus.add(sku)
        this.#segmented.set(sku, segments.length === 0 ? null : { ...found, segments })
      }
      if (segments.length > 0) return this.#purchaseSegment(sku, buyerId, { ...found, segments })
    }
    const segmented = this.#segmented.get(sku)
    if (segmented) return this.#purchaseSegment(sku, buyerId, segmented)

    if (this.#soldOut.has(sku)) {
      const now = await db.product.findUnique({ where: { sku }, select: { stock: true } })
      if (now === null) return { kind: 'unknown-product', sku }
      if (now.stock <= 0) return { kind: 'sold-out', sku }
      this.#soldOut.delete(sku)
    }
    const row = { model: 'Product', where: { sku } } as const
    const timer = this.#deps.timings?.start()
    const result = await protection.run(lockResource.product(sku), async (guard): Promise<PurchaseResult> => {
      timer?.mark('lock')
      // Only a product with stock is read with its fence raised: an empty one (the sku is known,
      // products are never deleted) matches nothing, so a buyer it cannot serve writes nothing.
      const product = await guard.read(row, IN_STOCK)
      timer?.mark('read')
      if (product === null || product.stock <= 0) {
        this.#soldOut.add(sku)
        return { kind: 'sold-out', sku }
      }

      observer?.externalCall({ operation: 'authorize', resource: guard.resource, token: guard.token })
      await gateway.authorize({ buyerId, amountCents: product.priceCents })
      timer?.mark('gateway')

      // The write-back computed from the read in tx1, as real code does: the lock is what is
      // supposed to make that read still current.
      const stockLeft = product.stock - 1
      const [, order] = await this.#recorded(guard, 'order', ([, o]) => o.id, () => writeBatch(guard, row, (db) => [
        db.product.update({ where: { sku }, data: { stock: stockLeft }, select: { id: true } }),
        db.order.create({ data: newOrder(product, buyerId), select: { id: true } }),
      ]))
      timer?.mark('write')
      observer?.ordered?.({ orderId: order.id })
      if (stockLeft <= 0) this.#soldOut.add(sku)
      return { kind: 'ordered', sku, orderId: order.id, stockLeft, token: guard.token }
    })
    if (timer !== undefined && result.kind === 'ordered') {
      timer.mark('release')
      timer.done()
    }
    return result
  }

  /**
   * Buys one unit from one segment of a segmented product (segments.ts): the same steps as a
   * purchase of the product's own stock, on the segment's row under the segment's lock.
   */
  async #purchaseSegment(sku: string, buyerId: string, product: SegmentedProduct): Promise<PurchaseResult> {
    const { db, protection, gateway, observer } = this.#deps
    if (this.#soldOut.has(sku)) {
      const left = await db.stockSegment.findFirst({ where: { productId: product.id, stock: { gt: 0 } }, select: { id: true } })
      if (left === null) return { kind: 'sold-out', sku }
      this.#soldOut.delete(sku)
    }
    const timer = this.#deps.timings?.start()
    const sold = await sellFromSegments<PurchaseResult>(product.segments, this.#deps.random ?? Math.random, (ref, how) => {
      const row = { model: 'StockSegment', where: { id: ref.id } } as const
      return protection.run(
        lockResource.stockSegment(sku, ref.segment),
        async (guard) => {
          // Racers of one purchase run at once: only the one that claims the sale reads, sells and
          // marks the timer (a claimed segment found empty ends the race: the time goes to `lock`).
          if (!how.claim()) return { kind: 'yielded' as const }
          const grantedAt = performance.now()
          const segment = await guard.read(row, IN_STOCK)
          if (segment === null || segment.stock <= 0) return { kind: 'empty' as const }
          timer?.mark('lock', grantedAt)
          timer?.mark('read')

          observer?.externalCall({ operation: 'authorize', resource: guard.resource, token: guard.token })
          await gateway.authorize({ buyerId, amountCents: product.priceCents })
          timer?.mark('gateway')

          const stockLeft = segment.stock - 1
          const [, order] = await this.#recorded(guard, 'order', ([, o]) => o.id, () => writeBatch(guard, row, (db) => [
            db.stockSegment.update({ where: { id: ref.id }, data: { stock: stockLeft }, select: { id: true } }),
            db.order.create({ data: { ...newOrder(product, buyerId), segment: ref.segment }, select: { id: true } }),
          ]))
          timer?.mark('write')
          observer?.ordered?.({ orderId: order.id })
          const ordered: PurchaseResult = { kind: 'ordered', sku, orderId: order.id, stockLeft, token: guard.token, segment: ref.segment }
          return { kind: 'sold' as const, value: ordered }
        },
        { ...(how.waitMs === undefined ? {} : { waitMs: how.waitMs }), ...(how.signal === undefined ? {} : { signal: how.signal }) },
      )
    })
    if (sold === 'sold-out') {
      this.#soldOut.add(sku)
      return { kind: 'sold-out', sku }
    }
    if (timer !== undefined) {
      timer.mark('release')
      timer.done()
    }
    return sold
  }

  /**
   * Runs a write step and tells the observer its outcome: accepted, or refused by the database's
   * fence (the row holds a newer token). Other failures are not an outcome of the fence: not told.
   */
  async #recorded<T>(guard: Guard, what: 'order' | 'intent' | 'payment', orderId: number | ((result: T) => number), write: () => Promise<T>): Promise<T> {
    const step = this.#deps.observer?.step
    const base = { kind: 'write', resource: guard.resource, token: guard.token, what } as const
    try {
      const result = await write()
      step?.({ ...base, outcome: 'accepted', orderId: typeof orderId === 'number' ? orderId : orderId(result), storedToken: undefined })
      return result
    } catch (error) {
      if (error instanceof StaleFencingTokenError) step?.({ ...base, outcome: 'refused', orderId: typeof orderId === 'number' ? orderId : null, storedToken: error.storedToken })
      throw error
    }
  }

  /**
   * Pays order `orderId` under the lock `order:<id>`. The order is read first, before any lock:
   * a paid or cancelled order (a retried or duplicated payment) is answered from it, with no lock
   * and no transaction. The amount and the key charged are the order's, fixed when it was made.
   *
   * The lock is tried once, not waited for: held, it is another delivery of this payment paying
   * now (the order's lock is taken by payments and the reconciler only), so this one answers
   * `in-progress` after one round trip, and charges and writes nothing. It does not wait to learn
   * the outcome (a wait cost the waiter a try, a grant, a release and up to four statements). A
   * holder that stalls past its lease is still overtaken, by a delivery that comes after the lease
   * ran out (this one delivered again, or a retry after a timeout): the lock is free then, and the
   * fence and the key do the rest, as before.
   */
  async pay(orderId: number): Promise<PaymentResult> {
    const { db, protection, gateway, observer, instanceId } = this.#deps
    const found = await db.order.findUnique({ where: { id: orderId }, select: { status: true, reference: true, amountCents: true, productId: true, quantity: true, paymentKey: true } })
    if (found === null) return { kind: 'unknown-order', orderId }
    if (found.status === 'paid') return { kind: 'already-paid', orderId }
    if (found.status === 'cancelled') return { kind: 'cancelled', orderId }
    // Orders made before the amount was fixed on the order: their product's price (never on the hot path).
    const amountCents =
      found.amountCents ?? (await db.product.findUniqueOrThrow({ where: { id: found.productId }, select: { priceCents: true } })).priceCents * found.quantity

    const row = { model: 'Order', where: { id: orderId } } as const
    let holding = false
    return protection.run(lockResource.order(orderId), async (guard): Promise<PaymentResult> => {
      holding = true
      // An intent was recorded before this delivery read the order: another delivery of this
      // payment (the queue's duplicate, a retry) held the lock, and has released it since (or its
      // lease ran out): it has most likely paid it by now.
      // A plain read decides, before any write; a first payment does not need it.
      if (found.paymentKey !== null) {
        const now = await db.order.findUnique({ where: { id: orderId }, select: { status: true } })
        if (now?.status === 'paid') return { kind: 'already-paid', orderId }
        if (now?.status === 'cancelled') return { kind: 'cancelled', orderId }
      }
      // The intent, recorded before calling out: this order is about to be charged this amount
      // under this key (its reference: named after the order, never after the lock or the token,
      // so every holder that ever charges it sends the same key). One conditional UPDATE, outside
      // a transaction: fenced, it raises the order's fence (an older holder's write fails from
      // here on); it matches only a pending order (paid or cancelled since the read: no intent).
      const intent = await this.#recorded(guard, 'intent', orderId, () =>
        guard.writeOne(row, (one) =>
          one.order
            .update({
              where: { id: orderId, status: 'pending' },
              data: { paymentKey: found.reference, paymentIntentAt: new Date(), amountCents },
              select: { id: true },
            })
            .catch((error: unknown) => {
              if ((error as { code?: unknown }).code === 'P2025') return null
              throw error
            }),
        ),
      )
      if (intent === null) {
        const now = await db.order.findUnique({ where: { id: orderId }, select: { status: true } })
        if (now === null) return { kind: 'unknown-order', orderId }
        if (now.status === 'paid') return { kind: 'already-paid', orderId }
        if (now.status === 'cancelled') return { kind: 'cancelled', orderId }
        throw new Error(`order ${orderId}: its intent matched no pending order, yet it is pending`)
      }
      const order = { reference: found.reference }
      observer?.externalCall({ operation: 'charge', resource: guard.resource, token: guard.token })
      let charge: { chargeId: string; replayed: boolean }
      const answered = { kind: 'charge', resource: guard.resource, token: guard.token, orderId } as const
      try {
        charge = await gateway.charge({ orderId, amountCents }, guard.outsideCall(order.reference))
      } catch (error) {
        const outcome = error instanceof GatewayError ? (error.isStaleToken ? 'refused-stale' : error.isKeyReused ? 'key-reused' : 'failed') : 'failed'
        observer?.step?.({ ...answered, outcome, chargeId: null })
        if (error instanceof GatewayError && error.isKeyReused) return { kind: 'reconciling', orderId }
        throw error
      }
      observer?.step?.({ ...answered, outcome: charge.replayed ? 'replayed' : 'charged', chargeId: charge.chargeId })
      observer?.chargeAnswered?.({ orderId, chargeId: charge.chargeId })

      // The order's (fenced) update first: a stale holder's batch stops there.
      const [, payment] = await this.#recorded(guard, 'payment', orderId, () => writeBatch(guard, row, (db) => [
        db.order.update({ where: { id: orderId }, data: { status: 'paid' }, select: { id: true } }),
        db.payment.create({ data: { orderId, amountCents, instance: instanceId, gatewayChargeId: charge.chargeId }, select: { id: true } }),
      ]))
      return {
        kind: 'paid',
        orderId,
        paymentId: payment.id,
        amountCents,
        chargeId: charge.chargeId,
        token: guard.token,
      }
    }, { waitMs: 0 }).catch((error: unknown): PaymentResult => {
      // Only the try for the lock: a LockTimeoutError from inside the hold is not this answer.
      if (!holding && error instanceof LockTimeoutError) return { kind: 'in-progress', orderId }
      throw error
    })
  }
}

/** The condition of a row a buyer can be sold from. */
const IN_STOCK = Object.freeze({ stock: { gt: 0 } })

/**
 * The order of one unit. Its reference (the charge's key) and amount are fixed here, in the
 * order's first transaction: a payment can only ever charge this amount under this key.
 */
function newOrder(product: { readonly id: number; readonly priceCents: number }, buyerId: string) {
  return { productId: product.id, buyerId, quantity: 1, reference: newOrderReference(), amountCents: product.priceCents }
}
