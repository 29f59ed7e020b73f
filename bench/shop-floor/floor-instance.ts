// One instance of the floor shop (issue 34, bench:shop's floor): the flash sale's purchase and
// payment written as directly as they can be while keeping every guarantee the shop's `fenced`
// mode gives — node:http, ioredis, pg; no framework, no ORM. Forked by the Supervisor of
// @fencelock/demo-shop (it speaks its IPC: `ready`, `shutdown`), on the shop's own schema, so the
// run is counted by the shop's countShop like every other sale.
//
// A purchase: the product's lease (its token) → the gateway's authorization → ONE statement that
// raises the product's fence, takes a unit if there is one, and inserts the order. A payment: the
// order read before any lock (a paid order's repeat ends there) → the order's lease → the intent
// (one conditional UPDATE that raises the order's fence; its key is the order's reference) → the
// charge, carrying that key and the token → ONE statement that marks the order paid under the
// fence and records the payment. Every write names the token in its condition (`"fenceToken" <=
// $token`), and the guard in the database refuses any write that would lower a fence.
import { Agent, type IncomingMessage, type ServerResponse } from 'node:http'
import { Redis } from 'ioredis'
import pg from 'pg'
import { BadBody, envPort, envString, postJson, readJson, sendJson, serveDrained } from './floor-http.js'
import { FloorLocks, FloorLockTimeoutError, type FloorLease } from './floor-lock.js'

const env = process.env
const instanceId = env.SHOP_INSTANCE_ID ?? `floor-${process.pid}`
const schema = envString(env, 'FLOOR_SCHEMA')
if (!/^[a-z_][a-z0-9_]{0,62}$/.test(schema)) throw new RangeError(`FLOOR_SCHEMA must be a plain schema name (got ${JSON.stringify(schema)})`)
const gatewayUrl = envString(env, 'FLOOR_GATEWAY_URL').replace(/\/+$/, '')
const ttlMs = Number(env.FLOOR_TTL_MS ?? '1000')
const s = `"${schema}"`

const SQL = {
  product: `SELECT id, "priceCents" FROM ${s}."Product" WHERE sku = $1`,
  stock: `SELECT stock, "fenceToken" FROM ${s}."Product" WHERE sku = $1`,
  // The fence raised, a unit taken when there is one, the order inserted: one statement.
  purchase: `WITH p AS (
  UPDATE ${s}."Product" SET stock = stock - 1, "fenceToken" = $2::bigint WHERE sku = $1 AND stock > 0 AND "fenceToken" <= $2::bigint
  RETURNING id, stock, "priceCents"
), o AS (
  INSERT INTO ${s}."Order" ("productId", "buyerId", quantity, "amountCents") SELECT id, $3::text, 1, "priceCents" FROM p RETURNING id
)
SELECT o.id, p.stock FROM o, p`,
  order: `SELECT status, "amountCents" FROM ${s}."Order" WHERE id = $1`,
  orderState: `SELECT status, "fenceToken" FROM ${s}."Order" WHERE id = $1`,
  // The intent, under the order's fence: only a pending order is about to be charged.
  intent: `UPDATE ${s}."Order" SET "paymentKey" = reference, "paymentIntentAt" = now() AT TIME ZONE 'UTC', "fenceToken" = $2::bigint
WHERE id = $1 AND status = 'pending' AND "fenceToken" <= $2::bigint RETURNING reference, "amountCents"`,
  // The order paid under its fence and the payment recorded: one statement.
  paid: `WITH o AS (
  UPDATE ${s}."Order" SET status = 'paid', "fenceToken" = $2::bigint WHERE id = $1 AND "fenceToken" <= $2::bigint RETURNING id, "amountCents"
)
INSERT INTO ${s}."Payment" ("orderId", "amountCents", instance, "gatewayChargeId") SELECT id, "amountCents", $3::text, $4::text FROM o RETURNING id`,
}

