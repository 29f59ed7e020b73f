/**
 * Errors thrown by `@fencelock/lock`. Every failure has its own class under {@link LockError},
 * with `name` set and read-only context, so callers branch on the class, never on the text.
 */

/** Base class of every error this package throws. */
export class LockError extends Error {
  /** The lock resource the failure concerns, when there is one. */
  readonly resource: string | undefined

  constructor(message: string, options: { resource?: string | undefined; cause?: unknown } = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause })
    this.name = new.target.name
    this.resource = options.resource
  }
}

/** `acquire()` waited `waitMs` and the lock stayed held by someone else. */
export class LockTimeoutError extends LockError {
  /** How long the caller waited, in milliseconds (monotonic clock). */
  readonly waitedMs: number

  /** @param what `semaphore` when the wait was for a permit of the semaphore `resource`. */
  constructor(resource: string, waitedMs: number, what: 'lock' | 'semaphore' = 'lock') {
    const of = what === 'lock' ? `lock "${resource}"` : `a permit of semaphore "${resource}"`
    super(`timed out after ${Math.round(waitedMs)} ms waiting for ${of}`, { resource })
    this.waitedMs = waitedMs
  }
}

/** Why a held lock stopped being ours. */
export type LockLostReason =
  /** Redis says another owner holds the key, or nobody does (it expired or was deleted). */
  | 'not-owner'
  /** The local validity (TTL measured on the monotonic clock) ran out before a renewal succeeded. */
  | 'expired'
  /** `Locker.close()` released it while the routine holding it was still running. */
  | 'closed'

/**
 * We no longer own the lock: `extend()` found another owner or no key, or the watchdog did.
 * It is also the `reason` of `lock.signal` once the lock is lost.
 */
export class LockLostError extends LockError {
  /** The fencing token of the grant that was lost. */
  readonly token: bigint
  readonly reason: LockLostReason

  constructor(resource: string, token: bigint, reason: LockLostReason, cause?: unknown) {
    const why =
      reason === 'expired'
        ? 'its validity ran out before a renewal succeeded'
        : reason === 'closed'
          ? 'its locker was closed'
          : 'Redis no longer holds our owner id'
    super(`lock "${resource}" (token ${token}) was lost: ${why}`, { resource, cause })
    this.token = token
    this.reason = reason
  }
}

/**
 * Redis did not answer in time or refused the command (down, stalled, disconnected, closed
 * locker). The outcome of an acquire that ends this way has been cleaned up: no lock is left
 * behind in our name.
 */
export class LockUnavailableError extends LockError {
  /** The operation that could not be completed. */
  readonly operation: 'acquire' | 'extend' | 'release' | 'inspect'

  constructor(
    resource: string | undefined,
    operation: 'acquire' | 'extend' | 'release' | 'inspect',
    message: string,
    cause?: unknown,
  ) {
    super(message, { resource, cause })
    this.operation = operation
  }
}

/**
 * The `replicas` option: grants (or a renewal) were made, but not acknowledged by that many
 * replicas within `replicasTimeoutMs`, so they were given back (a renewal: not counted). A
 * `LockUnavailableError`: the lock was not to be had safely in time.
 */
export class LockReplicationError extends LockUnavailableError {
  /** Replicas that had to acknowledge. */
  readonly replicas: number
  /** Replicas that did, on the last try. */
  readonly acknowledged: number
  /**
   * Replicas the primary had connected on the last try (its `ROLE`), when it answered: below
   * `replicas` the option cannot be met until replicas come back (0: none is reachable).
   */
  readonly connectedReplicas: number | undefined

  constructor(
    resource: string,
    operation: 'acquire' | 'extend',
    replicas: number,
    acknowledged: number,
    message: string,
    cause?: unknown,
    connectedReplicas?: number,
  ) {
    super(resource, operation, message, cause)
    this.replicas = replicas
    this.acknowledged = acknowledged
    this.connectedReplicas = connectedReplicas
  }
}

/** An acquire gave up because the caller's `AbortSignal` fired. `cause` is the signal's reason. */
export class LockAbortedError extends LockError {
  readonly waitedMs: number

  /** @param what `semaphore` when the wait was for a permit of the semaphore `resource`. */
  constructor(resource: string, waitedMs: number, cause: unknown, what: 'lock' | 'semaphore' = 'lock') {
    const of = what === 'lock' ? `lock "${resource}"` : `a permit of semaphore "${resource}"`
    super(`acquire of ${of} was aborted after ${Math.round(waitedMs)} ms`, { resource, cause })
    this.waitedMs = waitedMs
  }
}

/**
 * The reason of a leader's `signal` (`locker.lead()`) when its term ends. `reason` says why; a
 * lost lease has the `LockLostError` as its `cause`.
 */
export class LeadershipEndedError extends LockError {
  /** The term that ended. */
  readonly term: bigint
  readonly reason: 'lost' | 'stopped' | 'closed' | 'failed'

  constructor(resource: string, term: bigint, reason: 'lost' | 'stopped' | 'closed' | 'failed', cause?: unknown) {
    super(`leadership of "${resource}" (term ${term}) ended: ${reason}`, { resource, cause })
    this.term = term
    this.reason = reason
  }
}

/** A bad argument, detected before any I/O. `field` names it; `rule` says what it must be. */
export class InvalidLockOptionError extends LockError {
  readonly field: string
  readonly rule: string

  constructor(field: string, rule: string, value: unknown) {
    super(`invalid ${field}: ${rule} (got ${describe(value)})`)
    this.field = field
    this.rule = rule
  }
}

function describe(value: unknown): string {
  if (typeof value === 'string')
    return value.length > 40 ? `a string of ${value.length} characters` : JSON.stringify(value)
  if (typeof value === 'number' || typeof value === 'boolean' || value == null) return String(value)
  if (typeof value === 'bigint') return `${value}n`
  return typeof value
}

/** Anything thrown, as an Error (a non-Error is wrapped, its text kept). */
export function asError(error: unknown): Error {
  return error instanceof Error ? error : new Error(String(error))
}
