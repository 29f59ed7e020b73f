/**
 * Whether etcd is unreachable from a Locker's client, judged from what the client's calls come
 * to. An `etcd3` client has no connection state to read (gRPC connects per call), but it says
 * plainly when it could not connect, and where: gRPC's `UNAVAILABLE: No connection established
 * (… connect ECONNREFUSED 127.0.0.1:2379 …)` or `Name resolution failed for target dns:…`; and
 * etcd3's circuit breaker, once a member failed three times in a row, refuses every call to it for
 * 5 s (`BrokenCircuitError`). That is the etcd side of Redis's "down, and the reconnection failed"
 * (backend/connection.ts), and it ends an acquire that never reached etcd at once
 * (waiting/wait-queues.ts) instead of after its `waitMs`.
 *
 * etcd is unreachable when **every member the client knows has refused a connection** since the
 * last answer: the distinct addresses the refusals name reach the number of the client's
 * endpoints. One member, one refusal; a cluster, a refusal from each. A refusal says nothing of
 * the other members: with one member of three killed, etcd3 sends some calls to it (its keep-alive
 * streams are not retried elsewhere, its unary calls end with its refusal when that was the last
 * retry), and while the survivors elect a new leader they answer nothing — for seconds with a long
 * election timeout. Counting refusals in a row, as this module first did, took that for the
 * cluster down and failed every acquire at once (a clean-clone CI run: 1,835 acquires, two members
 * of three serving; test/etcd/cluster.test.ts makes it certain with a 3 s election timeout).
 *
 * Any other outcome (an answer, an error etcd itself sent) clears the refusals; a call still
 * pending counts for nothing yet; an open circuit, or a failure that names no address, adds none.
 * A client whose endpoints cannot be read (not an `Etcd3`) is never judged unreachable: its
 * acquires end by their `waitMs`.
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

/** gRPC's own words for a connection that could not be made (grpc-js). */
const CONNECT_FAILURE =
  /No connection established|Name resolution failed|ECONNREFUSED|ENOTFOUND|EAI_AGAIN|EHOSTUNREACH|ENETUNREACH/

/** Where a connection failure was: the address a connect names, or the target a resolution failed for. */
const FAILED_AT = /(?:ECONNREFUSED|ENOTFOUND|EAI_AGAIN|EHOSTUNREACH|ENETUNREACH) ([^\s,;)]+)|for target ([^\s,;)]+)/

/** An open circuit of etcd3's fault handling (cockatiel's `BrokenCircuitError`). */
function isOpenCircuit(error: Error): boolean {
  return (error as { isBrokenCircuitError?: unknown }).isBrokenCircuitError === true
}

/** The client failed to connect (or refused to try, its circuit open), as opposed to etcd answering. */
export function isConnectFailure(error: Error): boolean {
  return isOpenCircuit(error) || CONNECT_FAILURE.test(error.message)
}

/** The address (or resolver target) a connection failure names; undefined when it names none. */
export function failedAddress(error: Error): string | undefined {
  const m = FAILED_AT.exec(error.message)
  const where = m?.[1] ?? m?.[2]
  return where?.replace(/\.$/, '')
}

/**
 * How many members an etcd3 client talks to: its `hosts` option (etcd3 keeps its options on the
 * client, and on a namespace made from it; `127.0.0.1:2379` when none was given); undefined for a
 * client that does not show them.
 */
export function endpointCount(client: object): number | undefined {
  const options = (client as { options?: unknown }).options
  if (options === null || typeof options !== 'object') return undefined
  const hosts = (options as { hosts?: unknown }).hosts
  if (hosts === undefined || typeof hosts === 'string') return 1
  if (Array.isArray(hosts) && hosts.length > 0) return hosts.length
  return undefined
}

/** What a Locker's etcd calls say of the connection; fed with every call's own outcome (late ones too). */
export class EtcdReachability {
  /** How many members the client talks to (undefined: unknown, never judged unreachable). */
  readonly #endpoints: number | undefined
  /** Addresses that refused a connection since the last answer. */
  readonly #refused = new Set<string>()
  /** performance.now() of the last connection failure. */
  #lastAt = Number.NEGATIVE_INFINITY
  /** The client's last own connection error (not an open circuit, which says no more than "see before"). */
  #cause: Error | undefined

  constructor(endpoints: number | undefined) {
    this.#endpoints = endpoints
  }

  /** A call was answered (whatever it said). */
  answered(): void {
    this.#refused.clear()
    this.#cause = undefined
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
    const where = failedAddress(error)
    if (where !== undefined) this.#refused.add(where)
    this.#lastAt = performance.now()
    if (!isOpenCircuit(error) || this.#cause === undefined) this.#cause = error
    return this.#unreachable() ? new EtcdDownError(this.#cause) : error
  }

  #unreachable(): boolean {
    return this.#endpoints !== undefined && this.#refused.size >= this.#endpoints
  }

  /** The error a try fails with now without being sent: etcd was unreachable at the last call, lately. */
  down(): EtcdDownError | undefined {
    if (!this.#unreachable() || this.#cause === undefined) return undefined
    if (performance.now() - this.#lastAt >= ETCD_DOWN_FOR_MS) return undefined
    return new EtcdDownError(this.#cause)
  }
}