const pool = new pg.Pool({
  connectionString: envString(env, 'FLOOR_DATABASE_URL'),
  max: Number(env.FLOOR_DB_POOL_SIZE ?? '4'),
  // Named after the run's schema, so the bench finds this run's PostgreSQL backends.
  application_name: schema,
})
const redis = new Redis(envString(env, 'FLOOR_REDIS_URL'), { maxRetriesPerRequest: 2 })
const subscriber = new Redis(envString(env, 'FLOOR_REDIS_URL'), { maxRetriesPerRequest: 2 })
const locks = await FloorLocks.open(redis, subscriber, { prefix: envString(env, 'FLOOR_LOCK_PREFIX'), ttlMs, waitMs: 30_000 })
const agent = new Agent({ keepAlive: true, maxSockets: 64, timeout: 4_000 })

const products = new Map<string, { id: number; priceCents: number }>()
const soldOut = new Set<string>()
const BUYER_ID = /^[A-Za-z0-9._:@-]{1,64}$/
const PURCHASE_PATH = /^\/api\/products\/([A-Za-z0-9][A-Za-z0-9._-]{0,63})\/purchase$/
const PAY_PATH = /^\/api\/orders\/([1-9][0-9]{0,9})\/pay$/

/** A write refused by a fence: this instance's lease had run out. */
class StaleWrite extends Error {}

const fail = (res: ServerResponse, status: number, error: string, message: string) => sendJson(res, status, { error, message, instance: instanceId })

async function withLease<T>(resource: string, fn: (lease: FloorLease) => Promise<T>): Promise<T> {
  const lease = await locks.acquire(resource)
  try {
    return await fn(lease)
  } finally {
    await lease.release()
  }
}

async function purchase(res: ServerResponse, sku: string, body: Record<string, unknown>): Promise<void> {
  const buyerId = body.buyerId
  if (typeof buyerId !== 'string' || !BUYER_ID.test(buyerId)) return fail(res, 400, 'invalid_buyer_id', 'buyerId must be 1 to 64 of A-Z a-z 0-9 . _ : @ -')
  let product = products.get(sku)
  if (product === undefined) {
    const { rows } = await pool.query<{ id: number; priceCents: number }>(SQL.product, [sku])
    if (rows[0] === undefined) return fail(res, 404, 'unknown_product', `no product ${JSON.stringify(sku)}`)
    product = rows[0]
    products.set(sku, product)
  }
  // A sku seen sold out: a read decides before any lock; the sale itself is decided under it.
  if (soldOut.has(sku)) {
    const { rows } = await pool.query<{ stock: number }>(SQL.stock, [sku])
    if ((rows[0]?.stock ?? 0) <= 0) return fail(res, 409, 'sold_out', `${sku} is sold out`)
    soldOut.delete(sku)
  }
  const price = product.priceCents
  const answer = await withLease(`product:${sku}`, async ({ token }) => {
    const auth = await postJson(agent, `${gatewayUrl}/v1/authorizations`, { buyerId, amountCents: price }, {}, 10_000)
    if (auth.status !== 201) return { kind: 'gateway' as const, status: auth.status }
    const { rows } = await pool.query<{ id: number; stock: number }>(SQL.purchase, [sku, String(token), buyerId])
    if (rows[0] !== undefined) return { kind: 'ordered' as const, orderId: rows[0].id, stockLeft: rows[0].stock, token }
    // Nothing written: the stock is gone, or a newer token has raised the fence.
    const now = await pool.query<{ stock: number; fenceToken: string }>(SQL.stock, [sku])
    if (BigInt(now.rows[0]?.fenceToken ?? '0') > token) throw new StaleWrite()
    soldOut.add(sku)
    return { kind: 'sold-out' as const }
  })
  if (answer.kind === 'gateway') return fail(res, 502, 'gateway_error', `the payment gateway answered ${answer.status}`)
  if (answer.kind === 'sold-out') return fail(res, 409, 'sold_out', `${sku} is sold out`)
  if (answer.stockLeft <= 0) soldOut.add(sku)
  sendJson(res, 201, { result: 'ordered', orderId: answer.orderId, sku, stockLeft: answer.stockLeft, token: String(answer.token), instance: instanceId })
}

