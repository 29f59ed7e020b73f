import { describe, expect, it } from 'vitest'
import { checkHistory } from '../src/checker.js'
import type { HistoryEvent } from '../src/history.js'
import { OUTAGE_SLACK_MS, SCENARIOS, verdict, WAIT_MS, type RunResult } from '../src/scenarios.js'

// The quorum scenario's acceptance, on hand-made histories: a majority down must refuse every
// acquire with a typed error, in time, and grant nothing.
const clocks = (mono: number) => ({ mono, perf: mono, origin: 0, wall: 1_700_000_000_000 + mono })
const quorum = SCENARIOS.find((s) => s.name === 'quorum')
if (quorum === undefined) throw new Error('no quorum scenario')

/** A run in `mode` whose history has a few grants, a majority down from 1 000 to 4 000, and `during`. */
function run(mode: 'fenced' | 'lock', during: HistoryEvent[]): RunResult {
  const events: HistoryEvent[] = [
    { k: 'enter', inst: 'w1', res: 'r', token: '1', asked: 0, ...clocks(1) },
    { k: 'exit', inst: 'w1', res: 'r', token: '1', ...clocks(2) },
    { k: 'fault', kind: 'node-kill', quorumDown: 'minority', start: 10, end: 20, ...clocks(20) },
    { k: 'fault', kind: 'majority-sigstop', quorumDown: 'majority', start: 1_000, end: 4_000, ...clocks(4_000) },
    ...during,
    { k: 'enter', inst: 'w1', res: 'r', token: '5', asked: 5_000, ...clocks(5_001) },
    { k: 'exit', inst: 'w1', res: 'r', token: '5', ...clocks(5_002) },
  ]
  events.sort((a, b) => a.mono - b.mono)
  return { scenario: 'quorum', mode, check: checkHistory(events), faultKinds: {}, seconds: 1 }
}
const ask = (inst: string, mono: number): HistoryEvent => ({ k: 'ask', inst, res: 'r', ...clocks(mono) })
const failed = (inst: string, asked: number, mono: number, error = 'LockUnavailableError'): HistoryEvent => ({ k: 'acquire-failed', inst, res: 'r', asked, error, ...clocks(mono) })
const refusedInTime = [ask('w2', 1_100), failed('w2', 1_100, 1_100 + WAIT_MS + 5), ask('w3', 1_200), failed('w3', 1_200, 1_200 + WAIT_MS, 'LockTimeoutError')]

