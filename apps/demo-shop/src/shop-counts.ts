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
 *   read-modify-write overwrote (0 when every sale's stock write survived);
 * - money, the gateway's ledger against the shop's orders (a charge belongs to an order when its
 *   orderId is the order's and its key is the order's reference, or it was sent without a key):
 *   charged-but-unpaid orders (money moved, no paid order), paid-but-uncharged orders (a paid
 *   order no charge backs), orders charged another amount than theirs, and charges no order
 *   owns (a key that names no order's reference: e.g. an old run's charge landing after a reset).
 *
 * A segmented product (segments.ts) is counted per segment: its stock is the sum of its
 * segments', its oversold units and lost updates the sums of each segment's (from the orders'
 * `segment` and the stock each segment was seeded with), so a segment oversold while another
 * still holds units is counted.
 *
 * Units sold count the orders that are not cancelled (the reconciler returned their units).
 * `violations` counts each broken invariant once: per product the larger of oversold units and
 * lost updates (a sell-out with lost decrements shows the same units in both), plus the money
 * counts (an order left pending with no intent past its abandon age among them).
 */
import type { PrismaClient } from '../../../generated/prisma/client.js'
import { quoteIdent, SEED_TABLE, SEGMENT_SEED_TABLE } from './database.js'
import { RECONCILER_SUFFIX } from './reconciler.js'

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
  /** Stock segments (0: the stock is on the product). */
  readonly segments: number
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
  /**
   * Orders charged at the gateway that are not paid in the shop (money moved, never recorded),
   * but those whose payment is still in flight (`chargedUnpaidInFlight`).
   */
  readonly chargedUnpaidOrders: number
  /**
   * Orders charged and not yet paid whose intent is younger than `inFlightMs` (the lease): a payer
   * may still be recording the payment. Not a violation; older, the reconciler settles them.
   */
  readonly chargedUnpaidInFlight: number
  /** Paid orders without a charge in the ledger. */
  readonly paidUnchargedOrders: number
  /** Orders charged another amount than the order's. */
  readonly amountMismatchOrders: number
  /** Ledger charges whose key names no order of the shop. */
  readonly unmatchedCharges: number
  /**
   * Orders still pending with no payment intent past the abandon age (`abandonedAfterMs`): their
   * instance died after the purchase, or their buyer never paid; their unit is held. A violation
   * until the reconciler cancels them and returns the unit.
   */
  readonly unsettledOrders: number
  /** Payments the reconciler recorded (from a charge found in the ledger). */
  readonly reconciledPaid: number
  /** Orders the reconciler cancelled (no charge for their intent), their units returned. */
  readonly cancelledOrders: number
  /** Each broken invariant once (see the module's comment): 0 when the shop is correct. */
  readonly violations: number
}

interface MoneyRow {
  charged_unpaid: number
  paid_uncharged: number
  amount_mismatch: number
  unmatched: number
  reconciled_paid: number
  unsettled: number
  charged_in_flight: number
}

/** The money invariants in one statement: the ledger matched to the orders (see the module's comment). */
function moneySql(schema: string, abandonedAfterMs: number, inFlightMs: number): string {
  const s = quoteIdent(schema)
  // A payment still in flight: the order pending, its intent younger than the lease.
  const inFlight = `o.status = 'pending' AND o."paymentIntentAt" IS NOT NULL AND o."paymentIntentAt" > (now() AT TIME ZONE 'UTC') - interval '${inFlightMs} milliseconds'`
  const matched = `SELECT c."orderId", c."amountCents" FROM ${s}."GatewayCharge" c JOIN ${s}."Order" o ON o.id = c."orderId" AND (c."idempotencyKey" IS NULL OR c."idempotencyKey" = o.reference)`
  return `WITH m AS (${matched})
SELECT
  (SELECT count(*)::int FROM ${s}."Order" o WHERE o.status <> 'paid' AND EXISTS (SELECT 1 FROM m WHERE m."orderId" = o.id) AND NOT (${inFlight})) AS charged_unpaid,
  (SELECT count(*)::int FROM ${s}."Order" o WHERE o.status <> 'paid' AND EXISTS (SELECT 1 FROM m WHERE m."orderId" = o.id) AND (${inFlight})) AS charged_in_flight,
  (SELECT count(*)::int FROM ${s}."Order" o WHERE o.status = 'paid' AND NOT EXISTS (SELECT 1 FROM m WHERE m."orderId" = o.id)) AS paid_uncharged,
  (SELECT count(DISTINCT o.id)::int FROM ${s}."Order" o JOIN m ON m."orderId" = o.id WHERE o."amountCents" IS NOT NULL AND m."amountCents" <> o."amountCents") AS amount_mismatch,
  (SELECT count(*)::int FROM ${s}."GatewayCharge" c WHERE c."idempotencyKey" IS NOT NULL AND NOT EXISTS (SELECT 1 FROM ${s}."Order" o WHERE o.id = c."orderId" AND o.reference = c."idempotencyKey")) AS unmatched,
  (SELECT count(*)::int FROM ${s}."Payment" p WHERE p.instance LIKE '%${RECONCILER_SUFFIX}') AS reconciled_paid,
  (SELECT count(*)::int FROM ${s}."Order" o WHERE o.status = 'pending' AND o."paymentKey" IS NULL
     AND o."createdAt" <= (now() AT TIME ZONE 'UTC') - interval '${abandonedAfterMs} milliseconds') AS unsettled`
}

type CountsDb = Pick<PrismaClient, 'product' | 'order' | 'payment' | 'gatewayCharge' | '$queryRawUnsafe'>

interface SegmentRow {
  productId: number
  segment: number
  stock: number
  sold: number
  initialStock: number | null
}

