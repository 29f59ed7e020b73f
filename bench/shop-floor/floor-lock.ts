// The floor's lock: the least a lease lock with a fencing token needs, written for bench:shop's
// floor (issue 34). A grant is one round trip: `SET NX PX` of a random owner id and the token
// minted by `INCR` in the same script (seeded from the server clock in µs when the counter is
// missing, as @fencelock/lock does, so a lost counter does not send tokens back). A release is one
// round trip: compare-and-delete, and a message on the run's release channel. A waiter in this
// process waits its turn behind the others of the process (one try on the wire per resource at a
// time), then for a release message or the holder's remaining lease, whichever comes first.
//
// What it leaves out on purpose, each a cost the real lock pays: no watchdog (a holder that runs
// past its lease loses it, and the fence in the SQL refuses its writes), no fair queue across
// processes, no reentrancy, no events, no deadlines on the Redis calls beyond ioredis's own.
import { randomUUID } from 'node:crypto'
import type { Redis } from 'ioredis'

// KEYS: lock, fence. ARGV: owner id, lease ms, counter lifetime ms.
// A grant returns the token (an integer, or the seed as a string); a miss {pttl}.
const ACQUIRE_LUA = `
local lockKey, fenceKey = KEYS[1], KEYS[2]
local ownerId, ttlMs, fenceTtlMs = ARGV[1], ARGV[2], ARGV[3]
if not redis.call('SET', lockKey, ownerId, 'NX', 'PX', ttlMs) then
  return {redis.call('PTTL', lockKey)}
end
local token = redis.call('INCR', fenceKey)
if token == 1 then
  local t = redis.call('TIME')
  local seed = t[1] .. string.format('%06d', tonumber(t[2]))
  redis.call('SET', fenceKey, seed, 'PX', fenceTtlMs)
  return seed
end
redis.call('PEXPIRE', fenceKey, fenceTtlMs)
return token
`

// KEYS: lock. ARGV: owner id, release channel, resource.
const RELEASE_LUA = `
local lockKey = KEYS[1]
local ownerId, channel, resource = ARGV[1], ARGV[2], ARGV[3]
if redis.call('GET', lockKey) == ownerId then
  redis.call('DEL', lockKey)
  redis.call('PUBLISH', channel, resource)
  return 1
end
return 0
`

interface FloorScripts {
  floorAcquire(lockKey: string, fenceKey: string, ownerId: string, ttlMs: number, fenceTtlMs: number): Promise<unknown>
  floorRelease(lockKey: string, ownerId: string, channel: string, resource: string): Promise<unknown>
}

/** A grant: its token, and its release (idempotent). */
export interface FloorLease {
  readonly token: bigint
  release(): Promise<void>
}

/** The lock stayed held past the wait. */
export class FloorLockTimeoutError extends Error {
  constructor(readonly resource: string) {
    super(`the lock ${resource} stayed held`)
    this.name = 'FloorLockTimeoutError'
  }
}

/** Options of {@link FloorLocks}. */
export interface FloorLockOptions {
  /** Key prefix of the run, e.g. `floor:<run>:`. */
  readonly prefix: string
  /** Lease of a grant, in ms. */
  readonly ttlMs: number
  /** Longest wait for a held lock, in ms. */
  readonly waitMs: number
  /** Lifetime of an idle token counter, in ms. Default 1 day. */
  readonly fenceTtlMs?: number
}

/**
 * Leases with tokens on one Redis, `redis` for the scripts and `subscriber` (its own connection)
 * for the release messages.
 */
export class FloorLocks {
  readonly #redis: Redis & FloorScripts
  readonly #options: FloorLockOptions
  readonly #channel: string
  /** Per resource, the tail of this process's queue for it. */
  readonly #turns = new Map<string, Promise<void>>()
  /** Per resource, the one local waiter (the head of its queue) to wake on a release message. */
  readonly #wake = new Map<string, () => void>()
  /** Grants made, for the bench's lock cycles per unit. */
  grants = 0

  private constructor(redis: Redis, options: FloorLockOptions) {
    redis.defineCommand('floorAcquire', { numberOfKeys: 2, lua: ACQUIRE_LUA })
    redis.defineCommand('floorRelease', { numberOfKeys: 1, lua: RELEASE_LUA })
    this.#redis = redis as Redis & FloorScripts
    this.#options = options
    this.#channel = `${options.prefix}released`
  }

  /** Subscribes `subscriber` to the run's release channel; resolves once subscribed. */
  static async open(redis: Redis, subscriber: Redis, options: FloorLockOptions): Promise<FloorLocks> {
    const locks = new FloorLocks(redis, options)
    subscriber.on('message', (_channel: string, resource: string) => locks.#wake.get(resource)?.())
    await subscriber.subscribe(locks.#channel)
    return locks
  }

  /** Takes `resource`'s lease: waits for this process's earlier waiters, then for Redis. */
  async acquire(resource: string): Promise<FloorLease> {
    const leaveTurn = await this.#turn(resource)
    try {
      const { token, ownerId } = await this.#grant(resource)
      this.grants++
      return { token, release: once(() => this.#release(resource, ownerId).finally(leaveTurn)) }
    } catch (error) {
      leaveTurn()
      throw error
    }
  }

  async #grant(resource: string): Promise<{ token: bigint; ownerId: string }> {
    const { prefix, ttlMs, waitMs, fenceTtlMs = 86_400_000 } = this.#options
    const lockKey = `${prefix}{${resource}}:lock`
    const fenceKey = `${prefix}{${resource}}:fence`
    const ownerId = randomUUID()
    const deadline = performance.now() + waitMs
    try {
      for (;;) {
        // Listening before the try: a release that lands between the miss and its reply still wakes us.
        let woken!: () => void
        const released = new Promise<void>((resolve) => (woken = resolve))
        this.#wake.set(resource, woken)
        const reply = await this.#redis.floorAcquire(lockKey, fenceKey, ownerId, ttlMs, fenceTtlMs)
        if (!Array.isArray(reply)) return { token: BigInt(reply as string | number), ownerId }
        const left = deadline - performance.now()
        if (left <= 0) throw new FloorLockTimeoutError(resource)
        const pttl = Number(reply[0])
        await waitFor(released, Math.min(left, pttl > 0 ? pttl : 5))
      }
    } finally {
      this.#wake.delete(resource)
    }
  }

  async #release(resource: string, ownerId: string): Promise<void> {
    await this.#redis.floorRelease(`${this.#options.prefix}{${resource}}:lock`, ownerId, this.#channel, resource)
  }

  /** Waits for this process's earlier waiters on `resource`; returns the function that ends our turn. */
  async #turn(resource: string): Promise<() => void> {
    const before = this.#turns.get(resource) ?? Promise.resolve()
    let done!: () => void
    const mine = new Promise<void>((resolve) => (done = resolve))
    const tail = before.then(() => mine)
    this.#turns.set(resource, tail)
    await before
    return () => {
      done()
      if (this.#turns.get(resource) === tail) this.#turns.delete(resource)
    }
  }
}

function waitFor(released: Promise<void>, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined
  return Promise.race([released, new Promise<void>((resolve) => (timer = setTimeout(resolve, ms)))]).finally(() => clearTimeout(timer))
}

function once(fn: () => Promise<void>): () => Promise<void> {
  let running: Promise<void> | undefined
  return () => (running ??= fn())
}