describe('verdict of the quorum scenario', () => {
  it('passes acquires refused with typed errors within their wait', () => {
    expect(verdict(quorum, run('fenced', refusedInTime), run('lock', refusedInTime))).toEqual([])
  })

  it('fails a lock granted while a majority was down', () => {
    const granted = [...refusedInTime, ask('w4', 1_300), { k: 'enter', inst: 'w4', res: 'r', token: '3', asked: 1_300, ...clocks(1_320) } as HistoryEvent]
    expect(verdict(quorum, run('fenced', granted), run('lock', refusedInTime))).toEqual(['fenced: 1 locks granted while a majority was down'])
  })

  it('fails an acquire that ends with an untyped error, or never ends', () => {
    const problems = verdict(quorum, run('fenced', [...refusedInTime, ask('w4', 1_300), failed('w4', 1_300, 1_310, 'TypeError')]), run('lock', [...refusedInTime, ask('w5', 1_400)]))
    expect(problems).toHaveLength(2)
    expect(problems[0]).toMatch(/^fenced: acquires failed without the lock's typed error/)
    expect(problems[1]).toBe('lock: 1 acquires asked while a majority was down never ended')
  })

  it('fails an acquire past its wait, not counting the time its own process did not run', () => {
    const late = WAIT_MS + OUTAGE_SLACK_MS + 100
    const slow = [ask('w4', 1_300), failed('w4', 1_300, 1_300 + late)]
    const starved = [...slow, { k: 'stall', inst: 'w4', start: 1_500, end: 1_700, ...clocks(1_700) } as HistoryEvent]
    expect(verdict(quorum, run('fenced', slow), run('lock', starved))).toEqual([
      `fenced: an acquire asked while a majority was down took ${late} ms, ${late} ms while its process ran (LockUnavailableError; wait ${WAIT_MS} ms)`,
    ])
  })

  it('fails a run in which no majority was ever down', () => {
    const none: RunResult = { scenario: 'quorum', mode: 'lock', check: checkHistory([{ k: 'enter', inst: 'w1', res: 'r', token: '1', ...clocks(1) }, { k: 'fault', kind: 'node-kill', quorumDown: 'minority', start: 0, end: 1, ...clocks(1) }]), faultKinds: {}, seconds: 1 }
    expect(verdict(quorum, run('fenced', refusedInTime), none)).toEqual(['lock: no majority of the quorum was ever down'])
  })
})

describe('verdict of the worker-kill-9 scenario', () => {
  const killScenario = SCENARIOS.find((s) => s.name === 'worker-kill-9')
  if (killScenario === undefined) throw new Error('no worker-kill-9 scenario')
  const history: HistoryEvent[] = [
    { k: 'enter', inst: 'w1', res: 'order:1', token: '1', asked: 0, ...clocks(1) },
    { k: 'fault', kind: 'worker-kill-9', inst: 'w1', start: 5, end: 5, ...clocks(5) },
    { k: 'fault', kind: 'die-after-charge', inst: 'w1', start: 2_000, end: 2_000, ...clocks(2_000) },
    { k: 'enter', inst: 'w2', res: 'order:1', token: '2', asked: 6, ...clocks(600) },
    { k: 'exit', inst: 'w2', res: 'order:1', token: '2', ...clocks(700) },
  ]
  const killRun = (mode: 'fenced' | 'lock', kills: number, counts?: Parameters<typeof checkHistory>[1]): RunResult => ({
    scenario: 'worker-kill-9',
    mode,
    check: checkHistory(kills > 0 ? history : history.filter((e) => e.k !== 'fault'), counts),
    faultKinds: kills > 0 ? { 'worker-kill-9': kills, 'die-after-charge': kills } : {},
    seconds: 1,
  })

  it('passes a fenced run whose killed worker left an open section and no money violation', () => {
    expect(verdict(killScenario, killRun('fenced', 1), killRun('lock', 1))).toEqual([])
  })

  it('fails a run in which no worker was killed or died after a charge, and a fenced run with money the ledger and the shop disagree on', () => {
    const money = { oversoldUnits: 0, lostUpdates: 0, doubleChargedOrders: 0, gatewayCharges: 2, payments: 1, chargedUnpaidOrders: 1 }
    expect(verdict(killScenario, killRun('fenced', 1, money), killRun('lock', 0))).toEqual([
      'fenced: 1 orders or charges the ledger and the shop disagree on (charged and not paid, paid and not charged, another amount, of no order, or left pending with no intent)',
      'lock: no fault was injected',
      'lock: no worker was killed mid-charge',
      'lock: no worker died right after a charge was answered',
    ])
  })
})

describe('verdict of the clock-jump scenario (lock-only must change nothing)', () => {
  const clockJump = SCENARIOS.find((s) => s.name === 'clock-jump')
  if (clockJump === undefined) throw new Error('no clock-jump scenario')
  /**
   * Two holders of one resource at once, `first` then `second` (the faked worker's instances are
   * `faked-<n>`); the first holder's process stood still `stalledMs` inside its section.
   */
  const overlapping = (stalledMs: number, first = 'faked-1', second = 'w2', toldLostAt?: number): HistoryEvent[] => {
    const events: HistoryEvent[] = [
      { k: 'enter', inst: first, res: 'r', token: '1', asked: 0, ...clocks(10) },
      { k: 'fault', kind: 'clock-jump', start: 50, end: 50, ...clocks(50) },
      { k: 'enter', inst: second, res: 'r', token: '2', asked: 20, ...clocks(700) },
      { k: 'exit', inst: first, res: 'r', token: '1', ...clocks(800) },
      { k: 'exit', inst: second, res: 'r', token: '2', ...clocks(900) },
    ]
    if (stalledMs > 0) events.push({ k: 'stall', inst: first, start: 100, end: 100 + stalledMs, ...clocks(100 + stalledMs) })
    if (toldLostAt !== undefined) events.push({ k: 'lost', inst: first, res: 'r', token: '1', reason: 'expired', ...clocks(toldLostAt) })
    return events.sort((a, b) => a.mono - b.mono)
  }
  const jumpRun = (mode: 'fenced' | 'lock', events: HistoryEvent[]): RunResult => ({
    scenario: 'clock-jump',
    mode,
    check: checkHistory(events),
    faultKinds: { 'clock-jump': 3 },
    wallClockStrayMs: 86_400_000,
    seconds: 1,
  })
  const quiet: HistoryEvent[] = [
    { k: 'enter', inst: 'w1', res: 'r', token: '1', asked: 0, ...clocks(10) },
    { k: 'exit', inst: 'w1', res: 'r', token: '1', ...clocks(20) },
    { k: 'fault', kind: 'clock-jump', start: 50, end: 50, ...clocks(50) },
  ]

  it('fails an overlap of the faked worker whose first holder ran all along (the fault did it), either side; passes one whose first holder stood still for a renewal interval (a pause: the machine did it)', () => {
    expect(verdict(clockJump, jumpRun('fenced', quiet), jumpRun('lock', overlapping(0)))).toEqual([
      'lock-only: 1 overlaps where the fault must change nothing',
    ])
    expect(verdict(clockJump, jumpRun('fenced', quiet), jumpRun('lock', overlapping(0, 'w1', 'faked-1')))).toEqual([
      'lock-only: 1 overlaps where the fault must change nothing',
    ])
    expect(verdict(clockJump, jumpRun('fenced', quiet), jumpRun('lock', overlapping(400)))).toEqual([])
    expect(checkHistory(overlapping(400)).overlaps[0]?.firstLongestStallMs).toBe(400)
  })

  it("passes an overlap of the faked worker whose lock told it the lease was lost by the time the second holder entered (its monotonic view stayed true; the lock-only worker went on); fails one told late or never", () => {
    // Told before the second entered, or within the stall sampler's resolution (70 ms) after.
    expect(verdict(clockJump, jumpRun('fenced', quiet), jumpRun('lock', overlapping(0, 'faked-1', 'w2', 650)))).toEqual([])
    expect(verdict(clockJump, jumpRun('fenced', quiet), jumpRun('lock', overlapping(0, 'faked-1', 'w2', 760)))).toEqual([])
    // Told 100 ms after the second holder entered, with no stall to explain it: the lock's view was wrong.
    expect(verdict(clockJump, jumpRun('fenced', quiet), jumpRun('lock', overlapping(0, 'faked-1', 'w2', 800)))).toEqual([
      'lock-only: 1 overlaps where the fault must change nothing',
    ])
  })

  it('passes an overlap between two workers with honest clocks (a busy machine: the fault is on another worker), reported in the check', () => {
    const run = jumpRun('lock', overlapping(0, 'w1', 'w2'))
    expect(run.check.overlaps).toHaveLength(1)
    expect(verdict(clockJump, jumpRun('fenced', quiet), run)).toEqual([])
  })
})

describe('verdict of the etcd scenario', () => {
  const etcd = SCENARIOS.find((s) => s.name === 'etcd')
  if (etcd === undefined) throw new Error('no etcd scenario')
  /** A holder frozen past its lease, the leader killed meanwhile, and the next grant's token (a create_revision). */
  const history = (nextToken: string): HistoryEvent[] => [
    { k: 'enter', inst: 'w1', res: 'order:1', token: '40', asked: 0, ...clocks(10) },
    { k: 'fault', kind: 'etcd-leader-kill', start: 100, end: 1_200, ...clocks(1_200) },
    { k: 'enter', inst: 'w2', res: 'order:1', token: nextToken, asked: 500, ...clocks(2_600) },
    { k: 'lost', inst: 'w1', res: 'order:1', token: '40', reason: 'expired', ...clocks(2_700) },
    { k: 'fault', kind: 'sigstop', start: 50, end: 2_800, ...clocks(2_800) },
    { k: 'exit', inst: 'w2', res: 'order:1', token: nextToken, ...clocks(2_900) },
    { k: 'exit', inst: 'w1', res: 'order:1', token: '40', ...clocks(3_000) },
  ]
  const etcdRun = (mode: 'fenced' | 'lock', events: HistoryEvent[], faultKinds: Record<string, number> = { 'etcd-leader-kill': 1, sigstop: 1 }): RunResult => ({
    scenario: 'etcd',
    mode,
    check: checkHistory(events),
    faultKinds,
    seconds: 1,
  })

  it('is slow (npm run chaos only, not the short suite of npm test) and reports lock-only', () => {
    expect(etcd.slow).toBe(true)
    expect(etcd.lockOnly).toBe('report')
    expect(etcd.etcdMembers).toBe(3)
  })

  it('passes an overlap under a freeze past the lease when the next revision is higher, in both modes', () => {
    expect(checkHistory(history('57')).overlaps).toHaveLength(1)
    expect(verdict(etcd, etcdRun('fenced', history('57')), etcdRun('lock', history('57')))).toEqual([])
  })

  it('fails a revision that did not increase across a leader kill (lock-only too: etcd promises it), and a run without a leader kill or a freeze', () => {
    expect(verdict(etcd, etcdRun('fenced', history('57')), etcdRun('lock', history('39')))).toEqual(['lock: 1 tokens did not increase'])
    expect(verdict(etcd, etcdRun('fenced', history('57'), { sigstop: 1 }), etcdRun('lock', history('57'), { 'etcd-leader-kill': 2 }))).toEqual([
      'fenced: no etcd leader was killed',
      'lock: no holder was frozen past its lease',
    ])
  })
})
