// The crowd's scheduling (load-generator.ts): a buyer's place is held by the buyer's own requests —
// the purchase and the front end's payment delivery chain — and not by the queue's duplicate
// delivery, which goes on by itself; the run still ends only when every duplicate is answered.
// What is tested is the client, so the shop is two small node:http servers answering by a fixed
// rule (the shop's own answers are tested against the real shop in app.test.ts and
// payment-safety.test.ts).
import { once } from 'node:events'
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { afterEach, describe, expect, it } from 'vitest'
import { runLoad } from '../src/load-generator.js'
import type { Random } from '../src/random.js'

/** Every choice at its maximum: the front end pays on the second target, the duplicate goes to the first, 40 ms later. */
const highest: Random = {
  next: () => 0.999,
  int: (_min, max) => max,
  pick: (items) => items[items.length - 1] as never,
}

/** How long the duplicate is told to wait before its redelivery: far above anything else here. */
const RETRY_AFTER_MS = 3_000

const servers: Server[] = []
afterEach(async () => {
  for (const s of servers.splice(0)) {
    s.closeAllConnections()
    s.close()
  }
})

async function listen(handler: (req: IncomingMessage, body: string, res: ServerResponse) => void): Promise<string> {
  const server = createServer((req, res) => {
    let body = ''
    req.on('data', (c: Buffer) => (body += c.toString('utf8')))
    req.on('end', () => handler(req, body, res))
  })
  servers.push(server)
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`
}

const json = (res: ServerResponse, status: number, body: object) => {
  res.writeHead(status, { 'content-type': 'application/json' })
  res.end(JSON.stringify(body))
}

describe('runLoad', () => {
  it("frees a buyer's place when the front end's payment is answered, and waits for the queue's duplicate before it returns", async () => {
    // What the two "instances" saw, in order.
    const log: string[] = []
    let orders = 0
    const paidTimes = new Map<number, number>()
    const shop = (name: 'a' | 'b') => (req: IncomingMessage, _body: string, res: ServerResponse) => {
      if (req.url?.endsWith('/purchase')) {
        const orderId = ++orders
        log.push(`purchase ${orderId}`)
        return json(res, 201, { result: 'ordered', orderId })
      }
      const orderId = Number(/\/api\/orders\/(\d+)\/pay/.exec(req.url ?? '')?.[1])
      log.push(`pay ${orderId} at ${name}`)
      // b gets the front end's delivery and pays; a gets the duplicate and says in progress; the
      // duplicate's redelivery goes to the other instance, b, and finds the order paid.
      if (name === 'a') return json(res, 202, { result: 'in_progress', orderId, retryAfterMs: RETRY_AFTER_MS })
      if (paidTimes.has(orderId)) return json(res, 200, { result: 'already_paid', orderId })
      paidTimes.set(orderId, 1)
      return json(res, 200, { result: 'paid', orderId })
    }
    const targets = [await listen(shop('a')), await listen(shop('b'))]

    const totals = await runLoad({ targets, sku: 'flash-1', buyers: 3, concurrency: 1, random: highest, purchaseTimeoutMs: 10_000, paymentTimeoutMs: 10_000 })

    // Every buyer ordered and was paid once; every duplicate was answered (already paid) before the run ended.
    expect(totals).toMatchObject({ buyersDone: 3, ordered: 3, paid: 3, alreadyPaid: 3, paymentsInProgress: 3, paymentsUnconfirmed: 0, paymentRetries: 0 })
    expect([...paidTimes.values()]).toEqual([1, 1, 1])
    // One buyer at a time, yet the next buyer's purchase came before the previous order's
    // redelivery: the duplicate's wait (3 s) held no buyer's place. A crowd that waited for both
    // deliveries would show the redelivery, `pay 1 at b` a second time, before `purchase 2`.
    const at = (entry: string, nth = 1) => log.reduce<number[]>((found, e, i) => (e === entry ? [...found, i] : found), [])[nth - 1] ?? -1
    for (const order of [1, 2]) {
      expect(at(`purchase ${order + 1}`)).toBeGreaterThan(at(`pay ${order} at b`))
      expect(at(`purchase ${order + 1}`)).toBeLessThan(at(`pay ${order} at b`, 2))
    }
    expect(at('pay 3 at b', 2)).toBeGreaterThan(0)
  })

  it('drops the duplicates still waiting when the signal aborts, and returns', async () => {
    const target = await listen((req, _body, res) => {
      if (req.url?.endsWith('/purchase')) return json(res, 201, { result: 'ordered', orderId: 1 })
      return json(res, 202, { result: 'in_progress', orderId: 1, retryAfterMs: 60_000 })
    })
    const abort = new AbortController()
    const run = runLoad({ targets: [target], sku: 'flash-1', buyers: 1, concurrency: 1, random: highest, purchaseTimeoutMs: 5_000, paymentTimeoutMs: 60_000, signal: abort.signal })
    // Both deliveries are answered in_progress and sleep; an abort ends the run without waiting them out.
    setTimeout(() => abort.abort(), 300)
    const started = performance.now()
    const totals = await run
    expect(performance.now() - started).toBeLessThan(30_000)
    expect(totals.ordered).toBe(1)
  })
})
