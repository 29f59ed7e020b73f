/**
 * The simulated payment gateway as a service of its own, with its own ledger in PostgreSQL: the
 * place where the money moves, so the place where double charges are counted. It behaves like a
 * real provider's API on the points that matter to a caller:
 *
 * | route | answers |
 * | --- | --- |
 * | `POST /v1/charges {orderId, amountCents}` | 201 the charge · a repeat of its `Idempotency-Key`: the first answer again (header `Idempotent-Replayed: true`) · 422 `idempotency_key_reused` (same key, other parameters) · 409 `stale_fencing_token` (an older `Fencing-Token` than the newest seen for its `Fencing-Resource`) |
 * | `POST /v1/authorizations {buyerId, amountCents}` | 201 an authorization id (holds no money in the demo: no ledger row) |
 * | `GET /v1/charges?orderId=N` | the ledger's charges of an order |
 * | `GET /v1/charges?key=K` | the charge made under the `Idempotency-Key` K (`{object: 'charge', ...}`), or 404 `no_such_charge`; with fencing headers, the resource's fence is raised in the same transaction, so a charge of an older holder can no longer land after the answer (the reconciler's question) |
 * | `GET /healthz` | 200 when it serves |
 *
 * Every answer takes the configured latency. Bad headers and bodies get 400 `invalid_request`
 * naming the parameter (a body that does not decompress, or an unknown `Content-Encoding` or
 * charset, too), a body over 16 KiB (once decompressed) 413, an unknown route 404 — never a 500
 * (a 500 is a bug, logged, and the process keeps serving).
 *
 * A charge takes its latency first, then runs in one database transaction: the fence (when the
 * request carries fencing headers: the token must still be the newest seen for its resource when
 * the money moves, see `fencingMiddleware` of @fencelock/fencing), then, with an idempotency key,
 * ONE statement that claims the key with its answer and writes the ledger row only when the key
 * was new (a concurrent request with the same key waits on the key's unique index for this one,
 * then writes nothing and replays its answer); without a key, the ledger row alone.
 */
import { createHash, randomUUID } from 'node:crypto'
import { fencing, fencingErrorHandler, fencingMiddleware, isFenceGuardError, StaleFencingTokenError, type FencedRequest } from '@fencelock/fencing'
import express, { type ErrorRequestHandler, type Express, type Request, type Response } from 'express'
import type { PrismaClient } from '../../../../generated/prisma/client.js'
import { bodyParserFailure } from '../body-parser-errors.js'
import { quoteIdent } from '../database.js'
import { InFlight } from '../in-flight.js'
import type { GatewayLatency } from '../payment-gateway.js'

/** Largest accepted request body: 16 KiB. */
export const MAX_GATEWAY_BODY_BYTES = 16 * 1024
/** The header a caller names a charge with, so a repeat of the call collapses into the first. */
export const IDEMPOTENCY_KEY_HEADER = 'Idempotency-Key'
/** The header on a replayed answer. */
export const REPLAYED_HEADER = 'Idempotent-Replayed'

const MAX_INT = 2_147_483_647
// Visible ASCII, as a header carries it without encoding; Stripe allows up to 255 characters.
const IDEMPOTENCY_KEY = /^[\x21-\x7e]{1,255}$/
const BUYER_ID = /^[A-Za-z0-9._:@-]{1,64}$/

/** The gateway's client: its own Prisma client, with its resource fences fenced. */
export type GatewayDb = ReturnType<typeof gatewayDb>

/** Extends the gateway's own `prisma` with fencing of its resource fences (`GatewayFence`, guarded by its migration). */
export function gatewayDb(prisma: PrismaClient) {
  return prisma.$extends(fencing<typeof prisma>({ models: { GatewayFence: 'fenceToken' } }))
}

/** What {@link createGatewayApp} needs. */
export interface GatewayDeps {
  readonly db: GatewayDb
  /** The schema of its ledger (the client's): the claim's one statement names its tables in it. */
  readonly schema: string
  readonly latency: GatewayLatency
  /** Draws the latency; default Math.random. */
  readonly random?: () => number
  /** Limits of a charge's transaction. Default 30 s each (a pool of one on PGlite queues them all). */
  readonly transaction?: { readonly maxWaitMs: number; readonly timeoutMs: number }
  readonly logError?: (error: unknown) => void
  /** Replaces the latency's sleep (a test holds a handler inside its call with it). */
  readonly wait?: () => Promise<void>
  /** Counts the running charge and lookup handlers (the process's shutdown waits for them). */
  readonly inFlight?: InFlight
}

/** A charge as the ledger and the API show it. */
export interface ChargeBody {
  readonly id: string
  readonly object: 'charge'
  readonly orderId: number
  readonly amountCents: number
  readonly idempotencyKey: string | null
  readonly created: string
}

