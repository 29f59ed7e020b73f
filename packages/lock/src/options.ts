import { InvalidLockOptionError } from './errors.js'
import type { LockEvent } from './events.js'

/** Largest accepted TTL and wait: 24 hours, in milliseconds. */
export const MAX_DURATION_MS = 86_400_000
/** Largest accepted resource name, in UTF-8 bytes. */
export const MAX_RESOURCE_BYTES = 1024

/** Defaults of every option, in one frozen object. Units are in the names. */
export const LOCK_DEFAULTS = Object.freeze({
  /** Lease time of a lock. */
  ttlMs: 30_000,
  /**
   * How long `acquire()` waits for a held lock before `LockTimeoutError`. It bounds the wait for
   * a holder, not the distance to Redis: the first try always gets its round trip.
   */
  waitMs: 10_000,
  /** Prefix of every Redis key and channel. */
  prefix: 'fencelock:',
  /** Deadline of each Redis call made on a caller's behalf (also bounded by the caller's wait). */
  commandTimeoutMs: 2_000,
  /** Mean period of the jittered safety poll of a blocked acquire (a backstop for lost messages). */
  pollMs: 1_000,
  /**
   * Lifetime of a resource's token counter from the grant that seeded it: the key expires, not
   * leaks, and the next grant seeds it again from the server clock (tokens still increase).
   */
  fenceTtlMs: 86_400_000,
  /** How long a released lock stays handed to the oldest waiting locker before anyone may take it. */
  handoffMs: 500,
  /** Replicas that must acknowledge a grant or renewal before it counts (`WAIT`): none. */
  replicas: 0,
  /** How long a grant or renewal waits for its replicas' acknowledgement (`WAIT`'s timeout). */
  replicasTimeoutMs: 500,
  /** An acquire of a resource the same async context holds (inside `using()`/`lock.run()`) re-enters it. */
  reentrant: true,
  /** How waiters hear of releases on a Redis Cluster: sharded pub/sub where the servers have it (Redis 7). */
  pubsub: 'auto' as PubSubOption,
})

/** The `pubsub` option's values (see {@link LockerOptions.pubsub}). */
export type PubSubOption = 'auto' | 'sharded' | 'classic'
const PUBSUB_OPTIONS: readonly PubSubOption[] = ['auto', 'sharded', 'classic']

