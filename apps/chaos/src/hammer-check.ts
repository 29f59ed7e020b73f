/**
 * The mutual-exclusion hammer's checker: the grants every process recorded, on the machine's one
 * monotonic clock (`process.hrtime`, CLOCK_MONOTONIC, the same in every process), checked from the
 * outside. A grant counts as held from when its acquire resolved to the earlier of its release
 * and the end of the validity the Lock reported: the lock promises that no two such intervals
 * overlap, and that tokens grow in the order of the grants.
 */

/** One grant, as a hammer process recorded it (ns on CLOCK_MONOTONIC; the token as a string). */
export interface GrantRecord {
  readonly process: number
  readonly token: string
  /** When the acquire resolved. */
  readonly grantedNs: number
  /** When the holder called release(). */
  readonly releasedNs: number
  /** When the Lock's validity ended (grant + lock.remainingMs() at the grant). */
  readonly validUntilNs: number
}

/** What the checker found. */
export interface HammerCheck {
  readonly grants: number
  /** Intervals that began before an earlier one ended (each counted once). */
  readonly overlaps: number
  /** Tokens, in the order of the grants, not larger than the one before. */
  readonly tokenInversions: number
  /** The worst overlap, ms (0 when none). */
  readonly worstOverlapMs: number
  /**
   * Grants whose holder first looked after its validity had ended (its process was descheduled
   * between the grant and the look, on a busy machine): held for no time as seen from outside.
   * They take no part in the token order, which their late look would misplace.
   */
  readonly seenExpired: number
}

/**
 * Checks the records. `holdsUntil`: `validity` (the lock's promise) or `release` (the unprotected
 * reading: a holder that believes it holds the lock until it releases it, whatever its lease).
 */
export function checkGrants(records: readonly GrantRecord[], holdsUntil: 'validity' | 'release'): HammerCheck {
  const sorted = [...records].sort((a, b) => a.grantedNs - b.grantedNs)
  let overlaps = 0
  let tokenInversions = 0
  let worstOverlapNs = 0
  let heldUntil = Number.NEGATIVE_INFINITY
  let lastToken: bigint | undefined
  let seenExpired = 0
  for (const r of sorted) {
    const end = holdsUntil === 'release' ? r.releasedNs : Math.min(r.releasedNs, r.validUntilNs)
    if (r.validUntilNs <= r.grantedNs) {
      seenExpired++
      if (holdsUntil === 'validity') continue
    }
    if (r.grantedNs < heldUntil) {
      overlaps++
      worstOverlapNs = Math.max(worstOverlapNs, heldUntil - r.grantedNs)
    }
    heldUntil = Math.max(heldUntil, end)
    const token = BigInt(r.token)
    if (lastToken !== undefined && token <= lastToken) tokenInversions++
    lastToken = token
  }
  return { grants: sorted.length, overlaps, tokenInversions, worstOverlapMs: worstOverlapNs / 1e6, seenExpired }
}
