// The incident timeline is drawn from what a sale recorded: the pause of the chaos and the
// instances' event logs. These logs are the shapes a real sale produced (1000 buyers / 100 units,
// chaos pause, seed 1001: fenced and lock only), cut down to the resource of the incident.
import { describe, expect, it } from 'vitest'
import type { PauseRecord } from '../src/chaos.js'
import type { RecordedEvent } from '../src/incident-log.js'
import { buildIncident } from '../src/incident.js'

const T0 = 1_800_000_000_000
const N = '1795761712563429'
const M = '1795761713576898'
const pause: PauseRecord = {
  instance: 'shop-1',
  pid: 11,
  resource: 'order:1',
  token: N,
  operation: 'charge',
  pausedMs: 2500,
  frozenAtMs: T0 + 697,
  resumedAtMs: T0 + 3212,
}
const lock = (
  at: number,
  instance: string,
  token: string,
  what: 'acquired' | 'extended' | 'lost' | 'released',
): RecordedEvent => ({
  atMs: T0 + at,
  instance,
  resource: 'order:1',
  token,
  kind: 'lock',
  what,
  ttlMs: what === 'acquired' || what === 'extended' ? 1000 : null,
})
const charge = (
  at: number,
  instance: string,
  token: string,
  outcome: 'charged' | 'replayed' | 'refused-stale',
  chargeId: string | null,
): RecordedEvent => ({
  atMs: T0 + at,
  instance,
  resource: 'order:1',
  token,
  kind: 'charge',
  orderId: 1,
  outcome,
  chargeId,
})
const write = (
  at: number,
  instance: string,
  token: string,
  what: 'intent' | 'payment',
  outcome: 'accepted' | 'refused',
  storedToken: string | null = null,
): RecordedEvent => ({
  atMs: T0 + at,
  instance,
  resource: 'order:1',
  token,
  kind: 'write',
  what,
  outcome,
  orderId: 1,
  storedToken,
})

