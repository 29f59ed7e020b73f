/**
 * The faults of a run.
 *
 * - `pause`: when an instance reports a gateway call made while it holds a lock, the supervisor
 *   freezes that process (SIGSTOP) for longer than the lock's TTL, then continues it (SIGCONT).
 *   Its watchdog freezes too, as in a real GC pause: the lease runs out, another instance takes
 *   the lock with a larger token, and the frozen one wakes up mid-operation, still believing it
 *   holds the lock. Repeats after a gap, for the whole run. The pauses take turns between a
 *   charge (where money moves) and an authorization (where stock is decided), so every run bites
 *   both; targets are chosen by the seeded RNG.
 * - `redis-restart`: restarts the redis-server the demo owns (without persistence: every lock and
 *   counter is gone), every few seconds. Refused for a Redis the demo did not start.
 */
import type { Random } from './random.js'
import type { RedisServer } from '@fencelock/devkit/redis-server'
import type { ExternalCall, Supervisor } from './supervisor.js'

/** The chaos kinds of a run. */
export const CHAOS_KINDS = Object.freeze(['none', 'pause', 'redis-restart'] as const)
export type ChaosKind = (typeof CHAOS_KINDS)[number]

/** One pause that happened. */
export interface PauseRecord {
  readonly instance: string
  readonly pid: number
  readonly resource: string
  readonly token: string | null
  readonly operation: string
  readonly pausedMs: number
}

/** A running fault injector. */
export interface Chaos {
  readonly kind: ChaosKind
  /** Pauses or restarts done so far. */
  readonly count: number
  readonly pauses: readonly PauseRecord[]
  /** Stops injecting and undoes what is in progress (a frozen instance is continued). */
  stop(): Promise<void>
}

/** Options of {@link startPauseChaos}. */
export interface PauseChaosOptions {
  readonly random: Random
  /** How long a target stays frozen, in ms: longer than the TTL (default run: 2.5 × TTL). */
  readonly pauseMs: number
  /** Quiet time after a pause before the next target is taken, in ms. */
  readonly gapMs: number
  /** Delay before the first pause, in ms. Default 100. */
  readonly firstAfterMs?: number
  /** Called on each pause and resume, for the progress line. */
  readonly onPause?: (record: PauseRecord, phase: 'frozen' | 'resumed') => void
  /**
   * The operations the pauses take turns on, first one first. Default `['charge', 'authorize']`.
   * When no call of the wanted one comes for 3 gaps (sold out: no more authorizations), any call
   * is taken.
   */
  readonly operations?: readonly string[]
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms))

/**
 * Starts the pause chaos on `supervisor`'s instances.
 * @example
 * ```ts
 * const chaos = startPauseChaos(supervisor, { random: seededRandom(7), pauseMs: 2500, gapMs: 1000 })
 * // ... load ...
 * await chaos.stop()
 * ```
 */
export function startPauseChaos(supervisor: Supervisor, options: PauseChaosOptions): Chaos {
  const pauses: PauseRecord[] = []
  let armedAt = performance.now() + (options.firstAfterMs ?? 100)
  let current: { pid: number; resume: () => void } | undefined
  let stopped = false
  let running: Promise<void> = Promise.resolve()

  const pause = async (call: ExternalCall) => {
    if (!supervisor.freeze(call.pid)) {
      // Not ours or already gone: stay armed for the next candidate.
      current = undefined
      return
    }
    const record: PauseRecord = {
      instance: call.instance,
      pid: call.pid,
      resource: call.resource,
      token: call.token,
      operation: call.operation,
      pausedMs: options.pauseMs,
    }
    pauses.push(record)
    options.onPause?.(record, 'frozen')
    await new Promise<void>((resume) => {
      const timer = setTimeout(resume, options.pauseMs)
      current = {
        pid: call.pid,
        resume: () => {
          clearTimeout(timer)
          resume()
        },
      }
    })
    supervisor.thaw(call.pid)
    current = undefined
    options.onPause?.(record, 'resumed')
    armedAt = performance.now() + options.gapMs
  }

  const turns = options.operations ?? ['charge', 'authorize']
  const unsubscribe = supervisor.onExternalCall((call) => {
    // Only a holder of a lock is a target (a lock-free `unsafe` run is paused anywhere); one at a time.
    if (stopped || current !== undefined || performance.now() < armedAt) return
    const wanted = turns[pauses.length % turns.length]
    if (wanted !== undefined && call.operation !== wanted && performance.now() < armedAt + 3 * Math.max(options.gapMs, 100)) return
    // Skip some candidates at random, so the seed decides which operation and instance freeze.
    if (options.random.next() < 0.35) return
    current = { pid: call.pid, resume: () => {} }
    running = pause(call)
  })

  return {
    kind: 'pause',
    get count() {
      return pauses.length
    },
    pauses,
    async stop() {
      stopped = true
      unsubscribe()
      current?.resume()
      await running
    },
  }
}

/** Options of {@link startRedisRestartChaos}. */
export interface RedisRestartChaosOptions {
  /** Time between restarts, in ms. */
  readonly intervalMs: number
  /** Delay before the first restart, in ms. Default: `intervalMs`. */
  readonly firstAfterMs?: number
  readonly onRestart?: (count: number) => void
}

/**
 * Restarts `redis` (a server the demo owns) every `intervalMs`. Each restart loses every lock:
 * holders keep running, and the next acquirer gets the lock at once.
 */
export function startRedisRestartChaos(redis: RedisServer, options: RedisRestartChaosOptions): Chaos {
  let count = 0
  let stopped = false
  const waitUntil = async (ms: number) => {
    const until = performance.now() + ms
    while (!stopped && performance.now() < until) await sleep(50)
  }
  const loop = (async () => {
    await waitUntil(options.firstAfterMs ?? options.intervalMs)
    while (!stopped) {
      await redis.restart()
      count++
      options.onRestart?.(count)
      await waitUntil(options.intervalMs)
    }
  })()
  return {
    kind: 'redis-restart',
    get count() {
      return count
    },
    pauses: [],
    async stop() {
      stopped = true
      await loop
    },
  }
}

/** The no-op chaos. */
export function noChaos(): Chaos {
  return { kind: 'none', count: 0, pauses: [], stop: async () => {} }
}
