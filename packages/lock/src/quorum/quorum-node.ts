import type { AcquireOutcome } from '../backend/backend.js'
import type { RedisConnection } from '../client/redis-client.js'
import type { RedisBackend } from '../backend/redis-backend.js'
import { NodeDataLostError } from '../scripts/node-marker.js'

/**
 * A node whose calls in flight have had no answer for this long while other nodes answered is
 * stalled (SIGSTOP, a partition): it is sent no more acquires until one answers or misses its
 * deadline, so calls do not pile up for it meanwhile. Relative to the other nodes' answers, so a
 * pause of our own event loop (every reply waits unread) stalls no node; long enough that a node
 * merely starved of CPU for a moment on a busy machine is not taken for one.
 */
export const STALL_MS = 200

/** When any node of the quorum last answered (performance.now()), shared by the nodes. */
export interface QuorumClock {
  answeredAt: number
}

/**
 * One node of the quorum: its single-node backend (which owns its connection's state and gives
 * up a try when the connection closes), and whether a call to it is worth sending — its health,
 * from the calls sent to it, and its restart guard state (restart-guard.ts).
 */
export class QuorumNode {
  /** Calls sent to the node through this backend that have not settled yet. */
  #inflight = 0
  /** Its last call failed or missed its deadline, and no call has answered since. */
  #failing = false
  /** When the node last answered, and when its calls in flight began (it was idle before). */
  #answeredAt = 0
  #busySince = 0
  /**
   * performance.now() until which the node takes no part in acquires: it may have lost the keys
   * of locks still held (restart-guard.ts). Infinity while that is being found out.
   */
  youngUntil = 0
  /** Why its last restart-guard check failed (kept while it is checked again, until one succeeds). */
  checkFailure: string | undefined = undefined
  /**
   * The node marker's epoch this Locker learned at the node's last check (scripts/node-marker.ts):
   * a grant or raise sent to the node checks it where the node may have lost its data. Undefined
   * with the restart guard off.
   */
  epoch: string | undefined
  /**
   * Why the node may drop a held lock's key on its own (an evicting `maxmemory-policy` under a
   * `maxmemory`), found by its last check: it takes no part in acquires. Undefined when it cannot.
   */
  evicts: string | undefined
  /** Called when a call found the node's marker gone (it lost its data): the restart guard's. */
  onDataLost: (() => void) | undefined

  constructor(
    readonly index: number,
    readonly backend: RedisBackend,
    readonly client: RedisConnection,
    readonly clock: QuorumClock,
  ) {}

  /**
   * Whether a call is worth sending: not while its connection is known to be down (a call would
   * wait in the offline queue, and calls would pile up there for as long as the node stays
   * down), nor while its last call failed or missed its deadline and another is in flight (one
   * call at a time, a probe, until one answers). Releases, renewals and the second phase go to
   * every reachable node: each follows an acquire sent to it, so they are bounded as those are.
   */
  get reachable(): boolean {
    return !this.backend.connection.down && !(this.#failing && this.#inflight > 0)
  }

  /**
   * Reachable, and not stalled: its calls in flight have had answers lately, or the other nodes
   * have not answered either. New acquires go only to such nodes.
   */
  get usable(): boolean {
    if (!this.reachable) return false
    return this.#inflight === 0 || this.clock.answeredAt - Math.max(this.#answeredAt, this.#busySince) <= STALL_MS
  }

  /** Usable, and not sitting out after a restart: it may count toward an acquire's majority. */
  get grants(): boolean {
    return this.usable && this.evicts === undefined && (this.youngUntil === 0 || performance.now() >= this.youngUntil)
  }

  /** Within the delayed restart: ms left (Infinity while it is being checked), else 0. */
  get youngForMs(): number {
    return Math.max(0, this.youngUntil - performance.now())
  }

  /** Why the node was not asked. */
  whyNotAsked(): string {
    if (this.backend.connection.down) return 'its connection is down'
    if (!this.reachable) return 'its last call failed and a probe is in flight'
    if (!this.usable) return 'its calls in flight have not been answered lately while other nodes answered'
    if (this.evicts !== undefined) return this.evicts
    const left = this.youngForMs
    if (left === Number.POSITIVE_INFINITY && this.checkFailure !== undefined)
      return `it (re)connected or lost its data, and whether it forgot a live lease could not be checked yet (${this.checkFailure})`
    return left === Number.POSITIVE_INFINITY
      ? 'it (re)connected or lost its data, and whether it forgot a live lease is being checked'
      : `it may have restarted or lost its data and sits out acquires for ${Math.round(left)} ms more (restart guard)`
  }

  /**
   * An acquire sent to the node, counted in its health — a grant or a miss is an answer, a failure
   * marks it failing, a try cut short by the caller's own wait says nothing — and then by the
   * attempt it belongs to. (The backend's acquire never rejects: its outcome says what happened.)
   */
  acquire(call: Promise<AcquireOutcome>, attempt: { count(node: QuorumNode, outcome: AcquireOutcome): void }): void {
    this.#begin()
    void call.then((outcome) => {
      this.#inflight--
      if (outcome.granted || outcome.error === undefined) this.#answered()
      else if (outcome.error instanceof NodeDataLostError) {
        this.#answered() // it answered; it sits out from now on (restart-guard.ts)
        this.onDataLost?.()
      } else if (!outcome.cut) this.#failing = true
      attempt.count(this, outcome)
    })
  }

  /** Any other call (releases, renewals, the second phase), counted in the node's health. */
  track<T>(call: Promise<T>): Promise<T> {
    this.#begin()
    return call.then(
      (value) => {
        this.#inflight--
        this.#answered()
        return value
      },
      (error: unknown) => {
        this.#inflight--
        this.#failing = true
        throw error
      },
    )
  }

  #begin(): void {
    if (this.#inflight++ === 0) this.#busySince = performance.now()
  }

  #answered(): void {
    this.#failing = false
    this.#answeredAt = performance.now()
    this.clock.answeredAt = this.#answeredAt
  }
}
