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
 * - `kill`: kills an instance with SIGKILL mid-sale and restarts it on its port after a delay.
 *   The kills take turns: one while the instance is in a charge (at a random moment of the
 *   gateway's latency), one exactly where it hurts — the instance is restarted with
 *   FENCELOCK_DIE_AFTER_CHARGE, so it dies right after the gateway answered a charge and before
 *   the payment row — then restarted again. Money moved and not recorded is the reconciler's work.
 */
import type { Random } from './random.js'
import type { RedisServer } from '@fencelock/devkit/redis-server'
import type { ExternalCall, Supervisor } from './supervisor.js'

/** The chaos kinds of a run. */
export const CHAOS_KINDS = Object.freeze(['none', 'pause', 'redis-restart', 'kill'] as const)
export type ChaosKind = (typeof CHAOS_KINDS)[number]

/** One pause that happened. */
export interface PauseRecord {
  readonly instance: string
  readonly pid: number
  readonly resource: string
  readonly token: string | null
  readonly operation: string
  readonly pausedMs: number
  /** When it was frozen (SIGSTOP) and continued (SIGCONT), epoch ms; `resumedAtMs` null while frozen. */
  readonly frozenAtMs: number
  readonly resumedAtMs: number | null
}

/** A running fault injector. */
export interface Chaos {
  readonly kind: ChaosKind
  /** Pauses or restarts done so far. */
  readonly count: number
  readonly pauses: readonly PauseRecord[]
  /** Kills done (`kill` chaos): who, how, and how long until it listened again. */
  readonly kills?: readonly KillRecord[]
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
      frozenAtMs: Date.now(),
      resumedAtMs: null,
    }
    const index = pauses.push(record) - 1
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
    const resumed: PauseRecord = { ...record, resumedAtMs: Date.now() }
    pauses[index] = resumed
    current = undefined
    options.onPause?.(resumed, 'resumed')
    armedAt = performance.now() + options.gapMs
  }

  const turns = options.operations ?? ['charge', 'authorize']
  const unsubscribe = supervisor.onExternalCall((call) => {
    // Only a holder of a lock is a target (a lock-free `unsafe` run is paused anywhere); one at a time.
    if (stopped || current !== undefined || performance.now() < armedAt) return
    const wanted = turns[pauses.length % turns.length]
    if (
      wanted !== undefined &&
      call.operation !== wanted &&
      performance.now() < armedAt + 3 * Math.max(options.gapMs, 100)
    )
      return
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

/** One kill of the `kill` chaos. */
export interface KillRecord {
  readonly instance: string
  /** `sigkill-in-charge`: killed by the supervisor during a charge; `died-after-charge`: the FENCELOCK_DIE_AFTER_CHARGE hook. */
  readonly how: 'sigkill-in-charge' | 'died-after-charge'
  /** From the kill (or the death) to the restarted instance listening, in ms; null when the run ended first. */
  readonly restartMs: number | null
}

/** Options of {@link startKillChaos}. */
export interface KillChaosOptions {
  readonly random: Random
  /** Down time of a killed instance before its restart, in ms. */
  readonly restartAfterMs: number
  /** Quiet time after a restart before the next kill, in ms. */
  readonly gapMs: number
  /** Longest gateway latency, in ms: a kill during a charge lands at a random moment of it. */
  readonly latencyMaxMs: number
  /** Delay before the first kill, in ms. Default 200. */
  readonly firstAfterMs?: number
  /**
   * Called right before the SIGKILL of an instance in a charge (its call), so a caller can stamp
   * the kill (the chaos suite's history records it there: a section of the instance ends no later).
   */
  readonly onKill?: (call: ExternalCall) => void
}

/**
 * Starts the kill chaos on `supervisor`'s instances (see the module's comment).
 * @example
 * ```ts
 * const chaos = startKillChaos(supervisor, { random: seededRandom(7), restartAfterMs: 500, gapMs: 1000, latencyMaxMs: 80 })
 * ```
 */
export function startKillChaos(supervisor: Supervisor, options: KillChaosOptions): Chaos {
  const kills: KillRecord[] = []
  let stopped = false
  let wakeStop: () => void = () => {}
  const stoppedSignal = new Promise<void>((r) => (wakeStop = r))
  const waitFor = <T>(event: Promise<T>): Promise<T | undefined> =>
    Promise.race([event, stoppedSignal.then(() => undefined)])
  const nextCharge = () =>
    new Promise<ExternalCall>((resolve) => {
      const off = supervisor.onExternalCall((call) => {
        if (call.operation !== 'charge' || options.random.next() < 0.3) return
        off()
        resolve(call)
      })
    })
  const exitOf = (id: string) =>
    new Promise<void>((resolve) => {
      const off = supervisor.onExit((exited) => {
        if (exited !== id) return
        off()
        resolve()
      })
    })
  const restart = async (id: string, diedAt: number, how: KillRecord['how'], env: Record<string, string> = {}) => {
    await waitFor(sleep(options.restartAfterMs))
    if (stopped) {
      kills.push({ instance: id, how, restartMs: null })
      return false
    }
    await supervisor.restart(id, env)
    kills.push({ instance: id, how, restartMs: Math.round(performance.now() - diedAt) })
    return true
  }
  const loop = (async () => {
    await waitFor(sleep(options.firstAfterMs ?? 200))
    while (!stopped) {
      const call = await waitFor(nextCharge())
      if (call === undefined) break
      await waitFor(sleep(options.random.int(0, options.latencyMaxMs)))
      if (stopped || !supervisor.owns(call.pid)) continue
      options.onKill?.(call)
      if (!(await supervisor.kill(call.pid))) continue
      const diedAt = performance.now()
      // Back with the hook: it dies by itself right after its next charge is answered.
      const exited = exitOf(call.instance)
      if (
        !(await restart(call.instance, diedAt, 'sigkill-in-charge', {
          FENCELOCK_DIE_AFTER_CHARGE: String(options.random.int(1, 3)),
        }))
      )
        break
      if ((await waitFor(exited)) === undefined && stopped) break
      if (!(await restart(call.instance, performance.now(), 'died-after-charge'))) break
      await waitFor(sleep(options.gapMs))
    }
  })().catch(() => {
    // A restart refused because the run is stopping: the kills so far stand.
  })
  return {
    kind: 'kill',
    get count() {
      return kills.length
    },
    pauses: [],
    kills,
    async stop() {
      stopped = true
      wakeStop()
      await loop
    },
  }
}

/** The no-op chaos. */
export function noChaos(): Chaos {
  return { kind: 'none', count: 0, pauses: [], stop: async () => {} }
}
