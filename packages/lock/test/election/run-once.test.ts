/**
 * locker.runOnce(): three Lockers (own connections) schedule one job; each tick is run by exactly
 * one of them and every instance reports every tick it tried. The three-process version, with a
 * runner frozen mid-job and the runs counted in PostgreSQL, is in apps/chaos/test/election.test.ts.
 */
import { Redis } from 'ioredis'
import { describe, expect, it } from 'vitest'
import { InvalidLockOptionError, type Schedule, type TickReport } from '../../src/index.js'
import { connectShared, makeLocker, unique } from '../support/connections.js'
import { waitUntil } from '../support/timing.js'

const PREFIX = unique('fl-test-run-once') + ':'

describe('locker.runOnce()', () => {
  it('three instances, 6 ticks: each tick run exactly once, the others report skipped; a job that throws is run by another in the same tick', async () => {
    const key = unique('job')
    const everyMs = 450
    const runs = new Map<number, number>()
    const reports: TickReport[] = []
    let failed = false
    const schedules: Schedule[] = []
    for (let i = 0; i < 3; i++) {
      const locker = makeLocker(await connectShared(), {
        prefix: PREFIX,
        pollMs: 50,
      })
      schedules.push(
        locker.runOnce(
          ({ tick, token }) => {
            expect(typeof token).toBe('bigint')
            // The first runner of a tick with most of its window ahead fails once: another instance
            // runs it. (Of the first tick seen, only a moment may be left: under load, with the
            // grant's done check, nobody else then got it before its window ended, 1 full-suite run.)
            if (!failed && Date.now() - tick * everyMs < everyMs / 4) {
              failed = true
              throw new Error('the job failed here')
            }
            runs.set(tick, (runs.get(tick) ?? 0) + 1)
          },
          { key, everyMs, leaseMs: 150, onTick: (r) => reports.push(r) },
        ),
      )
    }
    const first = Math.floor(Date.now() / everyMs)
    // Every instance reported each of 6 full ticks after the first.
    const done = (tick: number) => reports.filter((r) => r.tick === tick).length === 3
    await waitUntil(() => [1, 2, 3, 4, 5, 6].every((d) => done(first + d)), { what: '6 ticks', timeoutMs: 10_000 })
    await Promise.all(schedules.map((s) => s.stop()))
    const failedTick = reports.find((r) => r.outcome === 'failed')!
    expect(failedTick.error?.message).toBe('the job failed here')
    // Each tick run once, reported `ran` once. A runner starved past its 150 ms lease (the machine
    // is shared: a clean-clone CI run at load ~20 saw one) reports `lost`, and the next holder runs
    // the tick again, by design: a run beyond the first comes only with a `lost` report.
    const runsOf = (tick: number) => {
      const outcomes = reports.filter((r) => r.tick === tick).map((r) => r.outcome)
      const lost = outcomes.filter((o) => o === 'lost').length
      expect(
        outcomes.filter((o) => o === 'ran'),
        `tick ${tick}: ${outcomes.join(', ')}`,
      ).toHaveLength(1)
      expect(runs.get(tick), `tick ${tick}: ${outcomes.join(', ')}`).toBeGreaterThanOrEqual(1)
      expect(runs.get(tick), `tick ${tick}: ${outcomes.join(', ')}`).toBeLessThanOrEqual(1 + lost)
    }
    for (let tick = first + 1; tick <= first + 6; tick++) runsOf(tick)
    // The failed tick was still run, by another instance.
    runsOf(failedTick.tick)
    const ran = reports.filter((r) => r.outcome === 'ran')
    expect(new Set(ran.map((r) => r.tick)).size).toBe(ran.length)
  })

  it('refuses bad input before any I/O: job, key, everyMs, leaseMs, onTick, unknown option names', () => {
    const client = new Redis({ lazyConnect: true, port: 1, enableOfflineQueue: false })
    const locker = makeLocker(client)
    const job = () => {}
    const ok = { key: 'k', everyMs: 1_000 }
    const bad: [unknown, unknown, string][] = [
      ['job', ok, 'job'],
      [job, undefined, 'options'],
      [job, { everyMs: 1_000 }, 'key'],
      [job, { ...ok, key: '' }, 'key'],
      [job, { key: 'k' }, 'everyMs'],
      [job, { ...ok, everyMs: 5 }, 'everyMs'],
      [job, { ...ok, everyMs: '1s' }, 'everyMs'],
      [job, { ...ok, leaseMs: 1_000 }, 'leaseMs'],
      [job, { ...ok, onTick: true }, 'onTick'],
      [job, { ...ok, every: 1_000 }, 'options.every'],
    ]
    for (const [fn, options, field] of bad) {
      let error: unknown
      try {
        locker.runOnce(fn as never, options as never)
      } catch (e) {
        error = e
      }
      expect(error, field).toBeInstanceOf(InvalidLockOptionError)
      expect((error as InvalidLockOptionError).field).toBe(field)
    }
    expect(client.status).toBe('wait')
  })
})
