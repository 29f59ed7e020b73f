/**
 * The one place that builds Redis key and channel names. Every key of one resource carries the
 * same Redis Cluster hash tag, `{<resource>}`, so each script touches a single slot.
 */

/** The names used for one lock resource. */
export interface ResourceKeys {
  /** String key holding the owner id while the lock is held. */
  readonly lock: string
  /** String key holding the last fencing token minted for the resource. */
  readonly fence: string
  /** Pub/sub channel on which a release is announced. */
  readonly channel: string
  /** Sorted set of the lockers waiting for the resource (their ids), by ticket: the order they came. */
  readonly queue: string
  /** Hash of each queued locker's lease: when (server ms) it counts as gone unless it tries again. */
  readonly leases: string
}

/** Builds the key names of `resource` under `prefix` (validated by the caller). */
export function resourceKeys(prefix: string, resource: string): ResourceKeys {
  const base = `${prefix}{${resource}}`
  return {
    lock: `${base}:lock`,
    fence: `${base}:fence`,
    channel: `${base}:released`,
    queue: `${base}:queue`,
    leases: `${base}:leases`,
  }
}

/**
 * The key a holder writes when it finished its work under a grant of `resource` (a run-once tick,
 * election/run-once.ts; scripts/mark-done.ts): its token. In the resource's hash tag, so that the
 * script that checks the lock and writes it touches one slot.
 */
export function doneKey(prefix: string, resource: string): string {
  return `${prefix}{${resource}}:done`
}

/** Recovers the resource from a channel name built by {@link resourceKeys}, or undefined. */
export function resourceOfChannel(prefix: string, channel: string): string | undefined {
  const head = `${prefix}{`
  const tail = '}:released'
  if (!channel.startsWith(head) || !channel.endsWith(tail)) return undefined
  return channel.slice(head.length, channel.length - tail.length)
}

/**
 * Quorum mode's record of the longest lease granted on a node lately (quorum/restart-guard.ts):
 * one key per node and prefix, outside any resource's hash tag (nodes are standalone masters).
 */
export function leaseRecordKey(prefix: string): string {
  return `${prefix}lease-record`
}

/**
 * Quorum mode's node marker (scripts/node-marker.ts): one key per node and prefix, no expiry, its
 * epoch checked by every grant; gone when the node lost its data.
 */
export function nodeMarkerKey(prefix: string): string {
  return `${prefix}node-marker`
}

/**
 * A semaphore's keys (family/semaphore.ts) live under `<prefix>sem:`: a lock's keys begin
 * `<prefix>{`, so no lock name reaches them. Under it the semaphore is made of lock resources:
 * its queue, `<name>:queue`, and its permits, `<name>:permit:<i>` (a name is told back from
 * either by its last part, so two semaphores never share one).
 */
export const SEMAPHORE_PREFIX = 'sem:'

/** The lock resources of semaphore `name` with `permits` permits (under {@link SEMAPHORE_PREFIX}). */
export function semaphoreResources(name: string, permits: number): { queue: string; permits: string[] } {
  return {
    queue: `${name}:queue`,
    permits: Array.from({ length: permits }, (_, i) => `${name}:permit:${i}`),
  }
}

/** The prefix (after the Locker's) of every read-write lock's keys (family/read-write.ts). */
export const READ_WRITE_PREFIX = 'rw:'

/** The keys of one read-write lock, all in one hash tag. */
export interface ReadWriteKeys {
  readonly writer: string
  readonly readers: string
  readonly writers: string
  readonly writerLeases: string
  readonly fence: string
  /** The channel of the releases that may let a waiter in (family/read-write-wakes.ts). */
  readonly released: string
}

/** Builds the keys of read-write lock `name` under `prefix` (the Locker's). */
export function readWriteKeys(prefix: string, name: string): ReadWriteKeys {
  const base = `${prefix}${READ_WRITE_PREFIX}{${name}}`
  return {
    writer: `${base}:writer`,
    readers: `${base}:readers`,
    writers: `${base}:writers`,
    writerLeases: `${base}:writer-leases`,
    fence: `${base}:fence`,
    released: `${base}:released`,
  }
}
