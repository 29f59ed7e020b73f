// The floor's payment gateway (issue 34, bench:shop's floor): the shop's gateway semantics on
// node:http and pg alone, on the same ledger tables (the run's schema), so the shop's countShop
// counts its charges.
//
// - POST /v1/authorizations {buyerId, amountCents}: 201, no ledger row (as the shop's gateway).
// - POST /v1/charges {orderId, amountCents} with Idempotency-Key, Fencing-Token and
//   Fencing-Resource: ONE statement raises the resource's fence (refused when a newer token was
//   seen: 409 stale_fencing_token), claims the key with its answer, and writes the ledger row only
//   when the key was new. A repeat of the key (it found the key claimed) reads the first answer
//   and replays it, or refuses the key sent with other parameters (422).
import { createHash, randomUUID } from 'node:crypto'
import type { IncomingMessage, ServerResponse } from 'node:http'
import pg from 'pg'
import { BadBody, envPort, envString, readJson, sendJson, serveDrained } from './floor-http.js'

const env = process.env
const schema = envString(env, 'FLOOR_SCHEMA')
if (!/^[a-z_][a-z0-9_]{0,62}$/.test(schema)) throw new RangeError(`FLOOR_SCHEMA must be a plain schema name (got ${JSON.stringify(schema)})`)
const latency = /^(\d{1,5})-(\d{1,5})$/.exec(env.FLOOR_GATEWAY_LATENCY_MS ?? '0-0')
if (latency === null) throw new RangeError('FLOOR_GATEWAY_LATENCY_MS must be <min>-<max> in ms')
const [minMs, maxMs] = [Number(latency[1]), Number(latency[2])]
const s = `"${schema}"`

const CHARGE_SQL = `WITH fence AS (
  INSERT INTO ${s}."GatewayFence" AS f (resource, "fenceToken") VALUES ($1::text, $2::bigint)
  ON CONFLICT (resource) DO UPDATE SET "fenceToken" = EXCLUDED."fenceToken" WHERE f."fenceToken" <= EXCLUDED."fenceToken"
  RETURNING 1
), claimed AS (
  INSERT INTO ${s}."GatewayIdempotencyKey" (key, "requestHash", status, body) SELECT $3::text, $4::text, 201, $5::jsonb FROM fence
  ON CONFLICT (key) DO NOTHING
  RETURNING 1
), charged AS (
  INSERT INTO ${s}."GatewayCharge" ("chargeId", "orderId", "amountCents", "idempotencyKey", "fencingResource", "fencingToken")
  SELECT $6::text, $7::int, $8::int, $3::text, $1::text, $2::bigint FROM claimed
  RETURNING 1
)
SELECT (SELECT count(*) FROM fence)::int AS fenced, (SELECT count(*) FROM charged)::int AS charged`
const KEY_SQL = `SELECT "requestHash", status, body FROM ${s}."GatewayIdempotencyKey" WHERE key = $1`

const pool = new pg.Pool({
  connectionString: envString(env, 'FLOOR_DATABASE_URL'),
  max: Number(env.FLOOR_DB_POOL_SIZE ?? '8'),
  application_name: schema,
})

const KEY = /^[\x21-\x7e]{1,255}$/
const TOKEN = /^[0-9]{1,19}$/
const wait = () => (maxMs === 0 ? Promise.resolve() : new Promise<void>((r) => setTimeout(r, minMs + Math.floor(Math.random() * (maxMs - minMs + 1)))))
const fail = (res: ServerResponse, status: number, code: string, message: string) => sendJson(res, status, { error: { code, message } })

function positiveInt(body: Record<string, unknown>, name: string): number | undefined {
  const value = body[name]
  return typeof value === 'number' && Number.isInteger(value) && value >= 1 && value <= 2_147_483_647 ? value : undefined
}

