/**
 * A card processor for the docs' quick starts, as they call one: `POST /v1/charges` with a JSON
 * body `{ amountCents }` and an optional `Idempotency-Key` header answers `{ chargeId,
 * amountCents }`. A key seen before gets the first answer again (a replay), without a new charge;
 * no key, a new charge every time. Its ledger is where double charges are counted.
 */
import { createServer, type IncomingMessage, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'

export interface Charge {
  readonly chargeId: string
  readonly amountCents: number
  readonly idempotencyKey: string | undefined
}

export interface PaymentProvider {
  readonly url: string
  /** Every charge made, in order (replays are not charges). */
  readonly charges: readonly Charge[]
  /** How many requests were answered with an earlier charge. */
  readonly replays: number
  /**
   * Runs `hook` when the next new charge has been recorded, before its answer is sent: the test
   * freezes the caller there (it charged; it has not heard back, nor recorded it).
   */
  onNextCharge(hook: (charge: Charge) => void): void
  close(): Promise<void>
}

async function bodyOf(req: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = []
  for await (const chunk of req) chunks.push(chunk as Buffer)
  return JSON.parse(Buffer.concat(chunks).toString('utf8') || '{}')
}

export async function startPaymentProvider(): Promise<PaymentProvider> {
  const charges: Charge[] = []
  const byKey = new Map<string, Charge>()
  let replays = 0
  let hook: ((charge: Charge) => void) | undefined
  const server: Server = createServer((req, res) => {
    void (async () => {
      if (req.method !== 'POST' || req.url !== '/v1/charges') {
        res.writeHead(404).end()
        return
      }
      const body = (await bodyOf(req)) as { amountCents?: unknown }
      if (typeof body.amountCents !== 'number') {
        res.writeHead(400, { 'content-type': 'application/json' }).end('{"error":"amountCents"}')
        return
      }
      const key = req.headers['idempotency-key']
      const idempotencyKey = typeof key === 'string' ? key : undefined
      let charge = idempotencyKey === undefined ? undefined : byKey.get(idempotencyKey)
      if (charge === undefined) {
        charge = { chargeId: `ch_${charges.length + 1}`, amountCents: body.amountCents, idempotencyKey }
        charges.push(charge)
        if (idempotencyKey !== undefined) byKey.set(idempotencyKey, charge)
        const run = hook
        hook = undefined
        run?.(charge)
      } else {
        replays += 1
      }
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ chargeId: charge.chargeId, amountCents: charge.amountCents }))
    })().catch((error: unknown) => {
      res.writeHead(500).end(String(error))
    })
  })
  server.listen(0, '127.0.0.1')
  await new Promise<void>((resolve) => server.once('listening', resolve))
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    charges,
    get replays() {
      return replays
    },
    onNextCharge(next) {
      hook = next
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections()
        server.close(() => resolve())
      }),
  }
}
