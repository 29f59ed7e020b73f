/**
 * The shop's numbers, counted from the database — never from what the code believes it did.
 * The report after a run and `GET /api/state` both use this one function.
 *
 * - units sold: the sum of the orders' quantities;
 * - oversold units: units sold beyond the stock the product was seeded with;
 * - double-charged orders: orders charged more than once in the payment gateway's own ledger
 *   (`GatewayCharge`), where the money moves — not the shop's payment rows, which a stale holder
 *   may fail to write after its card charge went through;
 * - lost updates: |remaining stock + units sold − initial stock|, the decrements that a stale
 *   read-modify-write overwrote (0 when every sale's stock write survived).
 */
import type { PrismaClient } from '../../../generated/prisma/client.js'
import { quoteIdent, SEED_TABLE } from './database.js'

/** One product's numbers. `initialStock` (and so `lostUpdates`) is null when the schema was not seeded by the demo. */
export interface ProductCounts {
  readonly sku: string
  readonly name: string
  readonly initialStock: number | null
  readonly stock: number
  readonly unitsSold: number
  readonly orders: number
  readonly oversoldUnits: number
  readonly lostUpdates: number | null
}

/** The whole shop's numbers. */
export interface ShopCounts {
  readonly products: ProductCounts[]
  readonly orders: number
  readonly paidOrders: number
  /** Payments recorded in the shop's database. */
  readonly payments: number
  /** Orders with more than one payment recorded in the shop (the shop's own view, not the money). */
  readonly doublePaidOrders: number
  /** Charges in the gateway's ledger. */
  readonly gatewayCharges: number
  readonly unitsSold: number
  readonly oversoldUnits: number
  /** Orders charged more than once at the gateway (its ledger). */
  readonly doubleChargedOrders: number
  /** Charges beyond the first of each order, at the gateway. */
  readonly extraCharges: number
  readonly lostUpdates: number
  /** oversold units + double-charged orders + lost updates: 0 when the shop is correct. */
  readonly violations: number
}

type CountsDb = Pick<PrismaClient, 'product' | 'order' | 'payment' | 'gatewayCharge' | '$queryRawUnsafe'>

/** Counts everything from the database in `schema` (the schema the client queries). */
export async function countShop(db: CountsDb, schema: string): Promise<ShopCounts> {
  const [products, sold, paidOrders, payments, doublePaid, gatewayCharges, charged, seeds] = await Promise.all([
    db.product.findMany({ orderBy: { id: 'asc' }, select: { id: true, sku: true, name: true, stock: true } }),
    db.order.groupBy({ by: ['productId'], _sum: { quantity: true }, _count: { _all: true } }),
    db.order.count({ where: { status: 'paid' } }),
    db.payment.count(),
    db.payment.groupBy({ by: ['orderId'], _count: { _all: true }, having: { orderId: { _count: { gt: 1 } } } }),
    db.gatewayCharge.count(),
    db.gatewayCharge.groupBy({ by: ['orderId'], _count: { _all: true }, having: { orderId: { _count: { gt: 1 } } } }),
    readInitialStock(db, schema),
  ])
  const soldBy = new Map(sold.map((s) => [s.productId, { units: s._sum.quantity ?? 0, orders: s._count._all }]))
  const rows: ProductCounts[] = products.map((p) => {
    const s = soldBy.get(p.id) ?? { units: 0, orders: 0 }
    const initialStock = seeds?.get(p.sku) ?? null
    return {
      sku: p.sku,
      name: p.name,
      initialStock,
      stock: p.stock,
      unitsSold: s.units,
      orders: s.orders,
      oversoldUnits: initialStock === null ? 0 : Math.max(0, s.units - initialStock),
      lostUpdates: initialStock === null ? null : Math.abs(p.stock + s.units - initialStock),
    }
  })
  const sum = (f: (p: ProductCounts) => number) => rows.reduce((a, p) => a + f(p), 0)
  const oversoldUnits = sum((p) => p.oversoldUnits)
  const lostUpdates = sum((p) => p.lostUpdates ?? 0)
  const doubleChargedOrders = charged.length
  return {
    products: rows,
    orders: sum((p) => p.orders),
    paidOrders,
    payments,
    doublePaidOrders: doublePaid.length,
    gatewayCharges,
    unitsSold: sum((p) => p.unitsSold),
    oversoldUnits,
    doubleChargedOrders,
    extraCharges: charged.reduce((a, c) => a + c._count._all - 1, 0),
    lostUpdates,
    violations: oversoldUnits + doubleChargedOrders + lostUpdates,
  }
}

async function readInitialStock(db: CountsDb, schema: string): Promise<Map<string, number> | undefined> {
  try {
    const rows = await db.$queryRawUnsafe<{ sku: string; initialStock: number }[]>(
      `SELECT sku, "initialStock" FROM ${quoteIdent(schema)}.${quoteIdent(SEED_TABLE)}`,
    )
    return new Map(rows.map((r) => [r.sku, Number(r.initialStock)]))
  } catch {
    // A schema seeded by `npm run db:seed` has no seed table: lost updates cannot be counted.
    return undefined
  }
}
