/**
 * lead() and runOnce() on etcd, unchanged: they are built on acquire(), so they run on the etcd
 * backend as on Redis. One leader of three, stop() handing over to a larger term, a leader whose
 * lease is revoked demoted; runOnce by three instances, each tick run exactly once.
 */
import { beforeAll, describe, expect, it } from 'vitest'
import {
  LeadershipEndedError,
  type DemotionReason,
  type Leadership,
  type Schedule,
  type TickReport,
} from '../../src/index.js'
import { unique } from '../support/connections.js'
import { waitUntil } from '../support/timing.js'
import { etcdClient, etcdLocker, lockRange, startEtcdServer, type EtcdMember } from './etcd-support.js'

let member: EtcdMember
beforeAll(async () => {
  member = await startEtcdServer()
})

interface Candidate {
  readonly terms: bigint[]
  readonly signals: AbortSignal[]
  readonly demotions: DemotionReason[]
  leadership: Leadership
}

function candidates(name: string, n: number, ttlMs: number): Candidate[] {
  return Array.from({ length: n }, () => {
    const c: Candidate = { terms: [], signals: [], demotions: [], leadership: undefined as never }
    c.leadership = etcdLocker(member.endpoint).lead(name, {
      ttlMs,
      onElected(term, signal) {
        c.terms.push(term)
        c.signals.push(signal)
      },
      onDemoted(reason) {
        c.demotions.push(reason)
      },
    })
    return c
  })
}

const leaders = (cs: Candidate[]) => cs.filter((c) => c.leadership.isLeader)

describe('lead() and runOnce() on etcd', () => {
  it('lead(): one leader of three; stop() hands over to another with a larger term', async () => {
    const name = unique('e-lead')
    const cs = candidates(name, 3, 2_000)
    await waitUntil(() => leaders(cs).length === 1, { what: 'a leader', timeoutMs: 10_000 })
    const first = leaders(cs)[0]!
    const term1 = first.leadership.term!
    await first.leadership.stop()
    expect(first.demotions).toEqual(['stopped'])
    expect(first.signals[0]!.reason).toBeInstanceOf(LeadershipEndedError)
    const rest = cs.filter((c) => c !== first)
    // The deletion of the leader's key wakes the candidate queued behind it: no TTL to wait out.
    await waitUntil(() => leaders(rest).length === 1, { what: 'a second leader', timeoutMs: 5_000 })
    expect(leaders(rest)[0]!.leadership.term! > term1).toBe(true)
    expect(leaders(cs)).toHaveLength(1)
    for (const c of rest) await c.leadership.stop()
    expect(leaders(cs)).toHaveLength(0)
  })

  it('lead(): a leader whose lease is revoked is demoted (lost), its signal aborts, another is elected with a larger term', async () => {
    const name = unique('e-lead-lost')
    const cs = candidates(name, 2, 2_000)
    await waitUntil(() => leaders(cs).length === 1, { what: 'a leader', timeoutMs: 10_000 })
    const first = leaders(cs)[0]!
    const term1 = first.leadership.term!
    const admin = etcdClient(member.endpoint)
    const [head] = (await admin.getAll().prefix(lockRange(name)).sort('Create', 'Ascend').exec()).kvs
    expect(BigInt(head!.create_revision)).toBe(term1)
    await admin.leaseClient.leaseRevoke({ ID: head!.lease })
    await waitUntil(() => first.demotions.length === 1, { what: 'the demotion', timeoutMs: 10_000 })
    expect(first.demotions).toEqual(['lost'])
    expect(first.signals[0]!.aborted).toBe(true)
    await waitUntil(() => leaders(cs).length === 1 && leaders(cs)[0]!.leadership.term! > term1, {
      what: 'a new leader with a larger term',
      timeoutMs: 10_000,
    })
    for (const c of cs) await c.leadership.stop()
  })

  it('runOnce(): three instances, 4 ticks: each tick run exactly once, the others report skipped', async () => {
    const key = unique('e-job')
    // A tick's runner needs about four etcd round trips under its lease (the grant, the done
    // record's lease and transaction, the release): with 300 ms, a loaded machine (load 15 on 2
    // cores) let one run out before the record was written, and the next runner ran the tick
    // again. 1.5 s is far from both that and an unloaded machine's ~10 ms.
    const everyMs = 2_000
    const runs = new Map<number, number>()
    const reports: TickReport[] = []
    const schedules: Schedule[] = Array.from({ length: 3 }, () =>
      etcdLocker(member.endpoint).runOnce(
        ({ tick, token }) => {
          expect(typeof token).toBe('bigint')
          runs.set(tick, (runs.get(tick) ?? 0) + 1)
        },
        { key, everyMs, leaseMs: 1_500, onTick: (r) => reports.push(r) },
      ),
    )
    const first = Math.floor(Date.now() / everyMs)
    const done = (tick: number) => reports.filter((r) => r.tick === tick).length === 3
    await waitUntil(() => [1, 2, 3, 4].every((d) => done(first + d)), { what: '4 ticks', timeoutMs: 40_000 })
    await Promise.all(schedules.map((s) => s.stop()))
    for (let tick = first + 1; tick <= first + 4; tick++) {
      const outcomes = reports.filter((r) => r.tick === tick).map((r) => r.outcome)
      expect(runs.get(tick), `tick ${tick}: ${outcomes.join(', ')}`).toBe(1)
      expect(
        outcomes.filter((o) => o === 'ran'),
        `tick ${tick}`,
      ).toHaveLength(1)
    }
  }, 60_000)
})
