/**
 * The reconciler: settles every order whose payment intent is recorded (`paymentKey`, written in
 * the payment's first transaction) and that is still unpaid after the lock's TTL — the instance
 * that recorded it died between the charge and the payment row, or gave up on the gateway.
 *
 * For each such order, under a fresh lock of the order (a new token, as the payment path takes
 * one), it asks the gateway for the charge made with the order's key (`GET /v1/charges?key=`,
 * sending the token so the gateway raises the resource's fence in the same transaction: an older
 * holder's charge can no longer land after the answer), then:
 * - a charge → records its payment (the charge's id and amount) and marks the order paid, in one
 *   fenced transaction;
 * - no charge, and the intent older than `cancelIntentAfterMs` → cancels the order (fenced), then
 *   returns its units to the product's stock under the product's lock. A reconciler killed between
 *   the two leaves the units out of stock: the report counts that as a lost update;
 * - no charge, and the intent younger → leaves the order to its payment's own deliveries (the
 *   queue's duplicate, a retry after a timeout): a payer frozen past its lease is not dead, and its
 *   payment is redelivered and paid by another instance. Cancelling it then took the unit from a
 *   buyer the shop had told "ordered" (and left it unsold if the crowd had gone). The lock taken
 *   and the lookup have raised the order's and the gateway's fences: the frozen payer's own charge
 *   and writes are refused when it wakes, and the delivery that pays holds a newer token still.
 *
 * It also settles every order still pending with no intent once it is older than
 * `abandonedAfterMs` (at least the lease): its instance died after the purchase committed and
 * before the payment's intent, or its buyer never paid. Under a fresh lock of the order (its fence
 * raised: a payer that comes later finds it cancelled), it is cancelled and its units returned to
 * the stock, as an intent with no charge is. Until then the counts call it a violation
 * (shop-counts.ts: `unsettledOrders`).
 *
 * Its actions are counted from the database (a reconciled payment's `instance` ends with
 * {@link RECONCILER_SUFFIX}; cancelled orders have status `cancelled`), so the counts survive the
 * process that made them.
 */
import type { PrismaClient } from '../../../generated/prisma/client.js'
import type { PaymentGateway } from './payment-gateway.js'
import type { Protection } from './protection.js'
import { giveBackToSegment } from './segments.js'
import { lockResource } from './shop-keys.js'

/** Appended to the instance id on the payments the reconciler records. */
export const RECONCILER_SUFFIX = '/reconciler'

/** What one order's settlement did; `waiting`: an intent with no charge yet, younger than `cancelIntentAfterMs`. */
export type Settlement = 'paid' | 'cancelled' | 'already-settled' | 'waiting'

/** What one pass did. */
export interface ReconcilePass {
  /** Orders found with an unpaid intent older than the age limit. */
  readonly checked: number
  readonly paid: number
  readonly cancelled: number
  /** Intents with no charge yet, left to their payment's deliveries (younger than `cancelIntentAfterMs`). */
  readonly waiting: number
  /** Orders that failed to settle this pass (lock timeout, gateway down): tried again next pass. */
  readonly failed: number
}

/** What {@link Reconciler} needs. */
export interface ReconcilerDeps {
  /** The plain client: the candidates are listed outside any lock. */
  readonly db: Pick<PrismaClient, 'order' | 'stockSegment'>
  readonly protection: Protection
  readonly gateway: Pick<PaymentGateway, 'findCharge'>
  /** The process's name; its reconciled payments are recorded as `<instanceId>/reconciler`. */
  readonly instanceId: string
  /** An intent younger than this (ms) may still be in the hands of a live payer: left alone. The lock's TTL. */
  readonly minAgeMs: number
  /**
   * An order pending with no intent this long (ms) after it was made is abandoned: cancelled, its
   * units returned. Default: `minAgeMs`. A pass's own `minAgeMs` (0 at the end of a run) bounds it too.
   */
  readonly abandonedAfterMs?: number
  /**
   * An intent with no charge is cancelled only once it is this old (ms); younger, it is left to the
   * payment's own deliveries, which may still pay it (a payer frozen past its lease is overtaken by
   * the queue's next delivery). Set it to the window in which a payment is delivered again. Default:
   * `minAgeMs`. A pass's own `minAgeMs` of 0 (the end of a run) cancels every one.
   */
  readonly cancelIntentAfterMs?: number
  /** Orders settled per pass, at most. Default 500. */
  readonly batch?: number
  readonly logError?: (error: unknown) => void
}

/**
 * Settles unpaid intents; {@link Reconciler.runOnce} is one pass, {@link Reconciler.start} runs a
 * pass now and then every `intervalMs` (never two at once).
 * @example
 * ```ts
 * const reconciler = new Reconciler({ db: prisma, protection, gateway, instanceId: 'shop-1', minAgeMs: 1000 })
 * const stop = reconciler.start(2000)
 * // ...
 * await stop()
 * ```
 */
export class Reconciler {
  readonly #deps: ReconcilerDeps
  #totals = { passes: 0, paid: 0, cancelled: 0, failed: 0 }

  constructor(deps: ReconcilerDeps) {
    this.#deps = deps
  }