async function pay(res: ServerResponse, orderId: number): Promise<void> {
  const { rows } = await pool.query<{ status: string }>(SQL.order, [orderId])
  const found = rows[0]
  if (found === undefined) return fail(res, 404, 'unknown_order', `no order ${orderId}`)
  if (found.status === 'paid') return sendJson(res, 200, { result: 'already_paid', orderId, instance: instanceId })
  if (found.status === 'cancelled') return fail(res, 409, 'order_cancelled', `order ${orderId} was cancelled`)
  const resource = `order:${orderId}`
  // The answer is sent once the lease is given back, as the shop answers after its lock's release.
  const answer = await withLease(resource, async ({ token }): Promise<() => void> => {
    const intent = await pool.query<{ reference: string; amountCents: number }>(SQL.intent, [orderId, String(token)])
    const order = intent.rows[0]
    if (order === undefined) {
      const now = (await pool.query<{ status: string; fenceToken: string }>(SQL.orderState, [orderId])).rows[0]
      if (now?.status === 'paid') return () => sendJson(res, 200, { result: 'already_paid', orderId, instance: instanceId })
      if (now?.status === 'cancelled') return () => fail(res, 409, 'order_cancelled', `order ${orderId} was cancelled`)
      throw new StaleWrite()
    }
    const headers = { 'Idempotency-Key': order.reference, 'Fencing-Token': String(token), 'Fencing-Resource': resource }
    const charge = await postJson(agent, `${gatewayUrl}/v1/charges`, { orderId, amountCents: order.amountCents }, headers, 10_000)
    const code = (charge.body.error as { code?: unknown } | undefined)?.code
    if (charge.status === 409 && code === 'stale_fencing_token') throw new StaleWrite()
    if (charge.status === 422) return () => sendJson(res, 202, { result: 'reconciling', orderId, instance: instanceId })
    if (charge.status !== 201) return () => fail(res, 502, 'gateway_error', `the payment gateway answered ${charge.status}`)
    const payment = await pool.query<{ id: number }>(SQL.paid, [orderId, String(token), instanceId, String(charge.body.id)])
    const paymentId = payment.rows[0]?.id
    if (paymentId === undefined) throw new StaleWrite()
    return () => sendJson(res, 200, { result: 'paid', orderId, paymentId, amountCents: order.amountCents, token: String(token), instance: instanceId })
  })
  answer()
}

async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
  try {
    const path = req.url ?? '/'
    if (req.method === 'GET' && path === '/healthz') return sendJson(res, 200, { ok: true, instance: instanceId })
    const bought = req.method === 'POST' ? PURCHASE_PATH.exec(path) : null
    if (bought) return await purchase(res, bought[1] as string, await readJson(req))
    const paying = req.method === 'POST' ? PAY_PATH.exec(path) : null
    if (paying && Number(paying[1]) <= 2_147_483_647) {
      await readJson(req)
      return await pay(res, Number(paying[1]))
    }
    fail(res, 404, 'not_found', `no route ${req.method} ${path.slice(0, 100)}`)
  } catch (error) {
    if (res.headersSent) return
    if (error instanceof BadBody) return fail(res, 400, 'invalid_body', error.message)
    // FL001: the database's guard refused a write under an older token.
    if (error instanceof StaleWrite || (error as { code?: unknown }).code === 'FL001')
      return fail(res, 409, 'stale_write_rejected', 'a newer fencing token has written: this instance lost its lease; nothing was written')
    if (error instanceof FloorLockTimeoutError) return fail(res, 503, 'lock_timeout', error.message)
    console.error(`[${instanceId}]`, error)
    fail(res, 500, 'internal', 'unexpected error')
  }
}

const port = await serveDrained(envPort(env, 'PORT'), handle, async () => {
  agent.destroy()
  await pool.end().catch(() => {})
  redis.disconnect()
  subscriber.disconnect()
  // The lock cycles it made, for the bench; sent before exiting (the exit flushes the counters).
  if (process.send && process.connected)
    process.send({ type: 'final-stats', stats: { instance: instanceId, floorGrants: locks.grants } }, undefined, {}, () => process.exit(0))
  else process.exit(0)
})
if (process.send) process.send({ type: 'ready', instance: instanceId, pid: process.pid, port })