/** Options of a {@link Locker}; every field is optional and defaults to {@link LOCK_DEFAULTS}. */
export interface LockerOptions {
  /** Default lease time of locks, 1 ms to 24 h. Default 30 000. */
  ttlMs?: number
  /**
   * Default wait of `acquire()` for a held lock, 0 to 24 h. Default 10 000. The first try of an
   * acquire gets its round trip whatever the wait (up to `commandTimeoutMs`), as `waitMs: 0` does.
   */
  waitMs?: number
  /** Prefix of keys and channels; must not contain `{` or `}`. Default `fencelock:`. */
  prefix?: string
  /** Deadline of each Redis call, 1 ms to 60 s. Default 2 000. */
  commandTimeoutMs?: number
  /**
   * Mean period of a blocked acquire's safety poll, 10 ms to 60 s. Default 1 000. A waiter tries
   * at least this often (± 20 %) whatever else happens, which also keeps its place in the
   * resource's queue in Redis (a locker that stops trying is dropped after 3 × pollMs +
   * commandTimeoutMs).
   */
  pollMs?: number
  /**
   * Lifetime of a resource's token counter from its seed, 1 s to 30 days. Default 24 h. It is
   * then seeded again from the server clock, above every token before it (docs/LOCK.md).
   */
  fenceTtlMs?: number
  /**
   * When a lock is released while other lockers wait for it, it is handed to the one that has
   * waited longest, which gets this long to take it before anyone may; 1 ms to 60 s. Default 500.
   */
  handoffMs?: number
  /**
   * Quorum mode only: the delayed restart, done by the clients. A node that restarted without
   * persistence has lost the keys of the locks held on it; with it a second holder could win a
   * majority while the first still holds the lock. So a node found without its data when its
   * connection becomes ready (it lacks the lease record the other nodes have) sits out acquires
   * until it has been up for the longest lease any Locker recorded on the nodes — automatically,
   * across Lockers, processes and per-call `ttlMs` (docs/LOCK.md). A number sets the least it sits
   * out; `0` turns the guard off. 0 to 24 h. Default: the longest lease recorded. Refused
   * (`InvalidLockOptionError`) on one Redis, where there is no guard to set.
   */
  nodeRestartDelayMs?: number
  /**
   * One Redis with replicas (Sentinel, Cluster): how many replicas must acknowledge a grant, and
   * a renewal, before it counts. After the acquire script answers, `WAIT replicas
   * replicasTimeoutMs` goes out on the same connection; a grant not acknowledged in time is given
   * back and the acquire goes on trying until `waitMs` (then `LockReplicationError`). A failover
   * to a replica that acknowledged then keeps the grant and its token counter. 0 (off) to 16;
   * not in quorum mode. Default 0.
   */
  replicas?: number
  /** `WAIT`'s timeout for `replicas`, 1 ms to 60 s. Default 500. */
  replicasTimeoutMs?: number
  /**
   * Reentrancy: inside `using(resource, fn)` or `lock.run(fn)`, an `acquire()`, `tryAcquire()` or
   * `using()` of the same resource on this Locker, in the same async context, returns a handle on
   * the same grant — the same token and signal, no Redis round trip — and only the last handle's
   * release (the outermost) frees the lock. Other async contexts and other Lockers wait their
   * turn as usual. `false`: such an acquire waits for itself until its `waitMs` runs out.
   * Default true.
   */
  reentrant?: boolean
  /**
   * How blocked acquires hear of releases on a Redis Cluster (docs/LOCK.md, "Waiting on a
   * Cluster"). `'sharded'`: the scripts announce a release with `SPUBLISH` and waiters
   * `SSUBSCRIBE` on the shard that owns the resource's slot, so a release costs only that shard
   * (Redis 7 or later on every node). `'classic'`: `PUBLISH`/`SUBSCRIBE`, which every shard
   * broadcasts to every other. `'auto'`: sharded when the servers know `SPUBLISH`, classic
   * otherwise. Every Locker of one Cluster must use the same pub/sub, or waiters fall back on their
   * safety poll. One Redis, Sentinel and quorum mode always use classic pub/sub (`'sharded'` is
   * refused there). Default `'auto'`.
   */
  pubsub?: PubSubOption
  /**
   * ioredis and iovalkey (`Redis`, also through Sentinel, and each node of quorum mode): the
   * acquires' tries and the releases of locks nobody waits for, sent on one connection in one
   * tick of the event loop, are written to the socket together — the first at once, the rest at
   * the end of the tick or every 16 — instead of one `write` each, which was most of the client's
   * CPU per lock operation under concurrency (docs/LOCK.md, "Write coalescing"). Renewals and
   * hand-ons are written at once. Other commands sent on the client meanwhile are written with
   * them. On a GLIDE `GlideClient` the same calls go to GLIDE as one non-atomic `Batch` (each call
   * into GLIDE's core was most of its CPU per operation). `false`: each command is written (or
   * called) as it is sent. Refused on the clients where there is nothing to set: an ioredis
   * `Cluster` and a GLIDE cluster client, node-redis (which already writes a tick's commands
   * together) and etcd. Default true.
   */
  coalesceWrites?: boolean
  /** Receives typed events (acquired, contended, timeout, ...). Exceptions it throws are ignored. */
  onEvent?: (event: LockEvent) => void
}

/** Options of one `acquire()`. */
export interface AcquireOptions {
  /** Lease time, 1 ms to 24 h. Default: the locker's `ttlMs`. */
  ttlMs?: number
  /** How long to wait while the lock is held, 0 to 24 h. Default: the locker's `waitMs`. */
  waitMs?: number
  /** Gives up the wait when it aborts (`LockAbortedError`). */
  signal?: AbortSignal
  /** Renew the lock every `ttlMs / 3` until it is released. Default false. */
  autoExtend?: boolean
}

/** Options of one `tryAcquire()`: a single attempt, no wait. */
export interface TryAcquireOptions {
  /** Lease time, 1 ms to 24 h. Default: the locker's `ttlMs`. */
  ttlMs?: number
  /** Renew the lock every `ttlMs / 3` until it is released. Default false. */
  autoExtend?: boolean
}

/** Options of `using()`: the watchdog is always on. */
export interface UsingOptions {
  ttlMs?: number
  waitMs?: number
  signal?: AbortSignal
}

export interface ResolvedLockerOptions {
  readonly ttlMs: number
  readonly waitMs: number
  readonly prefix: string
  readonly commandTimeoutMs: number
  readonly pollMs: number
  readonly fenceTtlMs: number
  readonly handoffMs: number
  /** Quorum mode's delayed restart (see LockerOptions): 0 off, a number the least, undefined automatic. */
  readonly nodeRestartDelayMs: number | undefined
  readonly replicas: number
  readonly replicasTimeoutMs: number
  readonly reentrant: boolean
  readonly pubsub: PubSubOption
  /** Write coalescing (see LockerOptions): as given, undefined when not given (on where it applies). */
  readonly coalesceWrites: boolean | undefined
  readonly onEvent: ((event: LockEvent) => void) | undefined
}

