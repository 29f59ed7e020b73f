/** Records the typed events a Locker emits, and waits for one. */
import type { LockEvent, LockEventType } from '../../src/index.js'

export type EventOf<T extends LockEventType> = Extract<LockEvent, { type: T }>

export interface EventLog {
  readonly events: LockEvent[]
  /** Pass as the Locker's `onEvent`. */
  readonly onEvent: (event: LockEvent) => void
  /** The events of one type, in order, each with the performance.now() it arrived at. */
  of<T extends LockEventType>(type: T, resource?: string): (EventOf<T> & { at: number })[]
  /** Resolves with the first event of `type` (from now on, or already logged when `past`). */
  next<T extends LockEventType>(
    type: T,
    options?: { resource?: string; timeoutMs?: number },
  ): Promise<EventOf<T> & { at: number }>
}

export function eventLog(): EventLog {
  const events: (LockEvent & { at: number })[] = []
  const waiting = new Set<(event: LockEvent & { at: number }) => void>()
  const of = <T extends LockEventType>(type: T, resource?: string) =>
    events.filter(
      (e): e is EventOf<T> & { at: number } => e.type === type && (resource === undefined || e.resource === resource),
    )
  return {
    events,
    onEvent(event) {
      const stamped = { ...event, at: performance.now() }
      events.push(stamped)
      for (const listener of [...waiting]) listener(stamped)
    },
    of,
    next(type, { resource, timeoutMs = 5_000 } = {}) {
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => {
          waiting.delete(listener)
          reject(new Error(`no '${type}' event${resource ? ` for ${resource}` : ''} within ${timeoutMs} ms`))
        }, timeoutMs)
        const listener = (e: LockEvent & { at: number }) => {
          if (e.type !== type || (resource !== undefined && e.resource !== resource)) return
          clearTimeout(timer)
          waiting.delete(listener)
          resolve(e as EventOf<typeof type> & { at: number })
        }
        waiting.add(listener)
      })
    },
  }
}
