/**
 * The history of a run: what every process did, as JSON lines, one file per process, merged
 * afterwards by the checker.
 *
 * Time: every event carries three clocks.
 * - `mono`: CLOCK_MONOTONIC in ms (`process.hrtime.bigint()`), which is one clock for every
 *   process on the machine (time since boot), so histories merge on it. The clock-jump scenario
 *   fakes a worker's wall clock with libfaketime and `FAKETIME_DONT_FAKE_MONOTONIC=1`, so this
 *   clock is out of the fault's reach; the checker orders and overlaps by it alone.
 * - `perf` + `origin`: `performance.now()` and the process's `performance.timeOrigin`; their sum
 *   is wall time as the process saw it when it started (another process's origin may differ).
 * - `wall`: `Date.now()`, the clock the fault does move: kept to show the jump happened.
 *
 * Tokens are decimal strings (JSON has no bigint).
 */
import { closeSync, openSync, readdirSync, readFileSync, writeSync } from 'node:fs'
import { join } from 'node:path'

/** The clocks of one event (see the module comment). */
export interface Stamp {
  readonly mono: number
  readonly perf: number
  readonly origin: number
  readonly wall: number
}

/**
 * A lock asked for: the protected code called for the lock, and the acquire is sent right after.
 * Its `mono` is the `asked` of the `enter` or `acquire-failed` that ends it (same instance and
 * resource); an ask with neither never ended (an acquire that hangs).
 */
export interface AskEvent extends Stamp {
  readonly k: 'ask'
  readonly inst: string
  readonly res: string
}

/** An acquire that ended without a lock: the class name of the error it threw (`LockUnavailableError`, ...). */
export interface AcquireFailedEvent extends Stamp {
  readonly k: 'acquire-failed'
  readonly inst: string
  readonly res: string
  /** `mono` of its `ask`. */
  readonly asked: number
  readonly error: string
  /** Its message (and its cause's), cut to 300 characters: the evidence, not for the checker. */
  readonly detail?: string
}

/** A critical section entered: the lock was granted and the protected code starts. */
export interface EnterEvent extends Stamp {
  readonly k: 'enter'
  readonly inst: string
  readonly res: string
  readonly token: string
  /** `mono` when the protected code asked for the lock (its `ask`; the acquire was sent after it). */
  readonly asked?: number
}

/** A critical section left: the protected code returned or threw (before the release). */
export interface ExitEvent extends Stamp {
  readonly k: 'exit'
  readonly inst: string
  readonly res: string
  readonly token: string
}

/**
 * The Locker told a holder its lock was lost (its `lost` event: the signal aborted), `reason` as
 * the lock gives it. The section may go on; whether it was told before another holder entered
 * tells a lease the lock let run out (its holder was warned in time) from a lock taken while its
 * holder still believed it held it.
 */
export interface LostEvent extends Stamp {
  readonly k: 'lost'
  readonly inst: string
  readonly res: string
  readonly token: string
  readonly reason: string
}

/**
 * The process's event loop did not run from `start` to `end` (CLOCK_MONOTONIC ms): a timer due
 * every {@link STALL_TICK_MS} came more than {@link STALL_MIN_MS} late. Starved of CPU (a busy
 * shared machine), blocked or frozen: no deadline of its own could fire in the meantime.
 */
export interface StallEvent extends Stamp {
  readonly k: 'stall'
  readonly inst: string
  readonly start: number
  readonly end: number
}

/** Period of the stall sampler, in ms. */
export const STALL_TICK_MS = 20
/** Shortest stall recorded (beyond the tick), in ms. */
export const STALL_MIN_MS = 50

/**
 * A write transaction the database committed (`accepted`) or refused with a stale-token error
 * (`rejected`). `seq` orders the accepted writes of one row: it is drawn from a sequence inside
 * the transaction after the row was written, so while the row lock is held, and so it follows
 * the commit order of that row.
 */
export interface WriteEvent extends Stamp {
  readonly k: 'write'
  readonly inst: string
  readonly res: string
  /** `<Model>:<key>`, e.g. `Product:flash-1`, `Order:17`. */
  readonly row: string
  readonly token: string
  readonly outcome: 'accepted' | 'rejected'
  readonly seq?: number
}

