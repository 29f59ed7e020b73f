/**
 * locker.lead(): one leader at a time among Lockers of their own (own connections), terms that
 * increase, a lost lease that demotes, stop() that hands over, a failing onElected, close().
 * The three-process version with SIGSTOP and fenced writes counted in PostgreSQL is in
 * apps/chaos/test/election.test.ts.
 */
import { Redis } from 'ioredis'
import { describe, expect, it } from 'vitest'
import {
  InvalidLockOptionError,
  LeadershipEndedError,
  resourceKeys,
  type DemotionReason,
  type Leadership,
  type Locker,
} from '../../src/index.js'
import { connectShared, makeLocker, unique } from '../support/connections.js'
import { eventLog, type EventLog } from '../support/events.js'
import { waitUntil } from '../support/timing.js'

const PREFIX = unique('fl-test-lead') + ':'

interface Candidate {
  readonly locker: Locker
  readonly log: EventLog
  readonly terms: bigint[]
  readonly signals: AbortSignal[]
  readonly demotions: DemotionReason[]
  leadership: Leadership
}

async function candidates(name: string, n: number, ttlMs = 600): Promise<Candidate[]> {
  const out: Candidate[] = []
  for (let i = 0; i < n; i++) {
    const log = eventLog()
    const locker = makeLocker(await connectShared(), { prefix: PREFIX, onEvent: log.onEvent, pollMs: 100 })
    const c: Candidate = { locker, log, terms: [], signals: [], demotions: [], leadership: undefined as never }
    c.leadership = locker.lead(name, {
      ttlMs,
      onElected(term, signal) {
        c.terms.push(term)
        c.signals.push(signal)
      },
      onDemoted(reason) {
        c.demotions.push(reason)
      },
    })
    out.push(c)
  }
  return out
}

const leaders = (cs: Candidate[]) => cs.filter((c) => c.leadership.isLeader)

describe('locker.lead()', () => {
  it('elects one of three; stop() hands over at once to another, with a larger term', async () => {
    const name = unique('lead:handover')
    const cs = await candidates(name, 3)
    await waitUntil(() => leaders(cs).length === 1, { what: 'a leader' })
    const first = leaders(cs)[0]!
    const term1 = first.leadership.term!
    expect(first.terms).toEqual([term1])
    expect(first.log.of('elected')).toMatchObject([{ resource: name, term: term1 }])

    await first.leadership.stop()
    expect(first.demotions).toEqual(['stopped'])
    expect(first.signals[0]!.aborted).toBe(true)
    expect(first.signals[0]!.reason).toBeInstanceOf(LeadershipEndedError)
    expect(first.log.of('demoted')).toMatchObject([{ resource: name, term: term1, reason: 'stopped' }])
    // The release message wakes a waiting candidate: well within one TTL (600 ms), not after it.
    const rest = cs.filter((c) => c !== first)
    await waitUntil(() => leaders(rest).length === 1, { what: 'a second leader', timeoutMs: 5_000 })
    const second = leaders(rest)[0]!
    expect(second.leadership.term! > term1).toBe(true)
    expect(leaders(cs)).toHaveLength(1)
    expect(first.leadership.isLeader).toBe(false)
    for (const c of rest) await c.leadership.stop()
    expect(leaders(cs)).toHaveLength(0)
  })

  it('a leader whose lease is taken from it (the key deleted) is demoted, its signal aborts, and another is elected with a larger term', async () => {
    const name = unique('lead:lost')
    const cs = await candidates(name, 2, 300)
    await waitUntil(() => leaders(cs).length === 1, { what: 'a leader' })
    const first = leaders(cs)[0]!
    const term1 = first.leadership.term!
    const redis = await connectShared()
    const keys = resourceKeys(PREFIX, name)
    // Another holder's grant: the key now holds someone else's owner id.
    await redis.set(keys.lock, 'someone-else', 'PX', 300)
    await waitUntil(() => first.demotions.length === 1, { what: 'the demotion', timeoutMs: 5_000 })
    expect(first.demotions).toEqual(['lost'])
    const reason: unknown = first.signals[0]!.reason
    expect(reason).toBeInstanceOf(LeadershipEndedError)
    expect((reason as LeadershipEndedError).reason).toBe('lost')
    await waitUntil(() => leaders(cs).length === 1, { what: 'a new leader', timeoutMs: 5_000 })
    const next = leaders(cs)[0]!
    expect(next.leadership.term! > term1).toBe(true)
    for (const c of cs) await c.leadership.stop()
  })

  it('onElected that rejects resigns (failed) and the campaign goes on; close() demotes with closed', async () => {
    const name = unique('lead:failed')
    const log = eventLog()
    const locker = makeLocker(await connectShared(), { prefix: PREFIX, onEvent: log.onEvent })
    let calls = 0
    const reasons: DemotionReason[] = []
    const leadership = locker.lead(name, {
      retryMs: 10,
      onElected: async () => {
        calls++
        if (calls === 1) throw new Error('the first term fails')
      },
      onDemoted: (reason) => reasons.push(reason),
    })
    await waitUntil(() => calls === 2 && leadership.isLeader, { what: 'a second term' })
    expect(reasons).toEqual(['failed'])
    const [t1, t2] = log.of('elected').map((e) => e.term)
    expect(t2! > t1!).toBe(true)
    await locker.close()
    await leadership.stop()
    expect(reasons).toEqual(['failed', 'closed'])
    expect(log.of('demoted').map((e) => e.reason)).toEqual(['failed', 'closed'])
  })

  it('refuses bad input before any I/O: name, callbacks, ttlMs, retryMs, unknown option names', () => {
    // A client that never connects: anything sent would hang, nothing is.
    const client = new Redis({ lazyConnect: true, port: 1, enableOfflineQueue: false })
    const locker = makeLocker(client)
    const ok = { onElected: () => {} }
    const bad: [unknown, unknown, string][] = [
      ['', ok, 'name'],
      [42, ok, 'name'],
      ['x', undefined, 'options'],
      ['x', {}, 'onElected'],
      ['x', { onElected: 'run' }, 'onElected'],
      ['x', { ...ok, onDemoted: 1 }, 'onDemoted'],
      ['x', { ...ok, ttlMs: 0 }, 'ttlMs'],
      ['x', { ...ok, retryMs: 1.5 }, 'retryMs'],
      ['x', { ...ok, ttlMS: 100 }, 'options.ttlMS'],
      ['x', { ...ok, every: 100 }, 'options.every'],
    ]
    for (const [name, options, field] of bad) {
      let error: unknown
      try {
        locker.lead(name as string, options as never)
      } catch (e) {
        error = e
      }
      expect(error, field).toBeInstanceOf(InvalidLockOptionError)
      expect((error as InvalidLockOptionError).field).toBe(field)
    }
    expect(client.status).toBe('wait')
  })
})