/** Each segment's stock, units sold from it (orders not cancelled) and seeded stock (null without the seed table). */
async function readSegments(db: CountsDb, schema: string): Promise<SegmentRow[]> {
  const s = quoteIdent(schema)
  const sold = `SELECT "productId", segment, sum(quantity)::int AS sold FROM ${s}."Order" WHERE status <> 'cancelled' AND segment IS NOT NULL GROUP BY 1, 2`
  const base = `SELECT g."productId", g.segment, g.stock, coalesce(o.sold, 0)::int AS sold`
  const from = `FROM ${s}."StockSegment" g LEFT JOIN (${sold}) o ON o."productId" = g."productId" AND o.segment = g.segment`
  try {
    return await db.$queryRawUnsafe<SegmentRow[]>(
      `${base}, seed."initialStock" ${from} JOIN ${s}."Product" p ON p.id = g."productId" LEFT JOIN ${s}.${quoteIdent(SEGMENT_SEED_TABLE)} seed ON seed.sku = p.sku AND seed.segment = g.segment`,
    )
  } catch {
    return db.$queryRawUnsafe<SegmentRow[]>(`${base}, NULL::int AS "initialStock" ${from}`)
  }
}

/** Options of {@link countShop}. */
export interface CountOptions {
  /** An order pending with no intent this long (ms) counts as unsettled. Default 0: every one (a run that has ended). */
  readonly abandonedAfterMs?: number
  /** A charged order whose intent is younger than this (ms; the lease) is in flight, not a violation. Default 0: none (a run that has ended). */
  readonly inFlightMs?: number
}

/** Counts everything from the database in `schema` (the schema the client queries). */
export async function countShop(db: CountsDb, schema: string, options: CountOptions = {}): Promise<ShopCounts> {
  const abandonedAfterMs = options.abandonedAfterMs ?? 0
  const inFlightMs = options.inFlightMs ?? 0
  for (const [name, value] of [['abandonedAfterMs', abandonedAfterMs], ['inFlightMs', inFlightMs]] as const)
    if (!Number.isSafeInteger(value) || value < 0) throw new RangeError(`countShop: ${name} must be a non-negative integer (got ${value})`)
  const [products, sold, paidOrders, payments, doublePaid, gatewayCharges, charged, seeds, money, cancelledOrders, segmentRows] =
    await Promise.all([
      db.product.findMany({ orderBy: { id: 'asc' }, select: { id: true, sku: true, name: true, stock: true } }),
      db.order.groupBy({
        by: ['productId'],
        where: { status: { not: 'cancelled' } },
        _sum: { quantity: true },
        _count: { _all: true },
      }),
      db.order.count({ where: { status: 'paid' } }),
      db.payment.count(),
      db.payment.groupBy({ by: ['orderId'], _count: { _all: true }, having: { orderId: { _count: { gt: 1 } } } }),
      db.gatewayCharge.count(),
      db.gatewayCharge.groupBy({ by: ['orderId'], _count: { _all: true }, having: { orderId: { _count: { gt: 1 } } } }),
      readInitialStock(db, schema),
      db.$queryRawUnsafe<MoneyRow[]>(moneySql(schema, abandonedAfterMs, inFlightMs)).then((rows) => rows[0] as MoneyRow),
      db.order.count({ where: { status: 'cancelled' } }),
      readSegments(db, schema),
    ])
  const soldBy = new Map(sold.map((s) => [s.productId, { units: s._sum.quantity ?? 0, orders: s._count._all }]))
  const rows: ProductCounts[] = products.map((p) => {
    const s = soldBy.get(p.id) ?? { units: 0, orders: 0 }
    const initialStock = seeds?.get(p.sku) ?? null
    const segments = segmentRows.filter((g) => g.productId === p.id)
    if (segments.length > 0) {
      const seeded = segments.every((g) => g.initialStock !== null)
      const total = (f: (g: SegmentRow) => number) => segments.reduce((a, g) => a + f(g), 0)
      return {
        sku: p.sku,
        name: p.name,
        initialStock,
        stock: p.stock + total((g) => g.stock),
        unitsSold: s.units,
        orders: s.orders,
        oversoldUnits: seeded ? total((g) => Math.max(0, g.sold - (g.initialStock as number))) : 0,
        lostUpdates: seeded ? total((g) => Math.abs(g.stock + g.sold - (g.initialStock as number))) : null,
        segments: segments.length,
      }
    }
    return {
      sku: p.sku,
      name: p.name,
      initialStock,
      stock: p.stock,
      unitsSold: s.units,
      orders: s.orders,
      oversoldUnits: initialStock === null ? 0 : Math.max(0, s.units - initialStock),
      lostUpdates: initialStock === null ? null : Math.abs(p.stock + s.units - initialStock),
      segments: 0,
    }
  })
  const sum = (f: (p: ProductCounts) => number) => rows.reduce((a, p) => a + f(p), 0)
  const oversoldUnits = sum((p) => p.oversoldUnits)
  const lostUpdates = sum((p) => p.lostUpdates ?? 0)
  const doubleChargedOrders = charged.length
  const stockViolations = sum((p) => Math.max(p.oversoldUnits, p.lostUpdates ?? 0))
  const moneyViolations = money.charged_unpaid + money.paid_uncharged + money.amount_mismatch + money.unmatched + money.unsettled
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
    chargedUnpaidOrders: money.charged_unpaid,
    chargedUnpaidInFlight: money.charged_in_flight,
    paidUnchargedOrders: money.paid_uncharged,
    amountMismatchOrders: money.amount_mismatch,
    unmatchedCharges: money.unmatched,
    unsettledOrders: money.unsettled,
    reconciledPaid: money.reconciled_paid,
    cancelledOrders,
    violations: stockViolations + doubleChargedOrders + moneyViolations,
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
