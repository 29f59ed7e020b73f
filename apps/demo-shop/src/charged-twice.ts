/**
 * The "charged twice" drill-down of a sale: the orders the gateway's ledger holds more than one
 * charge of, each charge with the instance that sent it and the token it held, and the payments
 * the shop recorded. The ledger knows the charge (and, under fencing, its token); the instances'
 * event logs (incident-log.ts) know who sent it and with which token; the payment rows know
 * which instance recorded which charge. Read before the sale's schema is dropped.
 */
import type { PrismaClient } from '../../../generated/prisma/client.js'
import type { ChargedTwiceOrder } from './dashboard/wire.js'
import type { RecordedEvent } from './incident-log.js'

/** Most orders listed. */
export const CHARGED_TWICE_LIMIT = 50

/** The drill-down's orders (at most {@link CHARGED_TWICE_LIMIT}, lowest ids first) and how many there are. */
export interface ChargedTwice {
  readonly orders: ChargedTwiceOrder[]
  readonly total: number
}

/**
 * Reads the orders charged more than once from the sale's database (`db` queries its schema).
 * @example
 * ```ts
 * const { orders, total } = await readChargedTwice(db, stats.flatMap((s) => s.events), saleStartMs)
 * ```
 */
export async function readChargedTwice(
  db: Pick<PrismaClient, 'gatewayCharge' | 'order' | 'payment'>,
  events: readonly RecordedEvent[],
  saleStartMs: number,
): Promise<ChargedTwice> {
  const twice = await db.gatewayCharge.groupBy({
    by: ['orderId'],
    _count: { _all: true },
    having: { orderId: { _count: { gt: 1 } } },
  })
  const ids = twice
    .map((t) => t.orderId)
    .sort((x, y) => x - y)
    .slice(0, CHARGED_TWICE_LIMIT)
  if (ids.length === 0) return { orders: [], total: 0 }
  const [charges, orders, payments] = await Promise.all([
    db.gatewayCharge.findMany({ where: { orderId: { in: ids } }, orderBy: { id: 'asc' } }),
    db.order.findMany({
      where: { id: { in: ids } },
      select: { id: true, status: true, amountCents: true, fenceToken: true },
    }),
    db.payment.findMany({ where: { orderId: { in: ids } }, orderBy: { id: 'asc' } }),
  ])
  // Who got each new charge back from the gateway, with which token.
  const sentBy = new Map<string, { instance: string; token: string | null }>()
  for (const e of events)
    if (e.kind === 'charge' && e.outcome === 'charged' && e.chargeId !== null)
      sentBy.set(e.chargeId, { instance: e.instance, token: e.token })
  const since = (at: Date) => at.getTime() - saleStartMs
  return {
    total: twice.length,
    orders: ids.map((id) => {
      const order = orders.find((o) => o.id === id)
      const paid = payments.filter((p) => p.orderId === id)
      return {
        orderId: id,
        status: order?.status ?? 'missing',
        amountCents: order?.amountCents ?? null,
        fenceToken: String(order?.fenceToken ?? 0n),
        charges: charges
          .filter((c) => c.orderId === id)
          .map((c) => {
            const sender = sentBy.get(c.chargeId)
            const payment = paid.find((p) => p.gatewayChargeId === c.chargeId)
            return {
              chargeId: c.chargeId,
              atMs: since(c.createdAt),
              amountCents: c.amountCents,
              idempotencyKey: c.idempotencyKey,
              instance: sender?.instance ?? payment?.instance ?? null,
              token: sender?.token ?? (c.fencingToken === null ? null : String(c.fencingToken)),
              paymentRecorded: payment !== undefined,
            }
          }),
        payments: paid.map((p) => ({ instance: p.instance, chargeId: p.gatewayChargeId, atMs: since(p.createdAt) })),
      }
    }),
  }
}
