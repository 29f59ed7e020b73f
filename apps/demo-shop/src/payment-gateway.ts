/**
 * The shop's side of the payment gateway (a service of its own: gateway/gateway-app.ts). It is
 * called OUTSIDE any database transaction, as it should be — holding a transaction across an
 * external call is the anti-pattern, and it is also where a pause (GC, SIGSTOP) outlives the
 * lock's lease while the process holds no row lock that would make the others wait.
 *
 * The fence of the shop's database cannot reach the gateway: a charge made by a holder whose
 * lock ran out is money moved. What protects it is passed with the call: an idempotency key
 * derived from the business operation (the order's random reference), so a second charge of the order collapses
 * into the first, and the holder's fencing token, so the gateway refuses an older holder's call.
 */
import { Agent, request as httpRequest } from 'node:http'
import { fencingHeaders, type TokenHolder } from '@fencelock/fencing'

/** What protects a charge outside the shop's database; nothing at all is what naive code sends. */
export interface ChargeProtection {
  /** Names the charge, so a repeat of it returns the first charge instead of charging again. */
  readonly idempotencyKey?: string
  /** The lock held for the charge: its token and resource travel as the fencing headers. */
  readonly fencing?: TokenHolder
}

/** What the shop needs from a gateway. */
export interface PaymentGateway {
  /** Authorizes (holds) an amount on the buyer's card at purchase time. */
  authorize(request: { buyerId: string; amountCents: number }): Promise<{ authorizationId: string }>
  /** Charges an order. */
  charge(
    request: { orderId: number; amountCents: number },
    protection?: ChargeProtection,
  ): Promise<{ chargeId: string; replayed: boolean }>
  /**
   * The charge made under `idempotencyKey`, or null when there is none. With `fencing`, the
   * gateway raises the resource's fence in the same transaction: an older holder's charge of the
   * key cannot land after this answer.
   */
  findCharge(
    idempotencyKey: string,
    fencing?: TokenHolder,
  ): Promise<{ chargeId: string; orderId: number; amountCents: number } | null>
}

/** The gateway refused or failed a call; `code` is its machine-readable error (`stale_fencing_token`, ...). */
export class GatewayError extends Error {
  readonly status: number
  readonly code: string

  constructor(status: number, code: string, message: string) {
    super(`payment gateway: ${status} ${code}: ${message}`)
    this.name = 'GatewayError'
    this.status = status
    this.code = code
  }

  /** The gateway refused the call's fencing token: a newer holder of the lock has called it since. */
  get isStaleToken(): boolean {
    return this.status === 409 && this.code === 'stale_fencing_token'
  }

  /** The gateway holds another call under the key: a case for the reconciler, never for a retry. */
  get isKeyReused(): boolean {
    return this.status === 422 && this.code === 'idempotency_key_reused'
  }
}

/** Latency range of the simulated gateway, in ms, both ends included. */
export interface GatewayLatency {
  readonly minMs: number
  readonly maxMs: number
}

/** Options of {@link httpGateway}. */
export interface HttpGatewayOptions {
  /** Base URL of the gateway, e.g. `http://127.0.0.1:4000`. */
  readonly url: string
  /** A call gives up after this long, in ms. Default 30 000. */
  readonly timeoutMs?: number
}

/**
 * The gateway over HTTP: node:http with a keep-alive agent of its own (one per gateway), so the
 * calls reuse their connections (fetch/undici cost the instances about 14 % more CPU).
 * @example
 * ```ts
 * const gateway = httpGateway({ url: process.env.SHOP_GATEWAY_URL })
 * await gateway.charge({ orderId: 27, amountCents: 4999 }, { idempotencyKey: 'order:27', fencing: lock })
 * ```
 */
