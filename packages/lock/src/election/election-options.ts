import { InvalidLockOptionError } from '../errors.js'
import {
  checkInteger,
  checkObject,
  checkResource,
  checkTtl,
  MAX_DURATION_MS,
  MAX_RESOURCE_BYTES,
  or,
  type TtlFloor,
} from '../options.js'

/** Why a leader stopped leading (the `demoted` event, `onDemoted`). */
export type DemotionReason =
  /** Its lease was lost: Redis gave it to another (it paused past its lease) or it ran out on our clock. */
  | 'lost'
  /** `stop()` resigned. */
  | 'stopped'
  /** The Locker was closed. */
  | 'closed'
  /** `onElected` threw or its promise rejected: the leader resigned, and campaigns again after `retryMs`. */
  | 'failed'

/** Options of `locker.lead(name, options)`. */
export interface LeadOptions {
  /**
   * Called when this process becomes the leader. `term` is the lease's fencing token: strictly
   * greater than every earlier leader's term of `name`; fence everything the leader writes with it.
   * `signal` aborts when the leadership ends (lost, stopped, closed), with a `LeadershipEndedError`
   * (a lost lease: its `cause` is the `LockLostError`). What it returns is awaited only for a
   * rejection, which resigns (reason `failed`).
   */
  onElected: (term: bigint, signal: AbortSignal) => unknown
  /** Called once per term when it ends, after `signal` aborted. Exceptions it throws are ignored. */
  onDemoted?: (reason: DemotionReason, term: bigint) => void
  /** The leader's lease, renewed by the watchdog every `ttlMs / 3`. Default: the Locker's `ttlMs`. */
  ttlMs?: number
  /** Pause before campaigning again after Redis was unavailable or `onElected` failed, 1 ms to 60 s. Default 1 000. */
  retryMs?: number
}

/** Defaults of `lead()` and `runOnce()` options, units in the names. */
export const ELECTION_DEFAULTS = Object.freeze({
  /** `lead()`: pause before campaigning again after Redis was unavailable or `onElected` failed. */
  retryMs: 1_000,
})

export interface ResolvedLead {
  readonly name: string
  readonly onElected: (term: bigint, signal: AbortSignal) => unknown
  readonly onDemoted: ((reason: DemotionReason, term: bigint) => void) | undefined
  readonly ttlMs: number
  readonly retryMs: number
}

const LEAD_OPTIONS = ['onElected', 'onDemoted', 'ttlMs', 'retryMs'] as const

/** A lock resource name, the error naming `field`. */
function checkName(field: string, value: unknown): string {
  try {
    return checkResource(value)
  } catch (error) {
    if (error instanceof InvalidLockOptionError) throw new InvalidLockOptionError(field, error.rule, value)
    throw error
  }
}

function checkFunction(field: string, value: unknown, required: boolean): void {
  if (value === undefined && !required) return
  if (typeof value !== 'function') throw new InvalidLockOptionError(field, 'must be a function', value)
}

export function resolveLeadOptions(name: unknown, options: unknown, ttlMs: number, floor: TtlFloor): ResolvedLead {
  const resource = checkName('name', name)
  if (options === undefined) throw new InvalidLockOptionError('options', 'must be an object with onElected', options)
  const o = checkObject('options', options, 'lead()', LEAD_OPTIONS)
  checkFunction('onElected', o.onElected, true)
  checkFunction('onDemoted', o.onDemoted, false)
  return {
    name: resource,
    onElected: o.onElected as ResolvedLead['onElected'],
    onDemoted: o.onDemoted as ResolvedLead['onDemoted'],
    ttlMs: checkTtl(or(o.ttlMs, ttlMs), floor),
    retryMs: checkInteger('retryMs', or(o.retryMs, ELECTION_DEFAULTS.retryMs), 1, 60_000),
  }
}

