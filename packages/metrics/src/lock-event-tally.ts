import type { LockEvent } from '@fencelock/lock'
import type { GroupTally } from './measurements.js'

/** The events that end an acquire call: one of them per call that reached a verdict. */
export type AcquireOutcomeEvent = Extract<LockEvent, { type: 'acquired' | 'timeout' | 'aborted' | 'unavailable' }>

/** What {@link lockEventTally} needs of the exporter that uses it. */
export interface TallyHooks<S extends GroupTally> {
  /** The counts of the group `resource` belongs to (bounded, created at zero on first use). */
  seriesOf(resource: string): S
  /** Called after an acquire's outcome was counted (the OpenTelemetry path makes its span here). */
  onAcquireOutcome?: ((event: AcquireOutcomeEvent, series: S) => void) | undefined
}

/** A listener for `locker.listen()` and the clean-up of what it counted as held. */
export interface LockEventTally {
  readonly listener: (event: LockEvent) => void
  /**
   * Takes the locks counted as held and not yet ended off `held`, and the elections led off
   * `leading` (nothing would ever take them off after the listener is gone). Counters keep their
   * values.
   */
  drop(): void
}

/** One lock counted as held, in the list of its resource (newest first). */
interface HeldLock<S> {
  readonly token: bigint
  readonly series: S
  next: HeldLock<S> | undefined
}

/**
 * Turns a Locker's events into the counts of {@link GroupTally}, the same way for every exporter:
 * which event is which outcome, and the bookkeeping that ends each held lock exactly once.
 */
export function lockEventTally<S extends GroupTally>(hooks: TallyHooks<S>): LockEventTally {
  const { seriesOf, onAcquireOutcome } = hooks
  /**
   * Locks granted while we listen and not yet ended, by resource (the lock's own string, whose
   * hash V8 has cached), then token. Each one ends exactly once here (on `lost`, or on `released`
   * when it was not lost first), which keeps `held` exact and makes
   * acquired = released + expired + lost + held. A `released` of a lock not in here (granted
   * before we listened, or granted to a waiter that had already given up, which never got an
   * `acquired` event) is not counted. A locker holds one lock per resource but for a lock that
   * ran past its TTL unnoticed, so the list behind a resource is one entry long nearly always.
   */
  const held = new Map<string, HeldLock<S>>()
  /** Names this process leads (locker.lead()), each counted once in `leading` until demoted. */
  const leading = new Map<string, S>()

  /** Ends a held lock once; `heldMs` undefined when the hold time is unknown (failed release). */
  const end = (resource: string, token: bigint, heldMs: number | undefined): S | undefined => {
    let entry = held.get(resource)
    let previous: HeldLock<S> | undefined
    while (entry && entry.token !== token) {
      previous = entry
      entry = entry.next
    }
    if (!entry) return undefined
    if (previous) previous.next = entry.next
    else if (entry.next) held.set(resource, entry.next)
    else held.delete(resource)
    const s = entry.series
    if (heldMs !== undefined) s.observeHold(heldMs / 1000)
    s.held--
    return s
  }

  const listener = (event: LockEvent): void => {
    switch (event.type) {
      case 'acquired': {
        const s = seriesOf(event.resource)
        s.acquire.acquired++
        s.held++
        s.observeWait(event.waitedMs / 1000)
        held.set(event.resource, { token: event.token, series: s, next: held.get(event.resource) })
        if (onAcquireOutcome) onAcquireOutcome(event, s)
        return
      }
      case 'timeout': {
        const s = seriesOf(event.resource)
        s.acquire.timeout++
        s.observeWait(event.waitedMs / 1000)
        if (onAcquireOutcome) onAcquireOutcome(event, s)
        return
      }
      case 'aborted': {
        const s = seriesOf(event.resource)
        s.acquire.aborted++
        s.observeWait(event.waitedMs / 1000)
        if (onAcquireOutcome) onAcquireOutcome(event, s)
        return
      }
      case 'unavailable': {
        const s = seriesOf(event.resource)
        s.acquire.error++
        s.observeWait(event.waitedMs / 1000)
        if (onAcquireOutcome) onAcquireOutcome(event, s)
        return
      }
      case 'error':
        // Per failed round trip; an acquire's outcome comes once, as `unavailable`.
        if (event.operation === 'renew') seriesOf(event.resource).renew.error++
        // A release Redis failed ends the lock (it expires on its own); its outcome is unknown,
        // so it is not counted as a release.
        else if (event.operation === 'release' && event.token !== undefined) end(event.resource, event.token, undefined)
        return
      case 'extended':
        if (event.auto) seriesOf(event.resource).renew.ok++
        return
      case 'lost': {
        const s = end(event.resource, event.token, event.heldMs)
        // A watchdog that finds the lock gone (or cannot renew it in time) is a renewal that
        // failed for good. A lock without one whose lease ran out renewed nothing.
        if (event.autoExtend) seriesOf(event.resource).renew.lost++
        if (s) s.lost++
        return
      }
      case 'released': {
        const s = end(event.resource, event.token, event.heldMs)
        if (s) s.release[event.outcome]++
        return
      }
      case 'elected': {
        const s = seriesOf(event.resource)
        s.elected++
        if (!leading.has(event.resource)) s.leading++
        leading.set(event.resource, s)
        return
      }
      case 'demoted': {
        const s = leading.get(event.resource)
        if (s) s.leading--
        leading.delete(event.resource)
        return
      }
      case 'contended':
      case 'tick':
      case 'token-regressed':
      case 'reentered':
        return
    }
  }

  return {
    listener,
    drop() {
      for (const entry of held.values()) {
        for (let e: HeldLock<S> | undefined = entry; e; e = e.next) e.series.held--
      }
      held.clear()
      for (const s of leading.values()) s.leading--
      leading.clear()
    },
  }
}