/** An answer the gateway keeps for an idempotency key. */
interface Answer {
  readonly status: number
  readonly body: unknown
  readonly replayed?: boolean
}

class BadRequest extends Error {
  constructor(
    readonly param: string,
    message: string,
  ) {
    super(message)
  }
}

function intField(body: Record<string, unknown>, name: string, max: number): number {
  const value = body[name]
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 1 || value > max)
    throw new BadRequest(name, `${name} must be an integer from 1 to ${max}`)
  return value
}

function jsonBody(req: Request, fields: readonly string[]): Record<string, unknown> {
  const body: unknown = req.body
  if (body === null || typeof body !== 'object' || Array.isArray(body))
    throw new BadRequest('body', 'the body must be a JSON object')
  for (const key of Object.keys(body))
    if (!fields.includes(key)) throw new BadRequest(key, `unknown parameter ${JSON.stringify(key.slice(0, 40))}`)
  return body as Record<string, unknown>
}

/**
 * Builds the gateway's express app.
 * @example
 * ```ts
 * const db = gatewayDb(prisma)
 * createGatewayApp({ db, schema: 'public', latency: { minMs: 30, maxMs: 80 } }).listen(4000)
 * ```
 */
export function createGatewayApp(deps: GatewayDeps): Express {
  const { db } = deps
  const random = deps.random ?? Math.random
  const limits = { maxWait: deps.transaction?.maxWaitMs ?? 30_000, timeout: deps.transaction?.timeoutMs ?? 30_000 }
  const logError = deps.logError ?? ((error: unknown) => console.error('[gateway]', error))
  const latency =
    deps.wait ??
    (() =>
      new Promise<void>((r) =>
        setTimeout(r, deps.latency.minMs + Math.floor(random() * (deps.latency.maxMs - deps.latency.minMs + 1))),
      ))

  const inFlight = deps.inFlight ?? new InFlight()
  const app = express()
  app.disable('x-powered-by')
  app.disable('etag')
  app.use(express.json({ limit: MAX_GATEWAY_BODY_BYTES, strict: true }))

  const fail = (res: Response, status: number, code: string, message: string, param?: string) => {
    res.status(status).json({ error: param === undefined ? { code, message } : { code, param, message } })
  }

  app.get('/healthz', (_req, res) => {
    res.json({ ok: true, service: 'gateway' })
  })

  app.post('/v1/authorizations', async (req, res) => {
    const body = jsonBody(req, ['buyerId', 'amountCents'])
    if (typeof body.buyerId !== 'string' || !BUYER_ID.test(body.buyerId))
      throw new BadRequest('buyerId', 'buyerId must be 1 to 64 of A-Z a-z 0-9 . _ : @ -')
    const amountCents = intField(body, 'amountCents', 1_000_000_000)
    await latency()
    res.status(201).json({ id: `auth_${randomUUID()}`, object: 'authorization', amountCents })
  })

  app.get('/v1/charges', fencingMiddleware({ db, model: 'GatewayFence', recordBeforeHandler: false }), (req, res) =>
    inFlight.track(() => listCharges(req, res)),
  )
  const listCharges = async (req: Request, res: Response) => {
    for (const name of Object.keys(req.query))
      if (name !== 'orderId' && name !== 'key')
        throw new BadRequest(name, `unknown parameter ${JSON.stringify(name.slice(0, 40))}`)
    if (req.query.key !== undefined) {
      if (req.query.orderId !== undefined) throw new BadRequest('key', 'give key or orderId, not both')
      const key = req.query.key
      if (typeof key !== 'string' || !IDEMPOTENCY_KEY.test(key))
        throw new BadRequest('key', 'key must be 1 to 255 visible ASCII characters')
      const fencing = res.locals.fencing as FencedRequest<GatewayDb> | undefined
      // The charge a key made is the one its first answer names (a replayed request's own row
      // was deleted); read with the fence raised, when the caller sent one, in one transaction.
      const find = (tx: TxClient) =>
        tx.gatewayCharge.findFirst({ where: { idempotencyKey: key }, orderBy: { id: 'asc' } })
      const row =
        fencing !== undefined
          ? await fencing.transaction((tx) => find(tx))
          : await db.$transaction((tx) => find(tx), limits)
      if (row === null) return fail(res, 404, 'no_such_charge', 'no charge was made with this key', 'key')
      return res.json(chargeBody(row))
    }
    const raw = String(req.query.orderId ?? '')
    if (!/^[1-9][0-9]{0,9}$/.test(raw) || Number(raw) > MAX_INT)
      throw new BadRequest('orderId', `orderId must be an integer from 1 to ${MAX_INT}`)
    const rows = await db.gatewayCharge.findMany({ where: { orderId: Number(raw) }, orderBy: { id: 'asc' } })
    return res.json({ object: 'list', data: rows.map(chargeBody) })
  }

  app.post('/v1/charges', fencingMiddleware({ db, model: 'GatewayFence', recordBeforeHandler: false }), (req, res) =>
    inFlight.track(() => createCharge(req, res)),
  )
  const createCharge = async (req: Request, res: Response) => {
    const rawKey = req.get(IDEMPOTENCY_KEY_HEADER)
    if (rawKey !== undefined && !IDEMPOTENCY_KEY.test(rawKey))
      throw new BadRequest(
        IDEMPOTENCY_KEY_HEADER,
        `${IDEMPOTENCY_KEY_HEADER} must be 1 to 255 visible ASCII characters`,
      )
    const body = jsonBody(req, ['orderId', 'amountCents'])
    const orderId = intField(body, 'orderId', MAX_INT)
    const amountCents = intField(body, 'amountCents', 1_000_000_000)
    const fencing = res.locals.fencing as FencedRequest<GatewayDb> | undefined
    // What the key promises: the same call. Parameters in a fixed order, so JSON key order does not matter.
    const requestHash = createHash('sha256')
      .update(JSON.stringify(['POST /v1/charges', orderId, amountCents]))
      .digest('hex')

    // The network and the card scheme, before the ledger: no database transaction waits for them.
    await latency()
    const chargeId = `ch_${randomUUID().replaceAll('-', '')}`
    const createdAt = new Date()
    const answerBody = chargeBody({ chargeId, orderId, amountCents, idempotencyKey: rawKey ?? null, createdAt })
    // One statement, outside any transaction (see chargeStatement): the resource's fence raised
    // (with fencing headers), the key claimed with its answer (with a key), the ledger row.
    const charge = chargeStatement(deps.schema, { fenced: fencing !== undefined, keyed: rawKey !== undefined })
    const result = await db
      .$queryRawUnsafe<Array<{ fenced: number; charged: number }>>(
        charge,
        ...chargeParameters({ fencing, key: rawKey, requestHash, body: answerBody, chargeId, orderId, amountCents, createdAt }),
      )
      .then(
        ([row]) => row,
        (error: unknown) => {
          // The database's guard refused the fence (a resource recreated under an older token than
          // its tombstone): a stale token, as the fence's own condition says it.
          if (fencing !== undefined && isFenceGuardError(error)) return { fenced: 0, charged: 0 }
          throw error
        },
      )
    let answer: Answer = { status: 201, body: answerBody }
    if (fencing !== undefined && result?.fenced !== 1) {
      // A newer token was seen for the resource: nothing was written. The stored token names it.
      const stored = await db.gatewayFence.findUnique({ where: { resource: fencing.resource }, select: { fenceToken: true } })
      throw new StaleFencingTokenError('GatewayFence', 'upsert', fencing.token, stored?.fenceToken)
    }
    // The key named an earlier call: this one charged nothing (the resource's fence, when the
    // request carried one, was still raised), and the first answer is replayed.
    if (result?.charged !== 1 && rawKey !== undefined) answer = await earlierAnswer(db, rawKey, requestHash)
    if (answer.replayed === true) res.setHeader(REPLAYED_HEADER, 'true')
    res.status(answer.status).json(answer.body)
  }

  app.use((req, res) => fail(res, 404, 'not_found', `no route ${req.method} ${req.path.slice(0, 100)}`))
  // 409 stale_fencing_token and 400 invalid_fencing_header, then everything else.
  app.use(fencingErrorHandler() as unknown as ErrorRequestHandler)
  const onError: ErrorRequestHandler = (error: unknown, _req, res, next) => {
    if (res.headersSent) return next(error)
    if (error instanceof BadRequest) return fail(res, 400, 'invalid_request', error.message, error.param)
    if (error instanceof KeyReused)
      return fail(res, 422, 'idempotency_key_reused', error.message, IDEMPOTENCY_KEY_HEADER)
    const parser = bodyParserFailure(error)
    if (parser?.kind === 'too-large')
      return fail(res, 413, 'body_too_large', `the body must be at most ${MAX_GATEWAY_BODY_BYTES} bytes`)
    if (parser !== undefined) return fail(res, 400, 'invalid_request', parser.message, parser.header ?? 'body')
    logError(error)
    return fail(res, 500, 'internal', 'unexpected error')
  }
  app.use(onError)
  return app
}

