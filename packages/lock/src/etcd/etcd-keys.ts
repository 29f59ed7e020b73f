/**
 * Every etcd key the etcd backend reads or writes is named here, and only here:
 *
 * - `<prefix>lock/<resource>/<locker id>`: one key per Locker that holds or waits for the
 *   resource, attached to one of the Locker's leases. The key created earliest (the lowest
 *   `create_revision`) holds the lock; the rest wait in that order, each for the one before it.
 * - `<prefix>last/<resource>`: the token of the last release, for `inspect()`.
 * - `<prefix>done/<resource>`: a run-once holder's record that its tick is done.
 *
 * A resource name may not hold `/`, so no resource's keys fall inside another's range.
 */
import { InvalidLockOptionError } from '../errors.js'

/** The keys of one resource. */
export interface EtcdKeys {
  /** Our own key (this Locker's). */
  readonly own: Buffer
  /** The range of every Locker's key: [from, end). */
  readonly from: Buffer
  readonly end: Buffer
  readonly last: Buffer
  readonly done: Buffer
}

/** The keys of `resource` (a checked name) for the Locker `lockerId`. */
export function etcdKeys(prefix: string, resource: string, lockerId: string): EtcdKeys {
  const from = `${prefix}lock/${resource}/`
  return {
    own: Buffer.from(from + lockerId),
    from: Buffer.from(from),
    end: rangeEnd(Buffer.from(from)),
    last: Buffer.from(`${prefix}last/${resource}`),
    done: Buffer.from(`${prefix}done/${resource}`),
  }
}

/** The first key after every key that starts with `from` (etcd's prefix range end). */
function rangeEnd(from: Buffer): Buffer {
  const end = Buffer.from(from)
  // `from` ends in '/', so its last byte is never 0xff: one increment gives the end.
  end[end.length - 1] = end[end.length - 1]! + 1
  return end
}

/**
 * A resource name the etcd backend can key: `/` separates a resource's keys from the Locker ids
 * under it.
 * @throws InvalidLockOptionError naming `resource`.
 */
export function checkEtcdResource(resource: string): string {
  if (resource.includes('/'))
    throw new InvalidLockOptionError(
      'resource',
      "must not contain '/' on etcd: it separates the resource from the lockers waiting for it",
      resource,
    )
  return resource
}
