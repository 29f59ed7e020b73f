/** Raised (internally) when a Redis call did not answer within its deadline. */
export class DeadlineExceededError extends Error {
  constructor(readonly ms: number) {
    super(`Redis did not answer within ${Math.round(ms)} ms`)
    this.name = 'DeadlineExceededError'
  }
}

/**
 * Settles with `promise`, or rejects with {@link DeadlineExceededError} after `ms`. ioredis has
 * no command timeout by default and queues commands while disconnected, so every call made on a
 * caller's behalf goes through here. The late outcome of `promise` is swallowed: the caller has
 * already been told, and an acquire that lands late is cleaned up by its own compare-and-delete.
 */
export function withDeadline<T>(promise: Promise<T>, ms: number): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => reject(new DeadlineExceededError(ms)), Math.max(0, ms))
    promise.then(
      (value) => {
        clearTimeout(timer)
        resolve(value)
      },
      (error: unknown) => {
        clearTimeout(timer)
        reject(error)
      },
    )
  })
}
