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
 * cannot reach it: the payment records its intent (the charge's idempotency key, `order:<id>`)
 * in tx1, and the protection sends that key and the lock's token with the charge, so the gateway
 * answers a second holder's charge with the first charge, and refuses an older holder's.
 */
import type { PrismaClient } from '../../../generated/prisma/client.js'
import type { PaymentGateway } from './payment-gateway.js'
import type { Protection } from './protection.js'
import { lockResource } from './shop-keys.js'

/** Told when the code enters an external call while it may hold a lock: the chaos' target. */
export interface ShopObserver {
  externalCall(call: { operation: 'authorize' | 'charge'; resource: string; token: bigint | undefined }): void
}

/** What a purchase did. */
export type PurchaseResult =
  | { kind: 'ordered'; sku: string; orderId: number; stockLeft: number; token: bigint | undefined }
  | { kind: 'sold-out'; sku: string }
  | { kind: 'unknown-product'; sku: string }

/** What a payment did. `already-paid` is the idempotent answer to a retried or duplicated payment. */
export type PaymentResult =
  | { kind: 'paid'; orderId: number; paymentId: number; amountCents: number; chargeId: string; token: bigint | undefined }
  | { kind: 'already-paid'; orderId: number }
  | { kind: 'unknown-order'; orderId: number }

/** What {@link ShopService} needs. */
export interface ShopDeps {
  /** The plain client, for existence checks made before taking any lock. */
  readonly db: Pick<PrismaClient, 'product' | 'order'>
  readonly protection: Protection
  readonly gateway: PaymentGateway
  /** This process's name, recorded on each payment to attribute double charges. */
  readonly instanceId: string
  readonly observer?: ShopObserver
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

  constructor(deps: ShopDeps) {
    this.#deps = deps
  }

  /** Buys one unit of `sku` for `buyerId` under the lock `product:<sku>`. */
  async purchase(sku: string, buyerId: string): Promise<PurchaseResult> {
    const { db, protection, gateway, observer } = this.#deps
    // Checked before the lock, so an unknown sku costs no lock and mints no token. Products are
    // never deleted here, so a sku found once is remembered (one query less per purchase).
    if (!this.#knownSkus.has(sku)) {
      if ((await db.product.findUnique({ where: { sku }, select: { id: true } })) === null) return { kind: 'unknown-product', sku }
      if (this.#knownSkus.size < 10_000) this.#knownSkus.add(sku)
    }

    const row = { model: 'Product', where: { sku } } as const
    return protection.run(lockResource.product(sku), async (guard) => {
      const product = await guard.read(row)
      if (product === null) return { kind: 'unknown-product', sku }
      if (product.stock <= 0) return { kind: 'sold-out', sku }

      observer?.externalCall({ operation: 'authorize', resource: guard.resource, token: guard.token })
      await gateway.authorize({ buyerId, amountCents: product.priceCents })

      // The write-back computed from the read in tx1, as real code does: the lock is what is
      // supposed to make that read still current.
      const stockLeft = product.stock - 1
      const order = await guard.write(row, async (tx) => {
        await tx.product.update({ where: { sku }, data: { stock: stockLeft } })
        return tx.order.create({ data: { productId: product.id, buyerId, quantity: 1 } })
      })
      return { kind: 'ordered', sku, orderId: order.id, stockLeft, token: guard.token }
    })
  }

  /** Pays order `orderId` under the lock `order:<id>`; a second payment of a paid order is a no-op. */
  async pay(orderId: number): Promise<PaymentResult> {
    const { db, protection, gateway, observer, instanceId } = this.#deps
    if ((await db.order.findUnique({ where: { id: orderId }, select: { id: true } })) === null) return { kind: 'unknown-order', orderId }

    const row = { model: 'Order', where: { id: orderId } } as const
    // Named after the business operation, never after the lock or the token: every holder that
    // ever charges this order sends the same key.
    const chargeKey = `order:${orderId}`
    return protection.run(lockResource.order(orderId), async (guard) => {
      const order = await guard.transaction(row, async (tx) => {
        const found = await tx.order.findUnique({ where: { id: orderId }, include: { product: { select: { priceCents: true } } } })
        if (found === null || found.status === 'paid') return found
        // The intent, recorded before calling out: this order is about to be charged with this key.
        await tx.order.update({ where: { id: orderId }, data: { paymentKey: chargeKey } })
        return found
      })
      if (order === null) return { kind: 'unknown-order', orderId }
      if (order.status === 'paid') return { kind: 'already-paid', orderId }

      const amountCents = order.product.priceCents * order.quantity
      observer?.externalCall({ operation: 'charge', resource: guard.resource, token: guard.token })
      const charge = await gateway.charge({ orderId, amountCents }, guard.outsideCall(chargeKey))

      const payment = await guard.write(row, async (tx) => {
        // The order's (fenced) update first: a stale holder's transaction stops there.
        await tx.order.update({ where: { id: orderId }, data: { status: 'paid' } })
        return tx.payment.create({ data: { orderId, amountCents, instance: instanceId, gatewayChargeId: charge.chargeId } })
      })
      return { kind: 'paid', orderId, paymentId: payment.id, amountCents, chargeId: charge.chargeId, token: guard.token }
    })
  }
}