/** One shop operation finished (its outcome, for the operation counts). */
export interface OpEvent extends Stamp {
  readonly k: 'op'
  readonly inst: string
  readonly op: 'purchase' | 'pay'
  readonly result: string
}

/** A fault, from `start` to `end` (CLOCK_MONOTONIC ms); `end === start` for an instant one. */
export interface FaultEvent extends Stamp {
  readonly k: 'fault'
  readonly kind: string
  readonly start: number
  readonly end: number
  readonly detail?: string
  /**
   * Quorum mode: the fault takes down a minority or a majority of the nodes. Then `start`..`end`
   * is when they were down for sure: from after the kill or SIGSTOP took effect to before they
   * were brought back.
   */
  readonly quorumDown?: 'minority' | 'majority'
  /**
   * A failover of one shard (Sentinel, Cluster): the lock resources it took away. Recovery is
   * then the time from the fault's end to the next grant of one of them (other shards grant on).
   */
  readonly resources?: readonly string[]
  /**
   * The worker process the fault killed at `start` (kill -9 from outside, or its own SIGKILL
   * right after a charge was answered). Nothing of that process runs after `start`: its sections
   * still open end there, and an acquire it had asked and never ended died with it (not a hang).
   * A worker restarted under the same instance name is a new process: its events come after.
   */
  readonly inst?: string
}

export type HistoryEvent = AskEvent | AcquireFailedEvent | EnterEvent | ExitEvent | LostEvent | WriteEvent | OpEvent | FaultEvent | StallEvent

/** CLOCK_MONOTONIC in ms with µs precision: the same clock in every process of the machine. */
export function monoNow(): number {
  return Number(process.hrtime.bigint() / 1000n) / 1000
}

/** The clocks now. */
export function stampNow(): Stamp {
  return { mono: monoNow(), perf: performance.now(), origin: performance.timeOrigin, wall: Date.now() }
}

type Unstamped<E> = E extends HistoryEvent ? Omit<E, keyof Stamp> : never

/**
 * Appends events to `<dir>/<name>.jsonl`, synchronously: a line is on disk before the code goes
 * on, so a process frozen or killed right after an event has still recorded it.
 */
export class Recorder {
  readonly #fd: number

  constructor(dir: string, name: string) {
    this.#fd = openSync(join(dir, `${name}.jsonl`), 'a')
  }

  /** Records `event` with the clocks of now; returns the stamped event. */
  record<E extends Unstamped<HistoryEvent>>(event: E): E & Stamp {
    const stamped = { ...stampNow(), ...event }
    writeSync(this.#fd, `${JSON.stringify(stamped)}\n`)
    return stamped
  }

  close(): void {
    try {
      closeSync(this.#fd)
    } catch {
      // Already closed.
    }
  }
}

/** Reads and merges every `*.jsonl` of `dir`, ordered by CLOCK_MONOTONIC. A torn last line is skipped. */
export function readHistory(dir: string): HistoryEvent[] {
  const events: HistoryEvent[] = []
  for (const file of readdirSync(dir).filter((f) => f.endsWith('.jsonl'))) {
    for (const line of readFileSync(join(dir, file), 'utf8').split('\n')) {
      if (line.trim() === '') continue
      try {
        events.push(JSON.parse(line) as HistoryEvent)
      } catch {
        // A line cut short by a kill: nothing after it in that file.
      }
    }
  }
  return events.sort((a, b) => a.mono - b.mono)
}

/**
 * Records every stall of this process's event loop (see {@link StallEvent}) as instance `inst`,
 * until the returned function is called. The timer is unref'd.
 */
export function recordStalls(recorder: Recorder, inst: string): () => void {
  let last = monoNow()
  const timer = setInterval(() => {
    const now = monoNow()
    if (now - last > STALL_TICK_MS + STALL_MIN_MS) recorder.record({ k: 'stall', inst, start: last + STALL_TICK_MS, end: now })
    last = now
  }, STALL_TICK_MS)
  timer.unref()
  return () => clearInterval(timer)
}
