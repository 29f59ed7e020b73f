/**
 * The flash-sale crowd. Each buyer hits a random instance (seeded) once to buy one unit; a buyer
 * who got an order then pays the way real systems deliver a payment request: the front end sends
 * it, the message queue delivers a duplicate to another instance a moment later, and a request
 * that times out or fails is retried on another instance. The shop must charge each order once.
 */
import { Agent, request, type ClientRequest } from 'node:http'
import type { Random } from './random.js'

/** Options of {@link runLoad}. */
export interface LoadOptions {
  /** Base URLs of the instances, e.g. `http://127.0.0.1:3001`. */
  readonly targets: readonly string[]
  readonly sku: string
  readonly buyers: number
  /** Buyers in flight at once (a payment's duplicate delivery, the queue's, runs on without a place of its own). */
  readonly concurrency: number
  readonly random: Random
  /** A purchase gives up after this long, in ms (it may queue for the lock behind many others). */
  readonly purchaseTimeoutMs: number
  /** A payment request gives up after this long and is retried on another instance, in ms. */
  readonly paymentTimeoutMs: number
  /** Most deliveries of one payment (the first, the duplicate, and retries). Default 4. */
  readonly maxPaymentAttempts?: number
  /** Called after each buyer is done. */
  readonly onProgress?: (done: number, totals: LoadTotals) => void
  /** Stops the crowd: no new buyer starts, and requests in flight are dropped. */
  readonly signal?: AbortSignal
}

/** What the crowd saw (the client's view; the report's truth comes from the database). */
export interface LoadTotals {
  buyersDone: number
  ordered: number
  soldOut: number
  purchaseFailed: number
  paymentRequests: number
  paid: number
  alreadyPaid: number
  paymentRetries: number
  paymentTimeouts: number
  staleRejectedAnswers: number
  /** Answers `in_progress` (another delivery was paying the order): each delivered again later. */
  paymentsInProgress: number
  /** Orders for which no delivery got a definite answer (paid / already paid). */
  paymentsUnconfirmed: number
  byStatus: Record<string, number>
}

/** Most redeliveries of one delivery chain answered `in_progress` (a stalled holder's lease runs out well before). */
const MAX_IN_PROGRESS_REDELIVERIES = 10

interface Answer {
  status: number
  body: Record<string, unknown>
}

/** Requests in flight, so an abort drops them all with one listener on the signal. */
type InFlight = Set<ClientRequest>

function post(agent: Agent, url: string, json: unknown, timeoutMs: number, inFlight: InFlight, signal?: AbortSignal): Promise<Answer | 'timeout' | 'error'> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve('error')
    const payload = JSON.stringify(json)
    const req = request(url, { method: 'POST', agent, headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) } }, (res) => {
      const chunks: Buffer[] = []
      res.on('data', (c: Buffer) => chunks.push(c))
      res.on('error', () => resolve('error'))
      res.on('end', () => {
        clearTimeout(timer)
        let body: Record<string, unknown> = {}
        try {
          body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as Record<string, unknown>
        } catch {
          // Not JSON: the status is what counts.
        }
        resolve({ status: res.statusCode ?? 0, body })
      })
    })
    // The client gives up; the server-side handler goes on (as it does in production).
    const timer = setTimeout(() => {
      req.destroy()
      resolve('timeout')
    }, timeoutMs)
    req.on('error', () => {
      clearTimeout(timer)
      resolve('error')
    })
    inFlight.add(req)
    req.once('close', () => inFlight.delete(req))
    req.end(payload)
  })
}

/** Waits `ms`, or until `signal` aborts. */
const sleep = (ms: number, signal?: AbortSignal) =>
  new Promise<void>((resolve) => {
    if (signal?.aborted) return resolve()
    const done = () => {
      clearTimeout(timer)
      signal?.removeEventListener('abort', done)
      resolve()
    }
    const timer = setTimeout(done, ms)
    signal?.addEventListener('abort', done, { once: true })
  })

/**
 * Runs the crowd to the end and returns what it saw.
 * @example
 * ```ts
 * const totals = await runLoad({ targets, sku: 'flash-1', buyers: 2000, concurrency: 32, random: seededRandom(7),
 *   purchaseTimeoutMs: 60_000, paymentTimeoutMs: 1_500 })
 * ```
 */