async function charge(req: IncomingMessage, res: ServerResponse): Promise<void> {
  const key = req.headers['idempotency-key']
  const token = req.headers['fencing-token']
  const resource = req.headers['fencing-resource']
  if (typeof key !== 'string' || !KEY.test(key)) return fail(res, 400, 'invalid_request', 'Idempotency-Key must be 1 to 255 visible ASCII characters')
  if (typeof token !== 'string' || !TOKEN.test(token)) return fail(res, 400, 'invalid_request', 'Fencing-Token must be a decimal integer')
  if (typeof resource !== 'string' || resource.length === 0 || resource.length > 512) return fail(res, 400, 'invalid_request', 'Fencing-Resource must be 1 to 512 characters')
  const body = await readJson(req)
  const orderId = positiveInt(body, 'orderId')
  const amountCents = positiveInt(body, 'amountCents')
  if (orderId === undefined || amountCents === undefined) return fail(res, 400, 'invalid_request', 'orderId and amountCents must be integers from 1 to 2147483647')
  const requestHash = createHash('sha256').update(JSON.stringify(['POST /v1/charges', orderId, amountCents])).digest('hex')
  await wait()
  const chargeId = `ch_${randomUUID().replaceAll('-', '')}`
  const answer = { id: chargeId, object: 'charge', orderId, amountCents, idempotencyKey: key, created: new Date().toISOString() }
  const { rows } = await pool.query<{ fenced: number; charged: number }>(CHARGE_SQL, [resource, token, key, requestHash, JSON.stringify(answer), chargeId, orderId, amountCents])
  const outcome = rows[0]
  if (outcome?.fenced !== 1) return fail(res, 409, 'stale_fencing_token', `a newer token than ${token} was seen for ${resource}`)
  if (outcome.charged === 1) return sendJson(res, 201, answer)
  const first = (await pool.query<{ requestHash: string; status: number; body: unknown }>(KEY_SQL, [key])).rows[0]
  if (first === undefined) return fail(res, 409, 'key_in_flight', 'the key was claimed by a call that did not commit; retry')
  if (first.requestHash !== requestHash) return fail(res, 422, 'idempotency_key_reused', 'the Idempotency-Key was used with other parameters')
  sendJson(res, first.status, first.body, { 'Idempotent-Replayed': 'true' })
}

async function authorize(req: IncomingMessage, res: ServerResponse): Promise<void> {
  const body = await readJson(req)
  const amountCents = positiveInt(body, 'amountCents')
  if (typeof body.buyerId !== 'string' || amountCents === undefined) return fail(res, 400, 'invalid_request', 'buyerId and amountCents are required')
  await wait()
  sendJson(res, 201, { id: `auth_${randomUUID()}`, object: 'authorization', amountCents })
}

async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
  try {
    if (req.method === 'POST' && req.url === '/v1/charges') return await charge(req, res)
    if (req.method === 'POST' && req.url === '/v1/authorizations') return await authorize(req, res)
    if (req.method === 'GET' && req.url === '/healthz') return sendJson(res, 200, { ok: true, service: 'gateway-floor' })
    fail(res, 404, 'not_found', `no route ${req.method} ${String(req.url).slice(0, 100)}`)
  } catch (error) {
    if (res.headersSent) return
    if (error instanceof BadBody) return fail(res, 400, 'invalid_request', error.message)
    // FL001: the database's guard refused a fence going down (a race the statement's condition lost).
    if ((error as { code?: unknown }).code === 'FL001') return fail(res, 409, 'stale_fencing_token', 'a newer token was seen for this resource')
    console.error('[gateway-floor]', error)
    fail(res, 500, 'internal', 'unexpected error')
  }
}

const port = await serveDrained(envPort(env, 'PORT'), handle, async () => {
  await pool.end().catch(() => {})
  process.exit(0)
})
if (process.send) process.send({ type: 'ready', instance: env.SHOP_INSTANCE_ID ?? 'gateway-floor', pid: process.pid, port })
