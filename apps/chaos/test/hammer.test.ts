/**
 * The mutual-exclusion hammer in the chaos suite's short run: 16 processes, 5-20 ms leases, one
 * resource, over one Redis and over a quorum of three, checked from the outside on the machine's
 * monotonic clock; the unprotected reading of the same records shows the overlaps the lock's
 * validity rules out.
 */
import { describe, expect, it } from 'vitest'
import { checkGrants } from '../src/hammer-check.js'
import { runHammer, type HammerResult } from '../src/hammer.js'

describe('the hammer checker', () => {
  it('counts an interval that begins before an earlier one ended, and a token that does not grow', () => {
    const ms = 1e6
    const records = [
      { process: 0, token: '10', grantedNs: 0, releasedNs: 10 * ms, validUntilNs: 5 * ms },
      { process: 1, token: '11', grantedNs: 6 * ms, releasedNs: 8 * ms, validUntilNs: 20 * ms },
      { process: 2, token: '11', grantedNs: 9 * ms, releasedNs: 12 * ms, validUntilNs: 20 * ms },
    ]
    // Held until validity: 0-5, 6-8, 9-12: no overlap; the third token repeats the second.
    expect(checkGrants(records, 'validity')).toEqual({
      grants: 3,
      overlaps: 0,
      tokenInversions: 1,
      worstOverlapMs: 0,
      seenExpired: 0,
    })
    // A holder that first looked after its validity ended held nothing: it is not ordered by its late look.
    const late = { process: 3, token: '9', grantedNs: 30 * ms, releasedNs: 31 * ms, validUntilNs: 29 * ms }
    expect(checkGrants([...records.slice(0, 2), late], 'validity')).toMatchObject({
      overlaps: 0,
      tokenInversions: 0,
      seenExpired: 1,
    })
    // Held until release: 0-10 overlaps both others.
    expect(checkGrants(records, 'release')).toMatchObject({ overlaps: 2, worstOverlapMs: 4 })
  })
})

describe.each(['single', 'quorum'] as const)('the mutual-exclusion hammer (%s)', (mode) => {
  it('16 processes, 5-20 ms leases: no two grants held at once, tokens grow with the grants; held until release instead, they overlap', async () => {
    // A busy machine starves leases this short, quorum mode's (three round trips within a 10-20 ms
    // validity) most: runs are added, up to 4, until the 30 grants asserted below were checked.
    const runs: HammerResult[] = []
    let grants = 0
    while (grants < 30 && runs.length < 4) {
      const r = await runHammer({ mode, processes: 16, durationMs: mode === 'quorum' ? 6_000 : 4_000 })
      console.log(
        `hammer ${mode}: ${r.check.grants} grants by ${r.served} of ${r.processes} processes, ${r.check.overlaps} overlaps, ${r.check.tokenInversions} token inversions (${r.check.seenExpired} grants first seen after their validity); unprotected reading: ${r.naive.overlaps} overlaps (worst ${r.naive.worstOverlapMs.toFixed(1)} ms); errors ${JSON.stringify(r.errors)} (${r.seconds.toFixed(1)} s)`,
      )
      runs.push(r)
      grants += r.check.grants
    }
    const sum = (f: (r: HammerResult) => number) => runs.reduce((n, r) => n + f(r), 0)
    expect(grants).toBeGreaterThanOrEqual(30)
    expect({ overlaps: sum((r) => r.check.overlaps), tokenInversions: sum((r) => r.check.tokenInversions) }).toEqual({
      overlaps: 0,
      tokenInversions: 0,
    })
    expect(sum((r) => r.naive.overlaps)).toBeGreaterThan(0)
  })
})
