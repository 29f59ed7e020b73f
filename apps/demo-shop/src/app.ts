/**
 * The shop's HTTP API, built from its dependencies: `main.ts` reads the
 * environment and wires real Redis, Prisma and the lock; tests build the same app on the same
 * real services.
 *
 * | route | answers |
 * | --- | --- |
 * | `POST /api/products/:sku/purchase {buyerId}` | 201 ordered · 409 `sold_out` · 404 unknown sku |
 * | `POST /api/orders/:id/pay` | 200 `paid` or `already_paid` · 202 `reconciling` (the gateway holds another call under the order's key: the reconciler settles it) · 409 `order_cancelled` · 404 unknown order |
 * | `GET /api/state` | stock, orders, payments, violation counts, locks held now |
 * | `GET /api/products` | the products and their stock |
 * | `GET /metrics` | this instance's Prometheus metrics |
 * | `GET /healthz` | 200 when the process serves |
 *
 * Failures every route may give: 400 malformed JSON / buyerId / order id / path encoding, a body
 * that does not decompress, an unknown Content-Encoding or charset; 413 a body over 16 KiB (once
 * decompressed); 409 `stale_write_rejected` (the database, or the payment gateway, refused a call
 * carrying an old fencing token: this instance's lock had expired; the message says which), 502 `gateway_error` (the
 * payment gateway failed; a retried payment is safe in `fenced` mode), 503 `lock_timeout` or
 * `lock_unavailable` (retry later).
 * Bad input never gives a 500; a 500 means a bug, and the process keeps serving.
 */
import { LockTimeoutError, LockUnavailableError } from '@fencelock/lock'
import express, { type ErrorRequestHandler, type Express, type Request, type Response } from 'express'
import { bodyParserFailure } from './body-parser-errors.js'
import { GatewayError } from './payment-gateway.js'
import type { ProductCounts, ShopCounts } from './shop-counts.js'
import type { HeldLock } from './held-locks.js'
import type { ProtectionMode } from './protection.js'
import type { ShopService } from './shop-service.js'

/** Largest accepted request body: 16 KiB. */
export const MAX_BODY_BYTES = 16 * 1024

// A sku is a short slug; anything else cannot name a product, so it is an unknown product (404).
const SKU = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/
// Buyer ids: a short opaque id (letters, digits, . _ : @ -).
const BUYER_ID = /^[A-Za-z0-9._:@-]{1,64}$/
// Order ids are PostgreSQL INTEGER serials: 1 to 2^31 - 1.
const ORDER_ID = /^[1-9][0-9]{0,9}$/
const MAX_ORDER_ID = 2_147_483_647

/** What `GET /api/state` returns. */
export interface ShopState {
  readonly instance: string
  readonly mode: ProtectionMode
  readonly at: string
  readonly products: ProductCounts[]
  readonly orders: number
  readonly paidOrders: number
  /** Payments recorded in the shop's database. */
  readonly payments: number
  /** Charges in the payment gateway's ledger. */
  readonly gatewayCharges: number
  /** What the reconciler settled: payments it recorded from the ledger, orders it cancelled. */
  readonly reconciled: { readonly paid: number; readonly cancelled: number }
  readonly violations: {
    readonly oversoldUnits: number
    /** Orders charged more than once at the gateway (its ledger). */
    readonly doubleChargedOrders: number
    /** Charges beyond the first of each order, at the gateway. */
    readonly extraCharges: number
    /** Orders with more than one payment recorded in the shop. */
    readonly doublePaidOrders: number
    readonly lostUpdates: number
    /** Orders charged at the gateway and not paid in the shop. */
    readonly chargedUnpaidOrders: number
    /** Paid orders with no charge in the ledger. */
    readonly paidUnchargedOrders: number
    /** Orders charged another amount than theirs. */
    readonly amountMismatchOrders: number
    /** Ledger charges whose key names no order. */
    readonly unmatchedCharges: number
    /** Orders pending with no payment intent past the abandon age (their unit held), until the reconciler cancels them. */
    readonly unsettledOrders: number
    /** Each broken invariant once. */
    readonly total: number
  }
  /** Work in flight, not violations: orders charged whose payment is still being recorded (intent younger than the lease). */
  readonly inFlight: { readonly chargedUnpaidOrders: number }
  readonly locks: HeldLock[]
}

