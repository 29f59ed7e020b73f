/**
 * What an instance records of its own sale, for the incident timeline (incident.ts) and the
 * "charged twice" drill-down: its lock events, the gateway calls it entered, the gateway's answer
 * to each charge and the database's answer to each write, each with the lock's token and the
 * wall clock (epoch ms: every process of a run is on one machine, so their clocks agree).
 *
 * Bounded: the live shop runs for hours, so the log keeps the newest {@link INCIDENT_LOG_LIMIT}
 * events; a flash sale of the dashboard's size records far fewer.
 *
 * Tokens are decimal strings: the log crosses the IPC channel as JSON.
 */
import type { LockEvent } from '@fencelock/lock'

/** Most events an instance keeps. */
export const INCIDENT_LOG_LIMIT = 50_000

interface EventBase {
  /** Epoch ms, when the instance saw it. */
  readonly atMs: number
  readonly instance: string
  readonly resource: string
  /** The lock's token, decimal; null without a lock (`unsafe`). */
  readonly token: string | null
}

/** One recorded event. */
export type RecordedEvent =
  | (EventBase & {
      readonly kind: 'lock'
      readonly what: 'acquired' | 'extended' | 'lost' | 'released'
      readonly ttlMs: number | null
    })
  | (EventBase & { readonly kind: 'call'; readonly operation: 'authorize' | 'charge' })
  | (EventBase & {
      readonly kind: 'charge'
      readonly orderId: number
      /** `charged`: a new charge; `replayed`: the key's first answer again; the rest: refused or failed. */
      readonly outcome: 'charged' | 'replayed' | 'refused-stale' | 'key-reused' | 'failed'
      readonly chargeId: string | null
    })
  | (EventBase & {
      readonly kind: 'write'
      /** `order`: stock decremented and the order created; `intent`: the payment's intent; `payment`: order paid and payment recorded. */
      readonly what: 'order' | 'intent' | 'payment'
      readonly outcome: 'accepted' | 'refused'
      readonly orderId: number | null
      /** The newer token on the row, when the database refused the write. */
      readonly storedToken: string | null
    })

/** A step of the shop's business code, as `ShopService` reports it (tokens as bigints). */
export type ShopStep =
  | {
      readonly kind: 'charge'
      readonly resource: string
      readonly token: bigint | undefined
      readonly orderId: number
      readonly outcome: 'charged' | 'replayed' | 'refused-stale' | 'key-reused' | 'failed'
      readonly chargeId: string | null
    }
  | {
      readonly kind: 'write'
      readonly resource: string
      readonly token: bigint | undefined
      readonly what: 'order' | 'intent' | 'payment'
      readonly outcome: 'accepted' | 'refused'
      readonly orderId: number | null
      readonly storedToken: bigint | undefined
    }

const tokenOf = (token: bigint | undefined | null): string | null =>
  token === undefined || token === null ? null : String(token)

/**
 * An instance's event log.
 * @example
 * ```ts
 * const log = new IncidentLog('shop-1')
 * const locker = new Locker(redis, { onEvent: log.lockListener() })
 * log.events() // sent with the instance's stats
 * ```
 */
export class IncidentLog {
  readonly #instance: string
  readonly #limit: number
  #events: RecordedEvent[] = []
  readonly #now: () => number

  constructor(instance: string, options: { limit?: number; now?: () => number } = {}) {
    this.#instance = instance
    this.#limit = options.limit ?? INCIDENT_LOG_LIMIT
    this.#now = options.now ?? Date.now
  }

  #push(event: RecordedEvent): void {
    this.#events.push(event)
    // Drop the oldest tenth at once rather than one per push: amortised O(1).
    if (this.#events.length > this.#limit) this.#events = this.#events.slice(Math.ceil(this.#limit / 10))
  }

  /** A listener for the locker's events. */
  lockListener(): (event: LockEvent) => void {
    return (event) => {
      const base = { atMs: this.#now(), instance: this.#instance, resource: event.resource }
      if (event.type === 'acquired' || event.type === 'extended')
        this.#push({ ...base, kind: 'lock', what: event.type, token: String(event.token), ttlMs: event.ttlMs })
      else if (event.type === 'lost' || event.type === 'released')
        this.#push({ ...base, kind: 'lock', what: event.type, token: String(event.token), ttlMs: null })
    }
  }

  /** The business code entered a gateway call (a pause target). */
  call(call: { operation: 'authorize' | 'charge'; resource: string; token: bigint | undefined }): void {
    this.#push({
      atMs: this.#now(),
      instance: this.#instance,
      kind: 'call',
      operation: call.operation,
      resource: call.resource,
      token: tokenOf(call.token),
    })
  }

  /** A charge's answer or a write's outcome. */
  step(step: ShopStep): void {
    const base = { atMs: this.#now(), instance: this.#instance, resource: step.resource, token: tokenOf(step.token) }
    if (step.kind === 'charge')
      this.#push({ ...base, kind: 'charge', orderId: step.orderId, outcome: step.outcome, chargeId: step.chargeId })
    else
      this.#push({
        ...base,
        kind: 'write',
        what: step.what,
        outcome: step.outcome,
        orderId: step.orderId,
        storedToken: tokenOf(step.storedToken),
      })
  }

  /** A copy of the events, oldest first. */
  events(): RecordedEvent[] {
    return [...this.#events]
  }
}