export function httpGateway(options: HttpGatewayOptions): PaymentGateway {
  const base = options.url.replace(/\/+$/, '')
  const timeoutMs = options.timeoutMs ?? 30_000
  // Idle sockets closed after 4 s, before the server's 5 s keep-alive timeout closes them under a reused request.
  const agent = new Agent({ keepAlive: true, maxSockets: 64, timeout: 4_000 })
  const send = (path: string, body: string | undefined, headers: Record<string, string>) =>
    new Promise<{ status: number; text: string; replayed: boolean }>((resolve, reject) => {
      const req = httpRequest(
        `${base}${path}`,
        {
          method: body === undefined ? 'GET' : 'POST',
          agent,
          headers: body === undefined ? headers : { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)), ...headers },
        },
        (res) => {
          const chunks: Buffer[] = []
          res.on('data', (chunk: Buffer) => chunks.push(chunk))
          res.on('error', reject)
          res.on('end', () => {
            clearTimeout(timer)
            resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8'), replayed: res.headers['idempotent-replayed'] === 'true' })
          })
        },
      )
      const timer = setTimeout(() => {
        const timeout = new Error(`no answer within ${timeoutMs} ms`)
        timeout.name = 'TimeoutError'
        req.destroy(timeout)
      }, timeoutMs)
      req.on('error', (error) => {
        clearTimeout(timer)
        reject(error)
      })
      req.end(body)
    })
  const call = async (path: string, body: unknown, headers: Record<string, string>, notFound?: 'null') => {
    let answer: { status: number; text: string; replayed: boolean }
    try {
      answer = await send(path, body === undefined ? undefined : JSON.stringify(body), headers)
    } catch (cause) {
      // The call's outcome is unknown (it may have charged): only a repeat with the same
      // idempotency key can find out without charging twice.
      const timedOut = (cause as { name?: unknown }).name === 'TimeoutError'
      throw new GatewayError(
        timedOut ? 504 : 502,
        timedOut ? 'gateway_timeout' : 'gateway_unreachable',
        timedOut ? `no answer within ${timeoutMs} ms` : 'the gateway could not be reached',
      )
    }
    const { status, text } = answer
    let json: Record<string, unknown> | null = {}
    try {
      json = JSON.parse(text) as Record<string, unknown>
    } catch {
      // A body that is not JSON: reported below by status.
    }
    if (status === 404 && notFound === 'null') return { json: null, replayed: false }
    if (status < 200 || status > 299) {
      const error = (json?.error ?? {}) as { code?: unknown; message?: unknown }
      throw new GatewayError(
        status,
        typeof error.code === 'string' ? error.code : 'unknown',
        typeof error.message === 'string' ? error.message : text.slice(0, 200),
      )
    }
    return { json, replayed: answer.replayed }
  }
  return {
    async authorize(request) {
      const { json } = await call('/v1/authorizations', request, {})
      return { authorizationId: String(json?.id) }
    },
    async charge(request, protection = {}) {
      const headers: Record<string, string> = {}
      if (protection.idempotencyKey !== undefined) headers['Idempotency-Key'] = protection.idempotencyKey
      if (protection.fencing !== undefined) Object.assign(headers, fencingHeaders(protection.fencing))
      const { json, replayed } = await call('/v1/charges', request, headers)
      return { chargeId: String(json?.id), replayed }
    },
    async findCharge(idempotencyKey, fencing) {
      const { json } = await call(
        `/v1/charges?key=${encodeURIComponent(idempotencyKey)}`,
        undefined,
        fencing === undefined ? {} : fencingHeaders(fencing),
        'null',
      )
      if (json === null) return null
      return { chargeId: String(json.id), orderId: Number(json.orderId), amountCents: Number(json.amountCents) }
    },
  }
}

/** Parses `"30-80"` or `"50"` into a latency range; throws RangeError with what it must be. */
export function parseLatency(text: string): GatewayLatency {
  const m = /^(\d{1,5})(?:-(\d{1,5}))?$/.exec(text.trim())
  if (m === null)
    throw new RangeError(`gateway latency must be "<ms>" or "<min>-<max>" in ms (got ${JSON.stringify(text)})`)
  const minMs = Number(m[1])
  const maxMs = m[2] === undefined ? minMs : Number(m[2])
  if (maxMs < minMs) throw new RangeError(`gateway latency: max ${maxMs} is below min ${minMs}`)
  if (maxMs > 60_000) throw new RangeError(`gateway latency must be at most 60000 ms (got ${maxMs})`)
  return { minMs, maxMs }
}
