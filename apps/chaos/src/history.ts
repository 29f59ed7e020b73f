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

/** A critical section entered: the lock was granted and the protected code starts. */
export interface EnterEvent extends Stamp {
  readonly k: 'enter'
  readonly inst: string
  readonly res: string
  readonly token: string
  /** `mono` when the protected code asked for the lock (the acquire was sent after it). */
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
}

export type HistoryEvent = EnterEvent | ExitEvent | WriteEvent | OpEvent | FaultEvent

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