/** What one instance did with one tick of `runOnce()` (the `tick` event, `onTick`). */
export type TickOutcome =
  /** This instance ran the job to completion under the tick's lease, and recorded the tick done. */
  | 'ran'
  /**
   * Another instance ran the job (or still runs it): it held the tick's lock until the window
   * ended, or had recorded the tick done when this one got the lock (it then lost its lease).
   */
  | 'skipped'
  /** The job threw here; the tick's lock was released so another instance may still run it in its window. */
  | 'failed'
  /**
   * The lease ran out during the job (a pause past the lease): another instance may run the tick;
   * the fenced writes of this one are refused.
   */
  | 'lost'
  /**
   * The window ended and this instance could neither run the tick nor see a holder: Redis
   * unavailable, or the lock came free only after the window.
   */
  | 'missed'

/** One tick, as the job sees it. */
export interface Tick {
  /** The tick's number: `floor(Date.now() / everyMs)` at its start. */
  readonly tick: number
  /** The lock resource of this tick: `<key>:<tick>`. Fence the tick's rows with it. */
  readonly resource: string
  /** The tick's fencing token: carry it in every write the job makes. */
  readonly token: bigint
  /** Aborts with a `LockLostError` when the tick's lease is lost. */
  readonly signal: AbortSignal
}

/** One instance's report of one tick. */
export interface TickReport {
  readonly key: string
  readonly tick: number
  readonly outcome: TickOutcome
  /** The token this instance held the tick with (`ran`, `failed`, `lost`, a late grant's `missed`). */
  readonly token?: bigint
  /** What the job threw (`failed`), or the Redis failure (`missed`). */
  readonly error?: Error
}

/** Options of `locker.runOnce(job, options)`. */
export interface RunOnceOptions {
  /** Names the job; the tick's lock resource is `<key>:<tick>`. Required. */
  key: string
  /**
   * Length of a tick, 10 ms to 24 h: one run per window `[n × everyMs, (n + 1) × everyMs)` of the
   * wall clock. Required.
   */
  everyMs: number
  /**
   * Lease of a tick's lock, renewed by the watchdog while the job runs; a paused runner's tick is
   * taken over this long after it stopped renewing. Shorter than `everyMs`. Default: the Locker's
   * `ttlMs`, capped at a third of `everyMs`.
   */
  leaseMs?: number
  /** Receives this instance's report of each tick it tried. Exceptions it throws are ignored. */
  onTick?: (report: TickReport) => void
}

export interface ResolvedRunOnce {
  readonly key: string
  readonly job: (tick: Tick) => unknown
  readonly everyMs: number
  readonly leaseMs: number
  readonly onTick: ((report: TickReport) => void) | undefined
}

const RUN_ONCE_OPTIONS = ['key', 'everyMs', 'leaseMs', 'onTick'] as const

export function resolveRunOnceOptions(job: unknown, options: unknown, ttlMs: number, floor: TtlFloor): ResolvedRunOnce {
  checkFunction('job', job, true)
  if (options === undefined)
    throw new InvalidLockOptionError('options', 'must be an object with key and everyMs', options)
  const o = checkObject('options', options, 'runOnce()', RUN_ONCE_OPTIONS)
  const key = checkName('key', o.key)
  // The tick's resource appends ':' and up to 16 digits.
  if (Buffer.byteLength(key, 'utf8') > MAX_RESOURCE_BYTES - 17) {
    throw new InvalidLockOptionError('key', `must be at most ${MAX_RESOURCE_BYTES - 17} bytes in UTF-8`, key)
  }
  const everyMs = checkInteger('everyMs', o.everyMs, 10, MAX_DURATION_MS)
  const leaseDefault = Math.max(floor.minMs, Math.min(ttlMs, Math.floor(everyMs / 3)))
  const leaseMs = checkTtl(or(o.leaseMs, leaseDefault), floor)
  if (leaseMs >= everyMs) {
    throw new InvalidLockOptionError('leaseMs', `must be shorter than everyMs (${everyMs})`, leaseMs)
  }
  checkFunction('onTick', o.onTick, false)
  return {
    key,
    job: job as ResolvedRunOnce['job'],
    everyMs,
    leaseMs,
    onTick: o.onTick as ResolvedRunOnce['onTick'],
  }
}