export async function runLoad(options: LoadOptions): Promise<LoadTotals> {
  const { targets, random } = options
  if (targets.length === 0) throw new RangeError('runLoad needs at least one target')
  const agent = new Agent({ keepAlive: true, maxSockets: Math.max(16, options.concurrency * 2) })
  const maxAttempts = options.maxPaymentAttempts ?? 4
  const inFlight: InFlight = new Set()
  /** Duplicate deliveries still running after their buyer is done (see `buyer`). */
  const queued = new Set<Promise<void>>()
  const dropAll = () => {
    for (const req of inFlight) req.destroy()
  }
  options.signal?.addEventListener('abort', dropAll, { once: true })
  const totals: LoadTotals = {
    buyersDone: 0,
    ordered: 0,
    soldOut: 0,
    purchaseFailed: 0,
    paymentRequests: 0,
    paid: 0,
    alreadyPaid: 0,
    paymentRetries: 0,
    paymentTimeouts: 0,
    staleRejectedAnswers: 0,
    paymentsInProgress: 0,
    paymentsUnconfirmed: 0,
    byStatus: {},
  }
  const tally = (answer: Answer | 'timeout' | 'error') => {
    const key = typeof answer === 'string' ? answer : String(answer.status)
    totals.byStatus[key] = (totals.byStatus[key] ?? 0) + 1
    if (typeof answer !== 'string' && answer.body.error === 'stale_write_rejected') totals.staleRejectedAnswers++
  }
  const otherThan = (index: number) => (targets.length === 1 ? index : (index + 1 + random.int(0, targets.length - 2)) % targets.length)

  /** One delivery chain of a payment: on a timeout or failure, retried on another instance. */
  const deliver = async (orderId: number, first: number, attempts: { left: number }): Promise<boolean> => {
    let target = first
    let redeliveries = 0
    while (attempts.left > 0 && !options.signal?.aborted) {
      attempts.left--
      totals.paymentRequests++
      const answer = await post(agent, `${targets[target]}/api/orders/${orderId}/pay`, {}, options.paymentTimeoutMs, inFlight, options.signal)
      tally(answer)
      if (typeof answer !== 'string' && answer.status === 200) {
        if (answer.body.result === 'paid') totals.paid++
        else totals.alreadyPaid++
        return true
      }
      if (answer === 'timeout') totals.paymentTimeouts++
      if (typeof answer !== 'string' && answer.status === 404) return false
      // Being paid by another delivery right now (202 in_progress): not an answer yet. Delivered
      // again when the shop says (its retryAfterMs), as a queue honours Retry-After: by then the
      // other delivery has paid it (answered from the order), or, stalled, has lost its lease, and
      // this delivery takes over. Not one of the attempts, which count failures; bounded apart.
      if (typeof answer !== 'string' && answer.status === 202 && answer.body.result === 'in_progress') {
        totals.paymentsInProgress++
        if (++redeliveries > MAX_IN_PROGRESS_REDELIVERIES) return false
        attempts.left++
        target = otherThan(target)
        const after = Number(answer.body.retryAfterMs)
        await sleep(Math.min(Number.isFinite(after) && after > 0 ? after : 500, options.paymentTimeoutMs) + random.int(5, 50), options.signal)
        continue
      }
      // Settled by the shop's reconciler (202), or cancelled by it: nothing for a retry to do.
      if (typeof answer !== 'string' && answer.status === 202) return true
      if (typeof answer !== 'string' && answer.body.error === 'order_cancelled') return false
      totals.paymentRetries++
      target = otherThan(target)
      await sleep(random.int(5, 50), options.signal)
    }
    return false
  }

  const buyer = async (n: number) => {
    const target = random.int(0, targets.length - 1)
    const answer = await post(agent, `${targets[target]}/api/products/${encodeURIComponent(options.sku)}/purchase`, { buyerId: `buyer-${n}` }, options.purchaseTimeoutMs, inFlight, options.signal)
    tally(answer)
    if (typeof answer === 'string' || answer.status >= 500 || (answer.status !== 201 && answer.status !== 409)) {
      totals.purchaseFailed++
      return
    }
    if (answer.status === 409) {
      if (answer.body.error === 'sold_out') totals.soldOut++
      else totals.purchaseFailed++
      return
    }
    totals.ordered++
    const orderId = Number(answer.body.orderId)
    // The front end's request, and the queue's duplicate to another instance a moment later. The
    // buyer is done when the front end's delivery chain is: the duplicate is the queue's, not the
    // buyer's, and goes on without holding a buyer's place (answered in_progress, it waits out the
    // shop's retryAfterMs — half a lease — and a buyer waiting on it capped a segmented sale at
    // ~32 buyers per 0.8 s whatever the shop did). The run waits for every duplicate at the end.
    const attempts = { left: maxAttempts }
    const payTarget = random.int(0, targets.length - 1)
    const dupTarget = otherThan(payTarget)
    const dupDelayMs = random.int(0, 40)
    const front = deliver(orderId, payTarget, attempts)
    const duplicate = sleep(dupDelayMs, options.signal).then(() => deliver(orderId, dupTarget, attempts))
    const both = Promise.all([front, duplicate]).then((results) => {
      if (!results.some(Boolean)) totals.paymentsUnconfirmed++
    })
    queued.add(both)
    void both.finally(() => queued.delete(both))
    await front
  }

  let next = 0
  const worker = async () => {
    while (next < options.buyers && !options.signal?.aborted) {
      const n = next++
      await buyer(n)
      totals.buyersDone++
      options.onProgress?.(totals.buyersDone, totals)
    }
  }
  try {
    await Promise.all(Array.from({ length: Math.min(options.concurrency, options.buyers) }, worker))
    // The queue's duplicates still on their way (deliver never rejects).
    while (queued.size > 0) await Promise.all(queued)
  } finally {
    options.signal?.removeEventListener('abort', dropAll)
    agent.destroy()
  }
  return totals
}
