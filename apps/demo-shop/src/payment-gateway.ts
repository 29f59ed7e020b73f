/**
 * A simulated payment gateway: each call takes a random latency, like a card network. It is
 * called OUTSIDE any database transaction, as it should be — holding a transaction across an
 * external call is the anti-pattern, and it is also where a pause (GC, SIGSTOP) outlives the
 * lock's lease while the process holds no row lock that would make the others wait.
 */
import { randomUUID } from 'node:crypto'

/** What the shop needs from a gateway. */
export interface PaymentGateway {
  /** Authorizes (holds) an amount on the buyer's card at purchase time. */
  authorize(request: { buyerId: string; amountCents: number }): Promise<{ authorizationId: string }>
  /** Charges an order. */
  charge(request: { orderId: number; amountCents: number }): Promise<{ chargeId: string }>
}

/** Latency range of the simulated gateway, in ms, both ends included. */
export interface GatewayLatency {
  readonly minMs: number
  readonly maxMs: number
}

/** A gateway that answers after a latency drawn uniformly from `latency` (by `random`, default Math.random). */
export function simulatedGateway(latency: GatewayLatency, random: () => number = Math.random): PaymentGateway {
  const wait = () => new Promise<void>((r) => setTimeout(r, latency.minMs + Math.floor(random() * (latency.maxMs - latency.minMs + 1))))
  return {
    async authorize() {
      await wait()
      return { authorizationId: `auth_${randomUUID()}` }
    },
    async charge() {
      await wait()
      return { chargeId: `ch_${randomUUID()}` }
    },
  }
}

/** Parses `"30-80"` or `"50"` into a latency range; throws RangeError with what it must be. */
export function parseLatency(text: string): GatewayLatency {
  const m = /^(\d{1,5})(?:-(\d{1,5}))?$/.exec(text.trim())
  if (m === null) throw new RangeError(`gateway latency must be "<ms>" or "<min>-<max>" in ms (got ${JSON.stringify(text)})`)
  const minMs = Number(m[1])
  const maxMs = m[2] === undefined ? minMs : Number(m[2])
  if (maxMs < minMs) throw new RangeError(`gateway latency: max ${maxMs} is below min ${minMs}`)
  if (maxMs > 60_000) throw new RangeError(`gateway latency must be at most 60000 ms (got ${maxMs})`)
  return { minMs, maxMs }
}