/** Checks an integer duration in milliseconds; the message names the field, its range and why (if given). */
export function checkInteger(field: string, value: unknown, min: number, max: number, why?: string): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
    throw new InvalidLockOptionError(field, `must be an integer from ${min} to ${max}${why ? ` (${why})` : ''}`, value)
  }
  return value
}

/**
 * The shortest lease quorum mode takes: its validity is `ttlMs` less the clock drift (1 % + 2 ms),
 * and the grant's round trips come out of it.
 */
export const MIN_QUORUM_TTL_MS = 10

/** The shortest lease a Locker takes, and why: 1 ms on one Redis, {@link MIN_QUORUM_TTL_MS} in quorum mode. */
export interface TtlFloor {
  readonly minMs: number
  readonly why: string | undefined
}

export const SINGLE_TTL_FLOOR: TtlFloor = Object.freeze({ minMs: 1, why: undefined })
export const QUORUM_TTL_FLOOR: TtlFloor = Object.freeze({
  minMs: MIN_QUORUM_TTL_MS,
  why: 'quorum mode: the lease less the clock drift must leave time for the grant',
})

/** Checks a lease time against the Locker's floor. */
export function checkTtl(value: unknown, floor: TtlFloor = SINGLE_TTL_FLOOR): number {
  return checkInteger('ttlMs', value, floor.minMs, MAX_DURATION_MS, floor.why)
}

export function checkResource(resource: unknown): string {
  if (typeof resource !== 'string') throw new InvalidLockOptionError('resource', 'must be a string', resource)
  if (resource.length === 0) throw new InvalidLockOptionError('resource', 'must not be empty', resource)
  // A lone surrogate becomes U+FFFD in UTF-8, so two different names would share one Redis key.
  if (/\p{Cs}/u.test(resource))
    throw new InvalidLockOptionError('resource', 'must be well-formed Unicode (no lone surrogates)', resource)
  if (Buffer.byteLength(resource, 'utf8') > MAX_RESOURCE_BYTES) {
    throw new InvalidLockOptionError('resource', `must be at most ${MAX_RESOURCE_BYTES} bytes in UTF-8`, resource)
  }
  // `{}` would be an empty hash tag, and Redis Cluster would then hash each key whole.
  if (resource.startsWith('}')) throw new InvalidLockOptionError('resource', "must not start with '}'", resource)
  return resource
}

/** Only `undefined` means "use the default"; `null` is a bad value like any other. */
export function or<T>(value: unknown, fallback: T): unknown {
  return value === undefined ? fallback : value
}

/**
 * Checks an options object: an object, not an array, whose every key is its own and one of
 * `known` (a misspelled option, `waitMS` for `waitMs`, would otherwise be ignored without a word;
 * one inherited through the prototype, `Object.create({ waitMs: 1 })`, would be read without being
 * checked by name).
 */
export function checkObject(
  field: string,
  value: unknown,
  what: string,
  known: readonly string[],
): Record<string, unknown> {
  if (value === undefined) return {}
  if (value === null || typeof value !== 'object' || Array.isArray(value))
    throw new InvalidLockOptionError(field, 'must be an object (not an array)', value)
  // for-in sees inherited enumerable keys too: each must be the object's own.
  for (const key in value) {
    if (!Object.hasOwn(value, key))
      throw new InvalidLockOptionError(
        `${field}.${key}`,
        'must be an own property of the options object, not inherited through its prototype',
        (value as Record<string, unknown>)[key],
      )
    if (known.includes(key)) continue
    const near = known.find((k) => k.toLowerCase() === key.toLowerCase())
    const hint = near ? `did you mean ${near}?` : `the options are ${known.join(', ')}`
    throw new InvalidLockOptionError(
      `${field}.${key}`,
      `is not an option of ${what} (${hint})`,
      (value as Record<string, unknown>)[key],
    )
  }
  return value as Record<string, unknown>
}

const LOCKER_OPTIONS = [
  'ttlMs',
  'waitMs',
  'prefix',
  'commandTimeoutMs',
  'pollMs',
  'fenceTtlMs',
  'handoffMs',
  'nodeRestartDelayMs',
  'replicas',
  'replicasTimeoutMs',
  'reentrant',
  'pubsub',
  'coalesceWrites',
  'onEvent',
] as const
/** The options each call takes, by the call's name. */
const CALL_OPTIONS = Object.freeze({
  acquire: ['ttlMs', 'waitMs', 'signal', 'autoExtend'],
  tryAcquire: ['ttlMs', 'autoExtend'],
  using: ['ttlMs', 'waitMs', 'signal'],
} as const)

