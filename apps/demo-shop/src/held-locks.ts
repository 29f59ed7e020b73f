/**
 * Which locks are held right now, across all instances, for `GET /api/state`.
 *
 * Each instance keeps the locks it *believes* it holds in memory (from its Locker's `acquired` /
 * `released` / `lost` events) and publishes the locks it has held for `flushMs` at least as its own
 * field of one Redis hash, at most once per `flushMs` and only when that list changed — not a write
 * per lock event: a lock held for less than `flushMs` (a sale's locks, mostly) is never written, so
 * a sale costs Redis no write for the view until a lock is held long; one held longer (a frozen
 * holder) shows. The reader then checks each entry with
 * `locker.inspect()` (read-only, one round trip per resource, no key names of its own): the lease
 * is live only while the lock is held and the last token minted for the resource is the entry's.
 * So a holder frozen past its TTL shows as what it is — it still believes it holds the lock (its
 * last list stays published), but its lease has expired (or been taken by a newer token).
 */
import type { LockEvent, LockInspection, Locker } from '@fencelock/lock'
import type { Redis } from 'ioredis'

/** A lock an instance holds or believes it holds. */
export interface HeldLock {
  readonly resource: string
  readonly instance: string
  readonly pid: number
  /** The fencing token, as a decimal string (JSON has no bigint). */
  readonly token: string
  /** Milliseconds left on the lease in Redis; 0 when it has expired or been taken over. */
  readonly ttlLeftMs: number
  /** False when the holder still believes it holds the lock but the lease in Redis is gone or newer. */
  readonly leaseLive: boolean
  /** Wall-clock time of the grant, ISO 8601. */
  readonly acquiredAt: string
}

interface Entry {
  resource: string
  instance: string
  pid: number
  token: string
  acquiredAt: string
  /** The lease granted, ms (absent in entries of an older instance). */
  ttlMs?: number
}

const fieldOf = (resource: string, token: bigint | string) => `${resource} ${token}`

/** The listener {@link heldLocksRecorder} returns; `flush()` publishes the list now. */
export interface HeldLocksRecorder {
  (event: LockEvent): void
  flush(): void
  /** The instance it records. */
  readonly instance: string
  /** The interval of its writes, ms. */
  readonly flushMs: number
  /** The locks it believes it holds now (exact: from memory, not from the published list). */
  entries(): Entry[]
}

/**
 * Returns an `onEvent` listener that keeps this instance's locks and publishes them as the field
 * `instance` of the hash `key` (see the module's comment; `flushMs` default 200). Redis errors
 * are swallowed: the view is best-effort and must never fail a request.
 */
export function heldLocksRecorder(redis: Pick<Redis, 'hset' | 'hdel'>, key: string, instance: string, options: { flushMs?: number } = {}): HeldLocksRecorder {
  const flushMs = options.flushMs ?? 200
  const held = new Map<string, Entry>()
  /** When each entry was granted, on the monotonic clock. */
  const since = new Map<Entry, number>()
  let timer: NodeJS.Timeout | undefined
  /** The list last written ('' after an HDEL, or before any write). */
  let published = ''
  const write = (list: readonly Entry[]) => {
    const text = list.length === 0 ? '' : JSON.stringify(list)
    if (text === published) return
    published = text
    ;(text === '' ? redis.hdel(key, instance) : redis.hset(key, instance, text)).catch(() => {})
  }
  const flush = () => {
    clearTimeout(timer)
    timer = undefined
    write([...held.values()])
  }
  // The timed write publishes only the locks held for flushMs at least: most are released sooner
  // (a sale's lock is held a few ms), and those are never written, so a sale's locks cost Redis no
  // write at all until one is held long (a frozen holder: what the view is for). A younger lock
  // is looked at again when it would be due; the same list is not written twice.
  const publishDue = () => {
    timer = undefined
    const now = performance.now()
    let next = Infinity
    const due: Entry[] = []
    for (const entry of held.values()) {
      const at = (since.get(entry) ?? now) + flushMs
      if (at <= now) due.push(entry)
      else next = Math.min(next, at)
    }
    write(due)
    if (next !== Infinity) schedule(next - now)
  }
  const schedule = (ms: number) => {
    if (timer !== undefined) return
    timer = setTimeout(publishDue, Math.max(1, Math.ceil(ms)))
    timer.unref()
  }
  const changed = () => schedule(flushMs)
  const listener = (event: LockEvent) => {
    if (event.type === 'acquired') {
      const entry = { resource: event.resource, instance, pid: process.pid, token: String(event.token), acquiredAt: new Date().toISOString(), ttlMs: event.ttlMs }
      held.set(fieldOf(event.resource, event.token), entry)
      since.set(entry, performance.now())
      changed()
    } else if (event.type === 'released' || event.type === 'lost') {
      const field = fieldOf(event.resource, event.token)
      const entry = held.get(field)
      if (entry === undefined) return
      held.delete(field)
      since.delete(entry)
      changed()
    }
  }
  return Object.assign(listener, { flush, instance, flushMs, entries: () => [...held.values()] })
}

/**
 * Reads the hash `key` and checks each entry's lease with `locker.inspect()` (the Locker knows the
 * key prefix). With `own` (the reading instance's recorder), its own locks come from memory, exact;
 * another instance's list may lag its releases by one flush interval, so an entry of it whose lease
 * is not live is shown only once its lease and one interval have passed since the grant (a holder
 * frozen past its TTL shows then; a lock released since the last write does not).
 */
export async function readHeldLocks(redis: Redis, key: string, locker: Pick<Locker, 'inspect'>, own?: Pick<HeldLocksRecorder, 'instance' | 'flushMs' | 'entries'>): Promise<HeldLock[]> {
  const raw = await redis.hgetall(key)
  const entries: Entry[] = own === undefined ? [] : own.entries()
  for (const [field, value] of Object.entries(raw)) {
    if (own !== undefined && field === own.instance) continue
    try {
      const parsed = JSON.parse(value) as Entry | Entry[]
      entries.push(...(Array.isArray(parsed) ? parsed : [parsed]))
    } catch {
      // A foreign or torn value: not ours to show.
    }
  }
  if (entries.length === 0) return []
  const resources = [...new Set(entries.map((e) => e.resource))]
  // Best-effort like the rest of the view: a resource Redis did not answer for shows as not live.
  const seen = await Promise.all(resources.map((r) => locker.inspect(r).catch((): LockInspection | undefined => undefined)))
  const byResource = new Map(resources.map((r, i) => [r, seen[i]]))
  const now = Date.now()
  const locks = entries.flatMap((e): HeldLock[] => {
    const view = byResource.get(e.resource)
    const leaseLive = view !== undefined && view.state === 'held' && view.lastToken !== undefined && String(view.lastToken) === e.token
    const published = own !== undefined && e.instance !== own.instance
    if (!leaseLive && published && e.ttlMs !== undefined && now < Date.parse(e.acquiredAt) + e.ttlMs + own.flushMs) return []
    return [{ resource: e.resource, instance: e.instance, pid: e.pid, token: e.token, ttlLeftMs: leaseLive ? view.holderTtlMs : 0, leaseLive, acquiredAt: e.acquiredAt }]
  })
  return locks.sort((a, b) => a.resource.localeCompare(b.resource) || (BigInt(a.token) < BigInt(b.token) ? -1 : 1))
}