/** Everything the app needs. */
export interface AppDeps {
  /** This process's name (`shop-1`), returned in answers so a client sees who served it. */
  readonly instanceId: string
  readonly mode: ProtectionMode
  readonly shop: Pick<ShopService, 'purchase' | 'pay'>
  /** Counts from the database (see shop-counts.ts). */
  readonly counts: () => Promise<ShopCounts>
  /** The locks held now, across instances (see held-locks.ts). */
  readonly heldLocks: () => Promise<HeldLock[]>
  /** Serves `/metrics`: `metricsHandler(registry)` of `@fencelock/metrics`. */
  readonly metrics: (req: Request, res: Response, next: (error?: unknown) => void) => unknown
  /** True for the fencing package's stale-token error (the class lives there, the app only maps it). */
  readonly isStaleWrite: (error: unknown) => boolean
  /** Where unexpected errors are logged. Default: console.error. */
  readonly logError?: (error: unknown) => void
  /**
   * The locks' lease, in ms (default 1000): a payment answered `in_progress` is to be delivered
   * again after half of it — the other delivery has paid by then, or, stalled, its lease is
   * about to run out (a holder renews it every third of it).
   */
  readonly lockTtlMs?: number
}

type ErrorBody = { error: string; message: string; instance: string }

/**
 * Builds the shop's express app.
 * @example
 * ```ts
 * const app = createApp({ instanceId: 'shop-1', mode: 'fenced', shop, counts, heldLocks, metrics: metricsHandler(registry), isStaleWrite })
 * app.listen(3000)
 * ```
 */
