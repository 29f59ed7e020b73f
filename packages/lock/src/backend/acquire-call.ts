import type { AcquireOutcome, LockResource, QueueMode } from './backend.js'
import type { Deadlines } from '../deadline.js'
import type { Handling, InFlight } from '../scripts/define-script.js'

/** What the backend answers an acquire call with; the call hands its reply, error or late reply back. */
export interface AcquireCallHost {
  answered(call: AcquireCall, reply: unknown): AcquireOutcome | Promise<AcquireOutcome>
  failed(call: AcquireCall, error: unknown): AcquireOutcome
  late(call: AcquireCall, reply: unknown): void
}

/** Everything one acquire round trip is sent with. */
export interface AcquireCallInit {
  readonly resource: LockResource
  /** Written as the lock key's value: proves ownership to extend and release. */
  readonly ownerId: string
  readonly ttlMs: number
  /** The call's deadline, ms from `sentAt`. */
  readonly ms: number
  /** performance.now() when it is sent: the lease's validity runs from here. */
  readonly sentAt: number
  readonly mode: QueueMode
  readonly fenceTtlMs: number
  readonly lockerId: string
  /** A queued locker's lease in the Redis queue, ms. */
  readonly leaseMs: number
  /** '1': mint max(INCR, clock) — the resource's first grant in this generation (generations.ts). */
  readonly reseed: '0' | '1'
  /** The connection's generation when the call was sent. */
  readonly generation: number
  /** How many leaves had been sent when the call was sent (fair-queue/membership.ts). */
  readonly leavesBefore: number
  /** Where our locker stands in the queue, and after a grant in `stay` mode; '' for the server's clock. */
  readonly ticket: string
  readonly stayTicket: string
  /** Quorum mode with the restart guard on: the node marker's epoch the grant must find, else ''. */
  readonly epoch: string
  /** '1': the grant refreshes the token counter's expiry; '0' it need not (backend/fence-touches.ts). */
  readonly touch: '0' | '1'
  readonly deadlines: Deadlines
  readonly inFlight: InFlight
  /** The connection it goes out on: its tries are given up together when it closes. */
  readonly group: object
}

/**
 * One acquire round trip: its arguments (the object is passed to the script as is: the script
 * reads its arguments by name), its deadline, and where its reply goes. One object per attempt;
 * measured cheaper than closures.
 */
export class AcquireCall implements AcquireCallInit, Handling<AcquireOutcome> {
  readonly resource: LockResource
  readonly ownerId: string
  readonly ttlMs: number
  readonly ms: number
  readonly sentAt: number
  readonly mode: QueueMode
  readonly fenceTtlMs: number
  readonly lockerId: string
  readonly leaseMs: number
  readonly reseed: '0' | '1'
  readonly generation: number
  readonly leavesBefore: number
  readonly ticket: string
  readonly stayTicket: string
  /** Quorum mode with the restart guard on: the node marker's epoch the grant must find, else ''. */
  readonly epoch: string
  readonly touch: '0' | '1'
  readonly deadlines: Deadlines
  readonly inFlight: InFlight
  readonly group: object
  readonly #host: AcquireCallHost

  constructor(host: AcquireCallHost, init: AcquireCallInit) {
    this.#host = host
    this.resource = init.resource
    this.ownerId = init.ownerId
    this.ttlMs = init.ttlMs
    this.ms = init.ms
    this.sentAt = init.sentAt
    this.mode = init.mode
    this.fenceTtlMs = init.fenceTtlMs
    this.lockerId = init.lockerId
    this.leaseMs = init.leaseMs
    this.reseed = init.reseed
    this.generation = init.generation
    this.leavesBefore = init.leavesBefore
    this.ticket = init.ticket
    this.stayTicket = init.stayTicket
    this.epoch = init.epoch
    this.touch = init.touch
    this.deadlines = init.deadlines
    this.inFlight = init.inFlight
    this.group = init.group
  }

  map(reply: unknown): AcquireOutcome | Promise<AcquireOutcome> {
    return this.#host.answered(this, reply)
  }

  mapError(error: unknown): AcquireOutcome {
    return this.#host.failed(this, error)
  }

  onLate(reply: unknown): void {
    this.#host.late(this, reply)
  }
}
