/**
 * Whether etcd is unreachable from a Locker's client, judged from what the client's calls come
 * to. An `etcd3` client has no connection state to read (gRPC connects per call), but it says
 * plainly when it could not connect: gRPC's `UNAVAILABLE: No connection established (… connect
 * ECONNREFUSED …)` or `Name resolution failed`, and etcd3's circuit breaker, once a member failed
 * three times in a row, refuses every call to it for 5 s (`BrokenCircuitError`) — every member's,
 * when the call fails. That is the etcd side of Redis's "down, and the reconnection failed"
 * (backend/connection.ts), and it ends an acquire that never reached etcd at once
 * (waiting/wait-queues.ts) instead of after its `waitMs`.
 *
 * Two such failures in a row, with no other outcome between and no answer for {@link ETCD_QUIET_MS},
 * make etcd unreachable: with several
 * members, etcd3 sends a failed call to another member, so one refused connection (a member
 * killed, the others still serving) can be the last of its attempts while the cluster works; two
 * in a row with nothing answered between are the client finding no member to talk to. A single
 * member down gives them at once: the first call's refusal, then its open circuit for the next.
 * Any other outcome (an answer, an error etcd itself sent) ends the streak; a call still pending
 * counts for nothing yet.
 */
import { ConnectionDownError } from '../backend/connection-error.js'

/**
 * A call was not answered because etcd is unreachable (internal: the Locker reports it as
 * `LockUnavailableError`, with this error's cause — the client's own connection error — as its
 * cause).
 */
export class EtcdDownError extends ConnectionDownError {
  constructor(cause: Error) {
    super(cause, 'etcd')
    this.name = 'EtcdDownError'
  }
}

/**
 * How long a connection failure counts as the present state when no call is made: etcd3 keeps a
 * failing member's circuit open for 5 s, so a call made this soon after would meet it anyway;
 * short enough that a member back is tried again soon. Calls refresh it while etcd stays down.
 */
export const ETCD_DOWN_FOR_MS = 2_000

/** Failures in a row that make etcd unreachable (see the module comment). */
const STREAK = 2

/**
 * And no call answered for this long: with several members, calls in flight at once when one
 * member is killed can each meet its refusal before any other call is answered (a clean-clone CI
 * run: three acquires of a 3-member cluster failed "etcd is down" the moment its leader was killed,
 * the other two members serving). Calls answered this lately say some member is reachable; a
 * client that reaches none stops getting answers, and is found down this much later.
 */
export const ETCD_QUIET_MS = 1_000

/** gRPC's own words for a connection that could not be made (grpc-js). */
const CONNECT_FAILURE =
  /No connection established|Name resolution failed|ECONNREFUSED|ENOTFOUND|EAI_AGAIN|EHOSTUNREACH|ENETUNREACH/

/** An open circuit of etcd3's fault handling (cockatiel's `BrokenCircuitError`). */
function isOpenCircuit(error: Error): boolean {
  return (error as { isBrokenCircuitError?: unknown }).isBrokenCircuitError === true
}

/** The client failed to connect (or refused to try, its circuit open), as opposed to etcd answering. */
export function isConnectFailure(error: Error): boolean {
  return isOpenCircuit(error) || CONNECT_FAILURE.test(error.message)
}

/** What a Locker's etcd calls say of the connection; fed with every call's own outcome (late ones too). */
export class EtcdReachability {
  #streak = 0
  /** performance.now() of the last connection failure. */
  #lastAt = Number.NEGATIVE_INFINITY
  /** performance.now() of the last answer. */
  #answeredAt = Number.NEGATIVE_INFINITY
  /** The client's last own connection error (not an open circuit, which says no more than "see before"). */
  #cause: Error | undefined

  /** A call was answered (whatever it said). */
  answered(): void {
    this.#streak = 0
    this.#cause = undefined
    this.#answeredAt = performance.now()
  }

  /**
   * A call failed with `error`.
   * @returns the error to fail with: an {@link EtcdDownError} when etcd is now unreachable, else `error`.
   */
  failed(error: Error): Error {
    if (!isConnectFailure(error)) {
      this.answered()
      return error
    }
    this.#streak++
    this.#lastAt = performance.now()
    if (!isOpenCircuit(error) || this.#cause === undefined) this.#cause = error
    return this.#unreachable() ? new EtcdDownError(this.#cause) : error
  }

  #unreachable(): boolean {
    return this.#streak >= STREAK && performance.now() - this.#answeredAt >= ETCD_QUIET_MS
  }

  /** The error a try fails with now without being sent: etcd was unreachable at the last call, lately. */
  down(): EtcdDownError | undefined {
    if (!this.#unreachable() || this.#cause === undefined) return undefined
    if (performance.now() - this.#lastAt >= ETCD_DOWN_FOR_MS) return undefined
    return new EtcdDownError(this.#cause)
  }
}
