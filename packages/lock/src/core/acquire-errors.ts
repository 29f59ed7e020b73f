/**
 * The errors an acquire ends with, each emitted as its event first (`timeout`, `unavailable`,
 * `aborted`): the same for a lock, a re-entry that waited for its turn, and the queue lock or
 * permits of a semaphore.
 */
import { ConnectionDownError } from '../backend/connection-error.js'
import { NotReplicatedError } from '../backend/replication.js'
import { DeadlineExceededError } from '../deadline.js'
import { LockAbortedError, LockReplicationError, LockTimeoutError, LockUnavailableError } from '../errors.js'
import type { LockEvent } from '../events.js'

type Emit = (event: LockEvent) => void

/** The wait ran out: a timeout if the store (Redis, etcd) answered last, otherwise it is unavailable. */
export function giveUp(
  emit: Emit,
  resource: string,
  start: number,
  lastError: Error | undefined,
  store = 'Redis',
): Error {
  if (lastError) return unavailable(emit, resource, start, lastError, store)
  const waitedMs = performance.now() - start
  emit({ type: 'timeout', resource, waitedMs })
  return new LockTimeoutError(resource, waitedMs)
}

/**
 * The wait ran out (or a try without one failed) with the store (Redis, etcd) not answering. A connection known to
 * be down says so, with the client's last connection error (ECONNREFUSED, say) as the cause.
 */
export function unavailable(
  emit: Emit,
  resource: string,
  start: number,
  cause: Error,
  store = 'Redis',
): LockUnavailableError {
  emit({ type: 'unavailable', resource, waitedMs: performance.now() - start, error: cause })
  const prefix = `could not acquire lock "${resource}": `
  if (cause instanceof ConnectionDownError)
    return new LockUnavailableError(resource, 'acquire', prefix + cause.message, cause.cause ?? cause)
  if (cause instanceof NotReplicatedError) {
    const message = `${prefix}its grants were not acknowledged by the replicas in time (${cause.message}); they were given back`
    return new LockReplicationError(
      resource,
      'acquire',
      cause.replicas,
      cause.acknowledged,
      message,
      cause,
      cause.connectedReplicas,
    )
  }
  const why = cause instanceof DeadlineExceededError ? `${store} did not answer in time` : `the ${store} call failed`
  return new LockUnavailableError(resource, 'acquire', `${prefix}${why} (${cause.message})`, cause)
}

/** The caller's signal aborted the wait. */
export function aborted(
  emit: Emit,
  resource: string,
  start: number,
  signal: AbortSignal | undefined,
): LockAbortedError {
  const waitedMs = performance.now() - start
  emit({ type: 'aborted', resource, waitedMs })
  return new LockAbortedError(resource, waitedMs, signal?.reason)
}
