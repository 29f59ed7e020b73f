/**
 * A call was not sent, or was given up, because the connection to Redis is down (internal: the
 * Locker reports it as `LockUnavailableError`, with this as its cause). Its own `cause` is the
 * client's last connection error (`connect ECONNREFUSED 127.0.0.1:6379`), when it reported one
 * since it was last ready: then the client tried to (re)connect and failed, which is what ends an
 * acquire at once (waiting/wait-queues.ts), where a connection that merely closed (a failover,
 * `CLIENT KILL`) is reconnected by the client and tried again.
 */
export class ConnectionDownError extends Error {
  /** @param store the store named in the message (`Redis`, `etcd`). */
  constructor(lastError: Error | undefined, store = 'Redis') {
    super(
      `the connection to ${store} is down${lastError ? ` (${lastError.message})` : ''}`,
      lastError ? { cause: lastError } : undefined,
    )
    this.name = 'ConnectionDownError'
  }
}

/** A call not sent, or given up, because the connection was down (reachable or not). */
export function isConnectionDown(error: unknown): error is ConnectionDownError {
  return error instanceof ConnectionDownError
}

/** A connection known down whose client failed to (re)connect: Redis is unreachable now, not merely reconnecting. */
export function isUnreachable(error: Error | undefined): boolean {
  return error instanceof ConnectionDownError && error.cause !== undefined
}
