/**
 * When a waiting queue tries next: the arithmetic of waiting, as pure functions of what the tries
 * so far came to. wait-queues.ts holds the state and the timers; nothing here reads a clock.
 */

/** What the tries so far came to, as the next one's schedule needs it. */
export interface TryRecord {
  /**
   * When the head must try at the latest: a jittered `pollMs` after its last try (each try renews
   * our lease in the Redis queue).
   */
  readonly pollAt: number
  /** The last try failed (not merely cut short by the caller's own wait); how a wait that runs out ends. */
  readonly lastError: Error | undefined
  /** Failed tries in a row (cut ones included): the back-off grows with it. */
  readonly errorStreak: number
  /** The holder's remaining lease at the last miss (or the lease of our last grant), -1 when unknown. */
  readonly lastHolderTtlMs: number
}

export const NO_TRIES: TryRecord = Object.freeze({
  pollAt: Number.POSITIVE_INFINITY,
  lastError: undefined,
  errorStreak: 0,
  lastHolderTtlMs: -1,
})

/** What one try came to, as the schedule sees it. */
export type TryOutcome =
  | { readonly granted: true; readonly ttlMs: number }
  | { readonly granted: false; readonly holderTtlMs: number; readonly error?: undefined }
  | { readonly granted: false; readonly error: Error; readonly cut: boolean }

/** The safety poll's period: `pollMs` ± 20 %, from `random` in [0, 1). */
export function pollDelay(pollMs: number, random: number): number {
  return pollMs * (0.8 + 0.4 * random)
}

/** The record after a try sent at `sentAt`; a try cut short by the caller's own wait says nothing about Redis. */
export function recordTry(before: TryRecord, outcome: TryOutcome, sentAt: number, pollDelayMs: number): TryRecord {
  const pollAt = sentAt + pollDelayMs
  if (outcome.granted) return { pollAt, lastError: undefined, errorStreak: 0, lastHolderTtlMs: outcome.ttlMs }
  if (outcome.error)
    return {
      pollAt,
      lastError: outcome.cut ? before.lastError : outcome.error,
      errorStreak: before.errorStreak + 1,
      lastHolderTtlMs: before.lastHolderTtlMs,
    }
  return { pollAt, lastError: undefined, errorStreak: 0, lastHolderTtlMs: outcome.holderTtlMs }
}

/** In how many ms the last try's outcome says to try again: an error back-off, or the holder's lease end. */
export function hintAfter(record: TryRecord, pollMs: number): number | undefined {
  if (record.lastError) return Math.min(pollMs, 25 * 2 ** Math.min(record.errorStreak, 6))
  return record.lastHolderTtlMs >= 0 ? record.lastHolderTtlMs + 1 : undefined
}

/**
 * When to arm the next try: in `hintMs` if given, and never later than the poll (`pollAt`).
 * Undefined when a try armed for `armedAt` comes no later: a message may bring a try earlier,
 * never push it later (trying is what keeps our place in the Redis queue).
 */
export function nextTryAt(
  now: number,
  record: TryRecord,
  hintMs: number | undefined,
  armedAt: number | undefined,
): number | undefined {
  let at = record.pollAt
  if (hintMs !== undefined && now + hintMs < at) at = now + hintMs
  return armedAt !== undefined && armedAt <= at ? undefined : at
}
