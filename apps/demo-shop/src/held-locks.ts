/**
 * Which locks are held right now, across all instances, for `GET /api/state`.
 *
 * Each instance records the locks it *believes* it holds in one Redis hash (from its Locker's
 * `acquired` / `released` / `lost` events). The reader then checks each entry with
 * `locker.inspect()` (read-only, one round trip per resource, no key names of its own): the lease
 * is live only while the lock is held and the last token minted for the resource is the entry's. So a holder frozen past its TTL shows as what it is — it still
 * believes it holds the lock, but its lease has expired (or been taken by a newer token).
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
}

const fieldOf = (resource: string, token: bigint | string) => `${resource} ${token}`

/**
 * Returns an `onEvent` listener that keeps this instance's entries in the hash `key`. Redis
 * errors are swallowed: the view is best-effort and must never fail a request.
 */
export function heldLocksRecorder(redis: Pick<Redis, 'hset' | 'hdel'>, key: string, instance: string): (event: LockEvent) => void {
  return (event) => {
    if (event.type === 'acquired') {
      const entry: Entry = { resource: event.resource, instance, pid: process.pid, token: String(event.token), acquiredAt: new Date().toISOString() }
      redis.hset(key, fieldOf(event.resource, event.token), JSON.stringify(entry)).catch(() => {})
    } else if (event.type === 'released' || event.type === 'lost') {
      redis.hdel(key, fieldOf(event.resource, event.token)).catch(() => {})
    }
  }
}

/** Reads the hash `key` and checks each entry's lease with `locker.inspect()` (the Locker knows the key prefix). */
export async function readHeldLocks(redis: Redis, key: string, locker: Pick<Locker, 'inspect'>): Promise<HeldLock[]> {
  const raw = await redis.hgetall(key)
  const entries: Entry[] = []
  for (const value of Object.values(raw)) {
    try {
      entries.push(JSON.parse(value) as Entry)
    } catch {
      // A foreign or torn value: not ours to show.
    }
  }
  if (entries.length === 0) return []
  const resources = [...new Set(entries.map((e) => e.resource))]
  // Best-effort like the rest of the view: a resource Redis did not answer for shows as not live.
  const seen = await Promise.all(resources.map((r) => locker.inspect(r).catch((): LockInspection | undefined => undefined)))
  const byResource = new Map(resources.map((r, i) => [r, seen[i]]))
  const locks = entries.map((e): HeldLock => {
    const view = byResource.get(e.resource)
    const leaseLive = view !== undefined && view.state === 'held' && view.lastToken !== undefined && String(view.lastToken) === e.token
    return { resource: e.resource, instance: e.instance, pid: e.pid, token: e.token, ttlLeftMs: leaseLive ? view.holderTtlMs : 0, leaseLive, acquiredAt: e.acquiredAt }
  })
  return locks.sort((a, b) => a.resource.localeCompare(b.resource) || (BigInt(a.token) < BigInt(b.token) ? -1 : 1))
}
