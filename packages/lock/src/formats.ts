/**
 * The one place that says what the scripts write and others read back: the value of a lock key
 * and the message of a release. Next to keys.ts, which names the keys. The scripts build these
 * with the Lua fragments below and the Locker reads them with the functions below, so a format
 * is written down once for both sides.
 *
 * The lock key holds one of:
 * - `<owner id>`: held by the grant with that owner id (32 hex digits, owner-id.ts);
 * - `<owner id>+`: held, and a locker waits in the resource's queue in Redis, so the release
 *   must hand the lock on (a waiting locker's try appends the mark; see acquire-script.ts);
 * - `~<locker id>`: handed by a release to the locker that waited longest, for `handoffMs`. Only
 *   that locker's acquires take it; if it does not come, the key expires and anyone may.
 *
 * A release message, on the resource's channel (keys.ts), is one of:
 * - `<sender>`: the lock was freed; the oldest waiter of any locker may try;
 * - `<sender> <locker> <ms>`: the lock was handed to `<locker>` for `<ms>`: only that locker
 *   tries now, the others try again when the hand-off would run out.
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
  /** How long the hand-off holds, in ms (NaN when freed, or unreadable). */
  readonly handoffMs: number
}

/** Reads a release message; undefined when it is not one (a foreign publisher on our channel). */
export function parseReleaseMessage(message: string): ReleaseMessage | undefined {
  const first = message.indexOf(' ')
  if (first < 0) return message === '' ? undefined : { sender: message, handedTo: undefined, handoffMs: Number.NaN }
  const second = message.indexOf(' ', first + 1)
  if (second < 0) return undefined
  const handoffMs = Number(message.slice(second + 1))
  if (!Number.isFinite(handoffMs) || handoffMs < 0) return undefined
  return { sender: message.slice(0, first), handedTo: message.slice(first + 1, second), handoffMs }
}

/** Builds a release message (the scripts build the same with {@link LUA}). */
export function releaseMessage(sender: string, to?: { lockerId: string; handoffMs: number }): string {
  return to ? `${sender} ${to.lockerId} ${to.handoffMs}` : sender
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
  isUnmarkedHolder: (value: string) => `(string.sub(${value}, 1, 1) ~= '${HANDED_TO}' and string.sub(${value}, -1) ~= '${WAITING_MARK}')`,
  /** The message of a release that freed the lock. */
  freedMessage: (sender: string) => sender,
  /** The message of a release that handed the lock to `lockerId` for `handoffMs`. */
  handedMessage: (sender: string, lockerId: string, handoffMs: string) => `${sender} .. ' ' .. ${lockerId} .. ' ' .. ${handoffMs}`,
})