  /** What this reconciler did since it was made. */
  get totals(): { passes: number; paid: number; cancelled: number; failed: number } {
    return { ...this.#totals }
  }

  /** One pass over the unpaid intents older than `minAgeMs` (override: `0` at the end of a run, when no payer is left). */
  async runOnce(minAgeMs = this.#deps.minAgeMs): Promise<ReconcilePass> {
    const { db } = this.#deps
    // A pass of age 0 (the end of a run: no payer left) settles every pending order.
    const abandonedMs = minAgeMs === 0 ? 0 : Math.max(minAgeMs, this.#deps.abandonedAfterMs ?? minAgeMs)
    const cancelMs = minAgeMs === 0 ? 0 : Math.max(minAgeMs, this.#deps.cancelIntentAfterMs ?? minAgeMs)
    const now = Date.now()
    const candidates = await db.order.findMany({
      where: {
        status: 'pending',
        OR: [
          { paymentKey: { not: null }, paymentIntentAt: { lte: new Date(now - minAgeMs) } },
          { paymentKey: null, createdAt: { lte: new Date(now - abandonedMs) } },
        ],
      },
      select: { id: true },
      orderBy: { id: 'asc' },
      take: this.#deps.batch ?? 500,
    })
    const pass = { checked: candidates.length, paid: 0, cancelled: 0, waiting: 0, failed: 0 }
    for (const { id } of candidates) {
      try {
        const settled = await this.#settle(id, cancelMs)
        if (settled === 'paid') pass.paid++
        else if (settled === 'cancelled') pass.cancelled++
        else if (settled === 'waiting') pass.waiting++
      } catch (error) {
        pass.failed++
        this.#deps.logError?.(error)
      }
    }
    this.#totals.passes++
    this.#totals.paid += pass.paid
    this.#totals.cancelled += pass.cancelled
    this.#totals.failed += pass.failed
    return pass
  }

  /**
   * Settles order `orderId` (see the module's comment); a settled order is left as it is. An intent
   * with no charge is cancelled once older than `cancelIntentAfterMs` (default `minAgeMs`).
   */
  settle(orderId: number): Promise<Settlement> {
    return this.#settle(orderId, this.#deps.cancelIntentAfterMs ?? this.#deps.minAgeMs)
  }

  async #settle(orderId: number, cancelIntentAfterMs: number): Promise<Settlement> {
    const { protection, gateway, instanceId } = this.#deps
    const row = { model: 'Order', where: { id: orderId } } as const
    const outcome = await protection.run(lockResource.order(orderId), async (guard) => {
      // Read with the fence raised: from here on, an older holder's write of the order fails.
      const order = await guard.transaction(row, (tx) =>
        tx.order.findUnique({ where: { id: orderId }, include: { product: { select: { id: true, sku: true } } } }),
      )
      if (order === null || order.status !== 'pending') return { kind: 'already-settled' as const }
      // No intent: never charged (a charge is only ever made after its intent). The fence raised
      // above keeps a payer that comes later from recording one: it finds the order cancelled.
      const charge = order.paymentKey === null ? null : await gateway.findCharge(order.paymentKey, guard.outsideCall(order.paymentKey).fencing)
      if (charge !== null) {
        await guard.write(row, async (tx) => {
          await tx.order.update({ where: { id: orderId }, data: { status: 'paid' } })
          await tx.payment.create({
            data: {
              orderId,
              amountCents: charge.amountCents,
              instance: `${instanceId}${RECONCILER_SUFFIX}`,
              gatewayChargeId: charge.chargeId,
            },
          })
        })
        return { kind: 'paid' as const }
      }
      if (order.paymentIntentAt !== null && Date.now() - order.paymentIntentAt.getTime() < cancelIntentAfterMs) return { kind: 'waiting' as const }
      await guard.write(row, (tx) => tx.order.update({ where: { id: orderId }, data: { status: 'cancelled' } }))
      return { kind: 'cancelled' as const, sku: order.product.sku, productId: order.product.id, segment: order.segment, quantity: order.quantity }
    })
    if (outcome.kind !== 'cancelled') return outcome.kind
    if (outcome.segment !== null) {
      // A unit of segmented stock (segments.ts) goes back to its segment, under that segment's lock.
      await giveBackToSegment(protection, this.#deps.db, outcome.sku, outcome.productId, outcome.segment, outcome.quantity)
      return 'cancelled'
    }
    // The units go back under the product's own lock (its fence is the product's), as a purchase takes them.
    const productRow = { model: 'Product', where: { sku: outcome.sku } } as const
    await protection.run(lockResource.product(outcome.sku), (guard) =>
      guard.transaction(productRow, (tx) =>
        tx.product.update({ where: { sku: outcome.sku }, data: { stock: { increment: outcome.quantity } } }),
      ),
    )
    return 'cancelled'
  }

  /** Runs a pass now, then one every `intervalMs` after the previous ended. Returns a stop that waits for the pass running. */
  start(intervalMs: number): () => Promise<void> {
    let stopped = false
    let timer: NodeJS.Timeout | undefined
    let running: Promise<unknown> = Promise.resolve()
    const tick = () => {
      if (stopped) return
      running = this.runOnce()
        .catch((error: unknown) => this.#deps.logError?.(error))
        .finally(() => {
          if (!stopped) timer = setTimeout(tick, intervalMs)
        })
    }
    tick()
    return async () => {
      stopped = true
      clearTimeout(timer)
      await running
    }
  }
}