type TxClient = Parameters<Parameters<GatewayDb['$transaction']>[0]>[0]

class KeyReused extends Error {}

/**
 * A charge in one statement (no transaction: a statement is atomic, and each step takes its row
 * lock inside it, held until it commits):
 * - `fenced` (fencing headers): the resource's fence first, `INSERT ... ON CONFLICT DO UPDATE ...
 *   WHERE fence <= token` — raised, or the resource's row created with the token; a stale token
 *   matches nothing and nothing after it is written (`fenced` 0). The database's fence guard still
 *   refuses any write that would lower a fence.
 * - `keyed` (an idempotency key): the key claimed with its answer (`ON CONFLICT DO NOTHING`: a
 *   conflict is not an error), and the ledger row inserted only when the key was. A concurrent
 *   request with the same key blocks on the key's unique index until the first commits, then
 *   inserts nothing and replays the first answer (or, if the first rolled back, claims the key
 *   itself). So a key is never seen without its answer, and a replayed request writes no ledger row.
 * - the ledger row.
 * Parameters: $1 charge id, $2 order id, $3 amount, $4 created at, then the fencing resource and
 * token when fenced, then the key, the request hash and the answer (JSON) when keyed
 * ({@link chargeParameters}). Returns one row: `fenced` (1 when the fence was raised, or there was
 * none) and `charged` (1 when the ledger row was written).
 */