export function createApp(deps: AppDeps): Express {
  const { instanceId } = deps
  const logError = deps.logError ?? ((error: unknown) => console.error(`[${instanceId}]`, error))
  const inProgressRetryMs = Math.max(10, Math.ceil((deps.lockTtlMs ?? 1_000) / 2))
  const app = express()
  app.disable('x-powered-by')
  app.disable('etag')

  const fail = (res: Response, status: number, error: string, message: string) => {
    const body: ErrorBody = { error, message, instance: instanceId }
    res.status(status).json(body)
  }

  app.use(express.json({ limit: MAX_BODY_BYTES, strict: true }))

  app.get('/healthz', (_req, res) => {
    res.json({ ok: true, instance: instanceId, mode: deps.mode })
  })

  app.get('/metrics', (req, res, next) => deps.metrics(req, res, next))

  app.get('/api/products', async (_req, res) => {
    const counts = await deps.counts()
    res.json({ instance: instanceId, products: counts.products })
  })

  app.get('/api/state', async (_req, res) => {
    const [counts, locks] = await Promise.all([deps.counts(), deps.heldLocks().catch(() => [])])
    const state: ShopState = {
      instance: instanceId,
      mode: deps.mode,
      at: new Date().toISOString(),
      products: counts.products,
      orders: counts.orders,
      paidOrders: counts.paidOrders,
      payments: counts.payments,
      gatewayCharges: counts.gatewayCharges,
      reconciled: { paid: counts.reconciledPaid, cancelled: counts.cancelledOrders },
      violations: {
        oversoldUnits: counts.oversoldUnits,
        doubleChargedOrders: counts.doubleChargedOrders,
        extraCharges: counts.extraCharges,
        doublePaidOrders: counts.doublePaidOrders,
        lostUpdates: counts.lostUpdates,
        chargedUnpaidOrders: counts.chargedUnpaidOrders,
        paidUnchargedOrders: counts.paidUnchargedOrders,
        amountMismatchOrders: counts.amountMismatchOrders,
        unmatchedCharges: counts.unmatchedCharges,
        unsettledOrders: counts.unsettledOrders,
        total: counts.violations,
      },
      inFlight: { chargedUnpaidOrders: counts.chargedUnpaidInFlight },
      locks,
    }
    res.json(state)
  })

  app.post('/api/products/:sku/purchase', async (req, res) => {
    const sku = String(req.params.sku)
    if (!SKU.test(sku)) return fail(res, 404, 'unknown_product', `no product ${JSON.stringify(sku.slice(0, 64))}`)
    const buyerId = bodyField(req, 'buyerId')
    if (typeof buyerId !== 'string' || !BUYER_ID.test(buyerId)) {
      return fail(
        res,
        400,
        'invalid_buyer_id',
        'the body must be JSON {"buyerId": "<1 to 64 of A-Z a-z 0-9 . _ : @ ->"}',
      )
    }
    const result = await deps.shop.purchase(sku, buyerId)
    switch (result.kind) {
      case 'unknown-product':
        return fail(res, 404, 'unknown_product', `no product ${JSON.stringify(sku)}`)
      case 'sold-out':
        return fail(res, 409, 'sold_out', `${sku} is sold out`)
      case 'ordered':
        return res.status(201).json({
          result: 'ordered',
          orderId: result.orderId,
          sku,
          stockLeft: result.stockLeft,
          token: result.token?.toString() ?? null,
          instance: instanceId,
        })
    }
  })

  app.post('/api/orders/:id/pay', async (req, res) => {
    const id = String(req.params.id)
    if (!ORDER_ID.test(id) || Number(id) > MAX_ORDER_ID)
      return fail(res, 400, 'invalid_order_id', `order id must be an integer from 1 to ${MAX_ORDER_ID}`)
    const result = await deps.shop.pay(Number(id))
    switch (result.kind) {
      case 'unknown-order':
        return fail(res, 404, 'unknown_order', `no order ${id}`)
      case 'already-paid':
        return res.json({ result: 'already_paid', orderId: result.orderId, instance: instanceId })
      case 'cancelled':
        return fail(res, 409, 'order_cancelled', `order ${id} was cancelled: no charge was found for its payment`)
      case 'in-progress':
        res.setHeader('retry-after', String(Math.ceil(inProgressRetryMs / 1000)))
        return res.status(202).json({
          result: 'in_progress',
          orderId: result.orderId,
          message: 'another delivery of this payment is paying the order now; deliver it again after retryAfterMs',
          retryAfterMs: inProgressRetryMs,
          instance: instanceId,
        })
      case 'reconciling':
        return res.status(202).json({
          result: 'reconciling',
          orderId: result.orderId,
          message:
            'the payment gateway holds another call under this order’s key; the order is settled by the reconciler, do not retry',
          instance: instanceId,
        })
      case 'paid':
        return res.json({
          result: 'paid',
          orderId: result.orderId,
          paymentId: result.paymentId,
          amountCents: result.amountCents,
          token: result.token?.toString() ?? null,
          instance: instanceId,
        })
    }
  })

  app.use((req, res) => fail(res, 404, 'not_found', `no route ${req.method} ${req.path.slice(0, 100)}`))

  const onError: ErrorRequestHandler = (error: unknown, _req, res, next) => {
    if (res.headersSent) return next(error)
    const parser = bodyParserFailure(error)
    if (parser?.kind === 'too-large')
      return fail(res, 413, 'body_too_large', `the body must be at most ${MAX_BODY_BYTES} bytes`)
    if (parser !== undefined)
      return fail(
        res,
        400,
        { malformed: 'malformed_json', unsupported: 'unsupported_encoding', unreadable: 'unreadable_body' }[
          parser.kind
        ],
        parser.message,
      )
    // The router's: a path parameter (a sku, an order id) that is not valid percent-encoding.
    if (error instanceof URIError)
      return fail(res, 400, 'malformed_path', 'the path is not valid percent-encoded UTF-8')
    if (error instanceof GatewayError && error.isStaleToken) {
      return fail(
        res,
        409,
        'stale_write_rejected',
        'the payment gateway refused a charge with an old fencing token: this instance lost its lock; nothing was charged or written',
      )
    }
    if (deps.isStaleWrite(error)) {
      return fail(
        res,
        409,
        'stale_write_rejected',
        'the database refused a write with an old fencing token: this instance lost its lock; nothing was written',
      )
    }
    if (error instanceof LockTimeoutError) {
      res.setHeader('Retry-After', '1')
      return fail(res, 503, 'lock_timeout', `the lock ${error.resource} stayed held; retry later`)
    }
    if (error instanceof GatewayError) {
      return fail(
        res,
        502,
        'gateway_error',
        `the payment gateway answered ${error.status} ${error.code}; retry the payment (it is idempotent)`,
      )
    }
    if (error instanceof LockUnavailableError) {
      res.setHeader('Retry-After', '1')
      return fail(res, 503, 'lock_unavailable', 'Redis did not answer in time; retry later')
    }
    logError(error)
    return fail(res, 500, 'internal', 'unexpected error')
  }
  app.use(onError)
  return app
}

function bodyField(req: Request, name: string): unknown {
  const body: unknown = req.body
  if (body === null || typeof body !== 'object' || Array.isArray(body)) return undefined
  return Object.hasOwn(body, name) ? (body as Record<string, unknown>)[name] : undefined
}