/** Which call an options object is for: the keys it may have. */
export type OptionsOf = keyof typeof CALL_OPTIONS

export function checkSignal(value: unknown): AbortSignal | undefined {
  if (value === undefined) return undefined
  if (!(value instanceof AbortSignal)) throw new InvalidLockOptionError('signal', 'must be an AbortSignal', value)
  return value
}

function checkBoolean(field: string, value: unknown): boolean {
  if (value === undefined) return false
  if (typeof value !== 'boolean') throw new InvalidLockOptionError(field, 'must be a boolean', value)
  return value
}

export function resolveLockerOptions(options: unknown, ttlFloor: TtlFloor = SINGLE_TTL_FLOOR): ResolvedLockerOptions {
  const o = checkObject('options', options, 'new Locker()', LOCKER_OPTIONS)
  const prefix = or(o.prefix, LOCK_DEFAULTS.prefix)
  if (typeof prefix !== 'string' || prefix.length > 256 || /[{}]/.test(prefix)) {
    throw new InvalidLockOptionError('prefix', "must be a string of at most 256 characters without '{' or '}'", prefix)
  }
  if (o.onEvent !== undefined && typeof o.onEvent !== 'function') {
    throw new InvalidLockOptionError('onEvent', 'must be a function', o.onEvent)
  }
  const ttlMs = checkTtl(or(o.ttlMs, LOCK_DEFAULTS.ttlMs), ttlFloor)
  return {
    ttlMs,
    waitMs: checkInteger('waitMs', or(o.waitMs, LOCK_DEFAULTS.waitMs), 0, MAX_DURATION_MS),
    prefix,
    commandTimeoutMs: checkInteger(
      'commandTimeoutMs',
      or(o.commandTimeoutMs, LOCK_DEFAULTS.commandTimeoutMs),
      1,
      60_000,
    ),
    pollMs: checkInteger('pollMs', or(o.pollMs, LOCK_DEFAULTS.pollMs), 10, 60_000),
    fenceTtlMs: checkInteger('fenceTtlMs', or(o.fenceTtlMs, LOCK_DEFAULTS.fenceTtlMs), 1_000, 30 * MAX_DURATION_MS),
    handoffMs: checkInteger('handoffMs', or(o.handoffMs, LOCK_DEFAULTS.handoffMs), 1, 60_000),
    nodeRestartDelayMs:
      o.nodeRestartDelayMs === undefined
        ? undefined
        : checkInteger('nodeRestartDelayMs', o.nodeRestartDelayMs, 0, MAX_DURATION_MS),
    replicas: checkInteger('replicas', or(o.replicas, LOCK_DEFAULTS.replicas), 0, 16),
    replicasTimeoutMs: checkInteger(
      'replicasTimeoutMs',
      or(o.replicasTimeoutMs, LOCK_DEFAULTS.replicasTimeoutMs),
      1,
      60_000,
    ),
    reentrant: o.reentrant === undefined ? LOCK_DEFAULTS.reentrant : checkBoolean('reentrant', o.reentrant),
    pubsub: checkPubSub(o.pubsub),
    coalesceWrites: o.coalesceWrites === undefined ? undefined : checkBoolean('coalesceWrites', o.coalesceWrites),
    onEvent: o.onEvent as ResolvedLockerOptions['onEvent'],
  }
}

function checkPubSub(value: unknown): PubSubOption {
  if (value === undefined) return LOCK_DEFAULTS.pubsub
  if (!PUBSUB_OPTIONS.includes(value as PubSubOption))
    throw new InvalidLockOptionError('pubsub', "must be 'auto', 'sharded' or 'classic'", value)
  return value as PubSubOption
}

export interface ResolvedAcquire {
  readonly ttlMs: number
  readonly waitMs: number
  readonly signal: AbortSignal | undefined
  readonly autoExtend: boolean
}

/** The options of one call (`acquire`, `tryAcquire` or `using`), defaults filled in; `using` always renews. */
export function resolveAcquireOptions(
  options: unknown,
  defaults: ResolvedLockerOptions,
  call: OptionsOf,
  ttlFloor: TtlFloor = SINGLE_TTL_FLOOR,
): ResolvedAcquire {
  const o = checkObject('options', options, `${call}()`, CALL_OPTIONS[call])
  return {
    ttlMs: checkTtl(or(o.ttlMs, defaults.ttlMs), ttlFloor),
    waitMs: checkInteger('waitMs', or(o.waitMs, defaults.waitMs), 0, MAX_DURATION_MS),
    signal: checkSignal(o.signal),
    autoExtend: call === 'using' || checkBoolean('autoExtend', o.autoExtend),
  }
}