function chargeStatement(schema: string, how: { fenced: boolean; keyed: boolean }): string {
  const s = quoteIdent(schema)
  const [resource, token] = how.fenced ? ['$5', '$6::bigint'] : ['NULL', 'NULL']
  const k = how.fenced ? 7 : 5
  const steps: string[] = []
  let from = ''
  if (how.fenced) {
    steps.push(`fence AS (
  INSERT INTO ${s}."GatewayFence" (resource, "fenceToken") VALUES (${resource}, ${token})
  ON CONFLICT (resource) DO UPDATE SET "fenceToken" = EXCLUDED."fenceToken"
  WHERE ${s}."GatewayFence"."fenceToken" <= EXCLUDED."fenceToken"
  RETURNING 1 AS one
)`)
    from = ' FROM fence'
  }
  if (how.keyed) {
    steps.push(`claimed AS (
  INSERT INTO ${s}."GatewayIdempotencyKey" (key, "requestHash", status, body) SELECT $${k}, $${k + 1}, 201, $${k + 2}::jsonb${from}
  ON CONFLICT (key) DO NOTHING
  RETURNING key
)`)
    from = ' FROM claimed'
  }
  steps.push(`charged AS (
  INSERT INTO ${s}."GatewayCharge" ("chargeId", "orderId", "amountCents", "idempotencyKey", "fencingResource", "fencingToken", "createdAt")
  SELECT $1, $2::int, $3::int, ${how.keyed ? 'key' : 'NULL'}, ${resource}, ${token}, $4::timestamp${from}
  RETURNING 1 AS one
)`)
  const fenced = how.fenced ? '(SELECT count(*)::int FROM fence)' : '1'
  return `WITH ${steps.join(',\n')}\nSELECT ${fenced} AS fenced, (SELECT count(*)::int FROM charged) AS charged`
}

/** The parameters of {@link chargeStatement}, in its order. */
function chargeParameters(c: {
  fencing: { resource: string; token: bigint } | undefined
  key: string | undefined
  requestHash: string
  body: ChargeBody
  chargeId: string
  orderId: number
  amountCents: number
  createdAt: Date
}): unknown[] {
  return [
    c.chargeId,
    c.orderId,
    c.amountCents,
    c.createdAt,
    ...(c.fencing === undefined ? [] : [c.fencing.resource, c.fencing.token]),
    ...(c.key === undefined ? [] : [c.key, c.requestHash, JSON.stringify(c.body)]),
  ]
}

/**
 * The answer the first request with `key` got, replayed; a key sent with other parameters is
 * refused (422): it names another call.
 */
async function earlierAnswer(db: GatewayDb, key: string, requestHash: string): Promise<Answer> {
  const earlier = await db.gatewayIdempotencyKey.findUniqueOrThrow({ where: { key } })
  if (earlier.requestHash !== requestHash)
    throw new KeyReused(
      `the ${IDEMPOTENCY_KEY_HEADER} ${JSON.stringify(key.slice(0, 60))} was used with other parameters`,
    )
  return { status: earlier.status, body: earlier.body, replayed: true }
}

function chargeBody(row: {
  chargeId: string
  orderId: number
  amountCents: number
  idempotencyKey: string | null
  createdAt: Date
}): ChargeBody {
  return {
    id: row.chargeId,
    object: 'charge',
    orderId: row.orderId,
    amountCents: row.amountCents,
    idempotencyKey: row.idempotencyKey,
    created: row.createdAt.toISOString(),
  }
}
