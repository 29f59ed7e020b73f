/**
 * A call was not sent, or was given up, because the connection to Redis is down (internal: the
 * Locker reports it as `LockUnavailableError`, with this as its cause). Its own `cause` is the
 * client's last connection error (`connect ECONNREFUSED 127.0.0.1:6379`), when it reported one.
 */
export class ConnectionDownError extends Error {
  constructor(lastError: Error | undefined) {
    super(
      `the connection to Redis is down${lastError ? ` (${lastError.message})` : ''}`,
      lastError ? { cause: lastError } : undefined,
    )
    this.name = 'ConnectionDownError'
  }
}