describe('buildIncident', () => {
  it('fenced: A frozen in its charge, B takes over with a newer token, A wakes and its write is refused; the gateway replays the charge to B', () => {
    const events: RecordedEvent[] = [
      lock(602, 'shop-1', N, 'acquired'),
      lock(620, 'shop-2', '1795761712000000', 'acquired'), // another resource's grant would be filtered; this one is older than N
      lock(1616, 'shop-3', M, 'acquired'),
      write(1631, 'shop-3', M, 'intent', 'accepted'),
      charge(1700, 'shop-3', M, 'replayed', 'ch_1'),
      write(1712, 'shop-3', M, 'payment', 'accepted'),
      lock(1720, 'shop-3', M, 'released'),
      lock(3209, 'shop-1', N, 'lost'),
      charge(3217, 'shop-1', N, 'charged', 'ch_1'),
      write(3315, 'shop-1', N, 'payment', 'refused', '1795761714552218'),
    ]
    const { incident, reason } = buildIncident({
      mode: 'fenced',
      ttlMs: 1000,
      saleStartMs: T0,
      pauses: [pause],
      events,
    })
    expect(reason).toBeNull()
    expect(incident?.holderA).toEqual({ instance: 'shop-1', token: N })
    expect(incident?.holderB).toEqual({ instance: 'shop-3', token: M })
    expect(incident?.ending).toBe('refused')
    expect(incident?.steps.map((s) => [s.atMs, s.actor, s.kind, s.outcome])).toEqual([
      [602, 'A', 'acquired', 'ok'],
      [697, 'chaos', 'frozen', 'ok'],
      [1602, 'A', 'lease-expired', 'ok'],
      [1616, 'B', 'acquired', 'ok'],
      [1631, 'B', 'write', 'ok'],
      [1700, 'B', 'charge', 'replayed'],
      [1712, 'B', 'write', 'ok'],
      [3212, 'chaos', 'resumed', 'ok'],
      [3212, 'A', 'lost', 'ok'],
      [3217, 'A', 'charge', 'ok'],
      [3315, 'A', 'write', 'refused'],
    ])
    expect(incident?.summary).toMatch(/^Fencing held/)
  })

  it('lock only: the same story ends in a second charge and the stale payment accepted', () => {
    const events: RecordedEvent[] = [
      lock(579, 'shop-1', N, 'acquired'),
      lock(1574, 'shop-3', M, 'acquired'),
      write(1600, 'shop-3', M, 'intent', 'accepted'),
      charge(1662, 'shop-3', M, 'charged', 'ch_b'),
      write(1680, 'shop-3', M, 'payment', 'accepted'),
      charge(3370, 'shop-1', N, 'charged', 'ch_a'),
      write(3500, 'shop-1', N, 'payment', 'accepted'),
    ]
    const { incident } = buildIncident({
      mode: 'lock',
      ttlMs: 1000,
      saleStartMs: T0,
      pauses: [{ ...pause, frozenAtMs: T0 + 715 }],
      events,
    })
    expect(incident?.ending).toBe('second-charge')
    // The lease ran out by B's grant at the latest (Redis granted B), whatever A's clock computed.
    expect(incident?.steps.find((s) => s.kind === 'lease-expired')?.atMs).toBe(1574)
    expect(
      incident?.steps
        .filter((s) => s.actor === 'A' && s.kind !== 'acquired' && s.kind !== 'lease-expired')
        .map((s) => s.outcome),
    ).toEqual(['stale-accepted', 'stale-accepted'])
    expect(incident?.summary).toMatch(/^The lock alone failed/)
  })

  it("fenced, A's charge sent only after it woke: the gateway refuses the old token, nothing of A lands", () => {
    const events: RecordedEvent[] = [
      lock(1249, 'shop-1', N, 'acquired'),
      lock(2277, 'shop-3', M, 'acquired'),
      write(2529, 'shop-3', M, 'intent', 'accepted'),
      charge(2855, 'shop-3', M, 'charged', 'ch_b'),
      write(2948, 'shop-3', M, 'payment', 'accepted'),
      charge(4259, 'shop-1', N, 'refused-stale', null),
    ]
    const pauses = [{ ...pause, frozenAtMs: T0 + 1494, resumedAtMs: T0 + 3995 }]
    const { incident } = buildIncident({ mode: 'fenced', ttlMs: 1000, saleStartMs: T0, pauses, events })
    expect(incident?.ending).toBe('refused')
    expect(incident?.steps.at(-1)).toMatchObject({ actor: 'A', kind: 'charge', outcome: 'refused' })
    expect(incident?.summary).toMatch(/the gateway refused its charge for the old token\.$/)
    expect(incident?.summary).not.toMatch(/database/)
  })

  it("a renewal answered only after the wake: the lease is known to be gone by B's grant, not earlier", () => {
    const events: RecordedEvent[] = [
      lock(602, 'shop-1', N, 'acquired'),
      lock(5000, 'shop-1', N, 'extended'), // sent at ~935 ms, its answer read after the wake
      lock(2100, 'shop-3', M, 'acquired'),
      write(2120, 'shop-3', M, 'payment', 'accepted'),
      write(5100, 'shop-1', N, 'payment', 'refused', M),
    ]
    const { incident } = buildIncident({
      mode: 'fenced',
      ttlMs: 1000,
      saleStartMs: T0,
      pauses: [{ ...pause, frozenAtMs: T0 + 1000, resumedAtMs: T0 + 3500 }],
      events,
    })
    expect(incident?.steps.find((s) => s.kind === 'lease-expired')).toMatchObject({
      atMs: 2100,
      text: expect.stringContaining('at the latest'),
    })
  })

  it('says why there is none: no lock, or no pause on a holder', () => {
    expect(
      buildIncident({ mode: 'unsafe', ttlMs: 1000, saleStartMs: T0, pauses: [{ ...pause, token: null }], events: [] })
        .reason,
    ).toMatch(/No lock/)
    expect(buildIncident({ mode: 'fenced', ttlMs: 1000, saleStartMs: T0, pauses: [], events: [] }).reason).toMatch(
      /No pause/,
    )
  })
})
