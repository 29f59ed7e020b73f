/**
 * The fair queue's formats: the one place that says what the scripts write and others read back,
 * the value of a lock key and the message of a release (keys.ts names the keys). The scripts
 * build these with the Lua fragments below and the Locker reads them with the functions below,
 * so a format is written down once for both sides. docs/LOCK.md draws the lock key's states.
 *
 * The lock key holds one of:
 * - `<owner id>`: held by the grant with that owner id (32 hex digits, owner-id.ts);
 * - `<owner id>+`: held, and a locker waits in the resource's queue in Redis, so the release
 *   must hand the lock on (a waiting locker's try appends the mark; see queued-acquire.ts);
 * - `~<locker id>`: handed by a release to the locker that waited longest, for `handoffMs`. Only
 *   that locker's acquires take it; if it does not come, the key expires and anyone may.
 *
 * A release message, on the resource's channel (keys.ts), is one of:
 * - `<sender>`: the lock was freed; the oldest waiter of any locker may try;
 * - `<sender> <locker> <ms>` or `<sender> <locker> <ms> <next>`: the lock was handed to
 *   `<locker>` for `<ms>`: only that locker tries now. `<next>`, the locker queued behind it,
 *   tries when the hand-off would run out, in case `<locker>` never comes; the others keep to
 *   their own schedule (they would only race each other for a lock that is `<next>`'s turn).
 * `<sender>` is the releasing locker's id, so a locker can skip its own messages. Only a release
 * that someone waits for (a marked key) publishes: an unmarked release has nobody to tell.
 */

/** Appended to the owner id by a waiting locker's try: the holder's release hands the lock on. */
export const WAITING_MARK = '+'
/** Prefixes the id of the locker a lock is handed to. Owner ids are hex, so never start with it. */
export const HANDED_TO = '~'

/** The lock key's value while the lock is handed to `lockerId`. */
export function handedTo(lockerId: string): string {
  return HANDED_TO + lockerId
}

/** What a release message says. */
export interface ReleaseMessage {
  /** The id of the locker that released. */
  readonly sender: string
  /** The locker the lock was handed to; undefined when it was freed for anyone. */
  readonly handedTo: string | undefined
  /** How long the hand-off holds, in ms (NaN when freed). */
  readonly handoffMs: number
  /** The locker queued behind the one the lock was handed to, if any. */
  readonly next: string | undefined
}

/** Reads a release message; undefined when it is not one (a foreign publisher on our channel). */
export function parseReleaseMessage(message: string): ReleaseMessage | undefined {
  const parts = message.split(' ')
  const [sender, handedTo, ms, next] = parts
  if (!sender || parts.length > 4) return undefined
  if (handedTo === undefined) return { sender, handedTo: undefined, handoffMs: Number.NaN, next: undefined }
  const handoffMs = Number(ms)
  if (!handedTo || ms === undefined || !Number.isFinite(handoffMs) || handoffMs < 0 || next === '') return undefined
  return { sender, handedTo, handoffMs, next }
}

/** Builds a release message (the scripts build the same with {@link LUA}). */
export function releaseMessage(sender: string, to?: { lockerId: string; handoffMs: number; next?: string }): string {
  if (!to) return sender
  return to.next === undefined
    ? `${sender} ${to.lockerId} ${to.handoffMs}`
    : `${sender} ${to.lockerId} ${to.handoffMs} ${to.next}`
}

/**
 * The same formats as Lua expressions, for the scripts. Each takes Lua expressions (a `KEYS[i]`,
 * an `ARGV[i]` or a local) and returns one.
 */
export const LUA = Object.freeze({
  /** The mark a waiting locker appends to the holder's key, as a Lua string. */
  waitingMark: `'${WAITING_MARK}'`,
  /** The value of a key handed to `lockerId`. */
  handedTo: (lockerId: string) => `'${HANDED_TO}' .. ${lockerId}`,
  /** The value of a held key that a waiting locker marked. */
  marked: (ownerId: string) => `${ownerId} .. '${WAITING_MARK}'`,
  /** True for the value of a held key not yet marked (neither marked nor handed to a locker). */
  isUnmarkedHolder: (value: string) =>
    `(string.sub(${value}, 1, 1) ~= '${HANDED_TO}' and string.sub(${value}, -1) ~= '${WAITING_MARK}')`,
  /** The message of a release that freed the lock. */
  freedMessage: (sender: string) => sender,
  /**
   * The message of a release that handed the lock to `lockerId` for `handoffMs`; `next` is a Lua
   * expression that is the next locker's id or false (then left out).
   */
  handedMessage: (sender: string, lockerId: string, handoffMs: string, next: string) =>
    `${sender} .. ' ' .. ${lockerId} .. ' ' .. ${handoffMs} .. (${next} and (' ' .. ${next}) or '')`,
})
