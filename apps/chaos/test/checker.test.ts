import { describe, expect, it } from 'vitest'
import { checkHistory } from '../src/checker.js'
import type { HistoryEvent } from '../src/history.js'

// Hand-made histories: only `mono` matters to the checker; the other clocks are filler (a
// faked wall clock must change nothing, so some events carry absurd wall times on purpose).
const clocks = (mono: number, wall = 1_700_000_000_000 + mono) => ({ mono, perf: mono, origin: 0, wall })
const enter = (inst: string, res: string, token: number, mono: number, wall?: number): HistoryEvent => ({ k: 'enter', inst, res, token: String(token), ...clocks(mono, wall) })
const exit = (inst: string, res: string, token: number, mono: number, wall?: number): HistoryEvent => ({ k: 'exit', inst, res, token: String(token), ...clocks(mono, wall) })
const write = (inst: string, row: string, token: number, seq: number, mono: number, outcome: 'accepted' | 'rejected' = 'accepted'): HistoryEvent => ({
  k: 'write', inst, res: 'product:a', row, token: String(token), outcome, seq, ...clocks(mono),
})
const op = (inst: string, mono: number): HistoryEvent => ({ k: 'op', inst, op: 'purchase', result: 'ordered', ...clocks(mono) })
const fault = (start: number, end: number): HistoryEvent => ({ k: 'fault', kind: 'sigstop', start, end, ...clocks(end) })

/** Two holders one after the other, each writing once: a correct run. */
const clean: HistoryEvent[] = [
  enter('w1', 'product:a', 10, 0),
  write('w1', 'Product:a', 10, 1, 5),
  exit('w1', 'product:a', 10, 10),
  op('w1', 11),
  enter('w2', 'product:a', 11, 12),
  write('w2', 'Product:a', 11, 2, 15),
  exit('w2', 'product:a', 11, 20),
  op('w2', 21),
]

describe('checkHistory', () => {
  it('passes a clean history', () => {
    const r = checkHistory(clean, { oversoldUnits: 0, lostUpdates: 0, doubleChargedOrders: 0, gatewayCharges: 1, payments: 1 })
    expect(r.overlaps).toEqual([])
    expect(r.staleWritesAccepted).toEqual([])
    expect(r.nonIncreasingTokens).toEqual([])
    expect(r.safetyViolations).toBe(0)
    expect(r).toMatchObject({ sections: 2, operations: 2, acceptedWrites: 2, rejectedWrites: 0 })
  })

  it('finds overlapping sections of one resource, not of different resources', () => {
    const r = checkHistory([
      enter('w1', 'product:a', 10, 0), enter('w2', 'product:a', 11, 5), exit('w2', 'product:a', 11, 8), exit('w1', 'product:a', 10, 30),
      enter('w3', 'product:b', 3, 1), exit('w3', 'product:b', 3, 40),
    ])
    expect(r.overlaps).toHaveLength(1)
    expect(r.overlaps[0]).toMatchObject({ res: 'product:a', first: { inst: 'w1', token: '10' }, second: { inst: 'w2', token: '11' }, overlapMs: 3 })
    // An overlap alone is no safety violation: with fencing it is expected.
    expect(r.safetyViolations).toBe(0)
  })

  it('orders by the monotonic clock, not by a jumped wall clock', () => {
    // w2's wall clock jumped an hour back: by wall time its section would sit inside w1's.
    const r = checkHistory([
      enter('w1', 'product:a', 10, 0), exit('w1', 'product:a', 10, 10),
      enter('w2', 'product:a', 11, 12, 1_700_000_000_000 - 3_600_000), exit('w2', 'product:a', 11, 20, 1_700_000_000_000 - 3_600_000),
    ])
    expect(r.overlaps).toEqual([])
  })

  it('treats a section never left as open until the end of the history', () => {
    const r = checkHistory([enter('w1', 'product:a', 10, 0), enter('w2', 'product:a', 11, 50), exit('w2', 'product:a', 11, 60)])
    expect(r.overlaps).toHaveLength(1)
  })

  it('finds an accepted write whose token is below one already accepted on the row', () => {
    const r = checkHistory([...clean, write('w1', 'Product:a', 10, 3, 25)])
    expect(r.staleWritesAccepted).toHaveLength(1)
    expect(r.staleWritesAccepted[0]).toMatchObject({ inst: 'w1', token: '10', seq: 3 })
    expect(r.safetyViolations).toBe(1)
  })

  it('uses the commit order (seq), and ignores rejected writes and other rows', () => {
    const r = checkHistory([
      // Stamped late (a pause after commit) but committed first: not stale.
      write('w1', 'Product:a', 10, 1, 100), write('w2', 'Product:a', 11, 2, 50),
      write('w1', 'Product:a', 10, 3, 120, 'rejected'),
      write('w3', 'Order:1', 5, 4, 130),
    ])
    expect(r.staleWritesAccepted).toEqual([])
    expect(r).toMatchObject({ acceptedWrites: 3, rejectedWrites: 1 })
  })

  it('accepts equal tokens on a row (one holder writing twice)', () => {
    const r = checkHistory([write('w1', 'Product:a', 10, 1, 1), write('w1', 'Product:a', 10, 2, 2)])
    expect(r.staleWritesAccepted).toEqual([])
  })

  it('finds tokens that did not increase between successive grants', () => {
    const r = checkHistory([
      enter('w1', 'product:a', 10, 0), exit('w1', 'product:a', 10, 5),
      enter('w2', 'product:a', 10, 6), exit('w2', 'product:a', 10, 9),
      enter('w3', 'product:a', 7, 10), exit('w3', 'product:a', 7, 12),
    ])
    expect(r.nonIncreasingTokens.map((n) => n.next.inst)).toEqual(['w2', 'w3'])
    expect(r.safetyViolations).toBe(2)
  })

  it('does not count a section entered late by a blocked process, when its grant was asked for first', () => {
    // w1 asked at 0 and was granted 7 just before its event loop blocked; its lease ran out, w2
    // asked at 1, got 8 and entered at 2; w1 entered only at 9. Entry order says 8 then 7, but
    // w1's grant may well have come first. w3 asked at 12, after both entered: it must beat 8.
    const r = checkHistory([
      { k: 'enter', inst: 'w2', res: 'r', token: '8', asked: 1, ...clocks(2) },
      { k: 'exit', inst: 'w2', res: 'r', token: '8', ...clocks(3) },
      { k: 'enter', inst: 'w1', res: 'r', token: '7', asked: 0, ...clocks(9) },
      { k: 'exit', inst: 'w1', res: 'r', token: '7', ...clocks(10) },
      { k: 'enter', inst: 'w3', res: 'r', token: '8', asked: 12, ...clocks(13) },
      { k: 'exit', inst: 'w3', res: 'r', token: '8', ...clocks(14) },
    ])
    expect(r.nonIncreasingTokens.map((n) => [n.previous.inst, n.next.inst])).toEqual([['w2', 'w3']])
  })

  it('compares tokens as bigints, beyond 2^53', () => {
    // 2^53 + 1 and 2^53 + 2 are the same JS number: compared as numbers they would not increase.
    const grant = (token: string, mono: number): HistoryEvent[] => [
      { k: 'enter', inst: 'w', res: 'r', token, ...clocks(mono) },
      { k: 'exit', inst: 'w', res: 'r', token, ...clocks(mono + 1) },
    ]
    expect(checkHistory([...grant('9007199254740993', 0), ...grant('9007199254740994', 2)]).nonIncreasingTokens).toEqual([])
    expect(checkHistory([...grant('9007199254740994', 0), ...grant('9007199254740993', 2)]).nonIncreasingTokens).toHaveLength(1)
  })

  it('finds a token that went back when the granting majority changed (quorum mode)', () => {
    // Node A's counter ran ahead: grant 1 won on {A, B} took A's 1_000_500. Had it not been
    // written back to a majority, grant 2, won on {B, C} after grant 1 was released, would mint
    // B's or C's smaller counter. The checker knows nothing of nodes: the order of grants is enough.
    const r = checkHistory([
      { k: 'ask', inst: 'w1', res: 'product:a', ...clocks(0) },
      { k: 'enter', inst: 'w1', res: 'product:a', token: '1000500', asked: 0, ...clocks(1) },
      { k: 'exit', inst: 'w1', res: 'product:a', token: '1000500', ...clocks(5) },
      { k: 'ask', inst: 'w2', res: 'product:a', ...clocks(6) },
      { k: 'enter', inst: 'w2', res: 'product:a', token: '1000200', asked: 6, ...clocks(7) },
      { k: 'exit', inst: 'w2', res: 'product:a', token: '1000200', ...clocks(9) },
      // Another resource's smaller tokens are no inversion: tokens are ordered per resource.
      enter('w3', 'product:b', 5, 8), exit('w3', 'product:b', 5, 10),
    ])
    expect(r.nonIncreasingTokens).toHaveLength(1)
    expect(r.nonIncreasingTokens[0]).toMatchObject({ res: 'product:a', previous: { inst: 'w1', token: '1000500' }, next: { inst: 'w2', token: '1000200' } })
    expect(r.safetyViolations).toBe(1)
  })

  it('finds a token that went back even while the two sections overlap (a lock taken from a live holder)', () => {
    // A node restarted without persistence forgot w1's key; w2 won a majority while w1 was still
    // inside, and its token is below w1's: an overlap and an inversion, both counted.
    const r = checkHistory([
      { k: 'enter', inst: 'w1', res: 'r', token: '900', asked: 0, ...clocks(1) },
      { k: 'enter', inst: 'w2', res: 'r', token: '899', asked: 3, ...clocks(4) },
      { k: 'exit', inst: 'w2', res: 'r', token: '899', ...clocks(6) },
      { k: 'exit', inst: 'w1', res: 'r', token: '900', ...clocks(8) },
    ])
    expect(r.overlaps).toHaveLength(1)
    expect(r.nonIncreasingTokens.map((n) => [n.previous.token, n.next.token])).toEqual([['900', '899']])
  })

  it('tells overlaps whose first holder was told its lock was lost before the second entered from the unwarned ones', () => {
    const lost = (inst: string, token: number, mono: number): HistoryEvent => ({ k: 'lost', inst, res: 'r', token: String(token), reason: 'expired', ...clocks(mono) })
    const r = checkHistory([
      // Warned: w1 told at 4, w2 entered at 5.
      enter('w1', 'r', 1, 0), lost('w1', 1, 4), enter('w2', 'r', 2, 5), exit('w2', 'r', 2, 6), exit('w1', 'r', 1, 7),
      // Told only after w4 entered (a frozen process, or a lock taken from under its holder).
      enter('w3', 'r', 3, 10), enter('w4', 'r', 4, 12), lost('w3', 3, 13), exit('w4', 'r', 4, 14), exit('w3', 'r', 3, 15),
      // Never told.
      enter('w5', 'r', 5, 20), enter('w6', 'r', 6, 21), exit('w6', 'r', 6, 22), exit('w5', 'r', 5, 23),
    ])
    expect(r.overlaps.map((o) => [o.first.inst, o.firstToldLostAt, o.firstLostReason])).toEqual([['w1', 4, 'expired'], ['w3', 13, 'expired'], ['w5', null, null]])
    expect(r.unwarnedOverlaps).toBe(2)
  })

  it('counts oversold units and lost updates from the database, orders charged twice from the gateway ledger', () => {
    const r = checkHistory(clean, { oversoldUnits: 2, lostUpdates: 3, doubleChargedOrders: 1, gatewayCharges: 5, payments: 4 })
    expect(r).toMatchObject({ oversoldUnits: 2, doubleChargedOrders: 1, lostUpdates: 3, safetyViolations: 6 })
  })

  it('shows charges and payments without judging them: a charge whose payment row was refused is money moved once', () => {
    const r = checkHistory(clean, { oversoldUnits: 0, lostUpdates: 0, doubleChargedOrders: 0, gatewayCharges: 3, payments: 2 })
    expect(r).toMatchObject({ gatewayCharges: 3, payments: 2, safetyViolations: 0 })
  })

  it('measures recovery from the end of each fault to the next grant', () => {
    const r = checkHistory([...clean, fault(1, 3), fault(11, 11.5), fault(25, 30)])
    expect(r.faults).toBe(3)
    expect(r.recoveryMs).toEqual([9, 0.5, null])
  })
})

describe('acquires asked while a quorum was down', () => {
  const ask = (inst: string, mono: number): HistoryEvent => ({ k: 'ask', inst, res: 'r', ...clocks(mono) })
  const failed = (inst: string, asked: number, mono: number, error = 'LockUnavailableError'): HistoryEvent => ({ k: 'acquire-failed', inst, res: 'r', asked, error, ...clocks(mono) })
  const granted = (inst: string, asked: number, mono: number, token: number): HistoryEvent => ({ k: 'enter', inst, res: 'r', token: String(token), asked, ...clocks(mono) })
  const down = (kind: string, quorumDown: 'minority' | 'majority', start: number, end: number): HistoryEvent => ({ k: 'fault', kind, start, end, quorumDown, ...clocks(end) })
  const stall = (inst: string, start: number, end: number): HistoryEvent => ({ k: 'stall', inst, start, end, ...clocks(end) })

  it('sorts each ask made while a majority was down by how it ended', () => {
    const r = checkHistory([
      down('majority-kill', 'majority', 100, 3_100),
      ask('w1', 110), failed('w1', 110, 2_110),
      // Granted while two of three nodes were down: impossible for a correct lock.
      ask('w2', 120), granted('w2', 120, 150, 7),
      // A wait that outlasted the outage.
      ask('w3', 130), granted('w3', 130, 3_200, 8),
      // Never ended: a hang.
      ask('w4', 140),
      ask('w5', 150), failed('w5', 150, 200, 'TypeError'),
      // Asked before and after the window: not counted.
      ask('w6', 90), failed('w6', 90, 2_090),
      ask('w7', 3_150), granted('w7', 3_150, 3_160, 9),
    ])
    const m = r.majorityDown
    expect(m).toMatchObject({ windows: 1, asked: 5, grantedAfter: 1, failed: { LockUnavailableError: 1, TypeError: 1 } })
    expect(m.grantedDuring).toEqual([{ inst: 'w2', res: 'r', token: '7', asked: 120, enter: 150, windowEnd: 3_100 }])
    expect(m.unresolved.map((a) => a.inst)).toEqual(['w4'])
    expect(m.slowest).toMatchObject({ inst: 'w3', ms: 3_070, stalledMs: 0, outcome: 'granted' })
    expect(r.minorityDown).toMatchObject({ windows: 0, asked: 0 })
  })

  it("judges the slowest less the time its own process did not run, and keeps minority windows apart", () => {
    const r = checkHistory([
      down('majority-sigstop', 'majority', 0, 3_000),
      // 2 500 ms, of which 600 ms its process did not run: 1 900 ms of the lock's.
      ask('w1', 10), stall('w1', 500, 1_100), stall('w2', 0, 2_000), failed('w1', 10, 2_510),
      // 2 130 ms, all of it running: the slowest.
      ask('w2', 2_100), failed('w2', 2_100, 4_230),
      down('node-kill', 'minority', 5_000, 6_000),
      ask('w1', 5_500), granted('w1', 5_500, 5_520, 3),
      // A fault of a single Redis (no quorumDown) is neither.
      { k: 'fault', kind: 'redis-kill-9', start: 7_000, end: 7_100, ...clocks(7_100) },
      ask('w1', 7_050), failed('w1', 7_050, 9_050),
    ])
    expect(r.majorityDown.slowest).toMatchObject({ inst: 'w2', ms: 2_130, stalledMs: 0 })
    expect(r.majorityDown.asked).toBe(2)
    expect(r.minorityDown).toMatchObject({ windows: 1, asked: 1, grantedDuring: [{ inst: 'w1', token: '3' }] })
  })
})

describe('recovery after a failover of one shard', () => {
  it('counts from the fault to the next grant of a resource it names; grants of other resources (other shards) do not count', () => {
    const events: HistoryEvent[] = [
      { k: 'fault', kind: 'cluster-primary-kill-9', start: 100, end: 100, resources: ['product:flash-2'], ...clocks(100) },
      { k: 'enter', inst: 'w1', res: 'product:flash-1', token: '5', ...clocks(150) },
      { k: 'enter', inst: 'w2', res: 'product:flash-2', token: '9', ...clocks(2_100) },
      { k: 'fault', kind: 'redis-kill-9', start: 3_000, end: 3_050, ...clocks(3_050) },
      { k: 'enter', inst: 'w1', res: 'order:1', token: '11', ...clocks(3_100) },
    ]
    expect(checkHistory(events).recoveryMs).toEqual([2_000, 50])
  })
})

describe('a worker killed mid-operation (worker-kill-9)', () => {
  const killed = (inst: string, at: number, kind = 'worker-kill-9'): HistoryEvent => ({ k: 'fault', kind, inst, start: at, end: at, ...clocks(at) })
  const ask = (inst: string, res: string, mono: number): HistoryEvent => ({ k: 'ask', inst, res, ...clocks(mono) })
  const enterAsked = (inst: string, res: string, token: number, asked: number, mono: number): HistoryEvent => ({ k: 'enter', inst, res, token: String(token), asked, ...clocks(mono) })
  const majorityDown = (start: number, end: number): HistoryEvent => ({ k: 'fault', kind: 'majority-sigstop', quorumDown: 'majority', start, end, ...clocks(end) })
  // w1 enters order:7 and is killed inside its section (its charge in flight); w2 waits out the
  // lease and enters after the death; w3 asked for order:8 and was killed waiting (in a majority
  // outage); w1's restarted process is granted order:9 later.
  const life: HistoryEvent[] = [
    enterAsked('w1', 'order:7', 10, 0, 1),
    ask('w3', 'order:8', 150),
    enterAsked('w2', 'order:7', 11, 100, 700),
    write('w2', 'Order:7', 11, 1, 710),
    exit('w2', 'order:7', 11, 720),
    enterAsked('w2', 'order:7', 12, 800, 801),
    exit('w2', 'order:7', 12, 900),
    enterAsked('w1', 'order:9', 13, 1_350, 1_400),
    exit('w1', 'order:9', 13, 1_450),
    op('w2', 2_000),
  ]
  const deaths = [killed('w1', 200), killed('w3', 300)]
  const sorted = (events: HistoryEvent[]) => [...events].sort((a, b) => a.mono - b.mono)

  it('control: without the deaths in the history, the open section overlaps every later holder and the open ask is a hang', () => {
    const r = checkHistory(sorted([...life, majorityDown(100, 400)]))
    expect(r.overlaps.map((o) => [o.first.token, o.second.token])).toEqual([
      ['10', '11'],
      ['10', '12'],
    ])
    expect(r.majorityDown.unresolved).toHaveLength(1)
  })

  it('ends a dead worker’s open section at its death and does not count its open acquire as a hang or a violation', () => {
    const r = checkHistory(sorted([...life, ...deaths, majorityDown(100, 400)]))
    expect(r.overlaps).toEqual([])
    expect(r.sections).toBe(4)
    expect(r.majorityDown.unresolved).toEqual([])
    expect(r.majorityDown.asked).toBe(1)
    expect(r).toMatchObject({ diedInSection: 1, diedAsking: 1, safetyViolations: 0, faults: 3 })
  })

  it('still finds an overlap that happened before the death (the death shortens a section, never hides one)', () => {
    const r = checkHistory(sorted([enterAsked('w1', 'order:7', 10, 0, 1), enterAsked('w2', 'order:7', 11, 40, 50), exit('w2', 'order:7', 11, 60), killed('w1', 80)]))
    expect(r.overlaps).toHaveLength(1)
    expect(r.overlaps[0]).toMatchObject({ overlapMs: 10 })
  })

  it('leaves the restarted process’s sections alone: an earlier death of the same instance does not end them', () => {
    const r = checkHistory(sorted([killed('w1', 200), enterAsked('w1', 'order:9', 13, 300, 301), enterAsked('w2', 'order:9', 14, 900, 1_000), exit('w2', 'order:9', 14, 1_100)]))
    expect(r.overlaps).toHaveLength(1)
    expect(r.diedInSection).toBe(0)
  })

  it('recovery: from each death to the first grant of that instance’s restarted process (others’ grants do not count), null when none came', () => {
    const r = checkHistory(sorted([...life, ...deaths, killed('w1', 1_500, 'die-after-charge')]))
    expect(r.restartRecoveryMs).toEqual([1_200, null, null])
  })

  it('judges what landed: a charge the dead worker left unrecorded is a money violation after the reconcile pass, the death excuses nothing', () => {
    const counts = { oversoldUnits: 0, lostUpdates: 0, doubleChargedOrders: 0, gatewayCharges: 3, payments: 2, chargedUnpaidOrders: 1 }
    const r = checkHistory(sorted([...life, ...deaths]), counts)
    expect(r).toMatchObject({ moneyViolations: 1, safetyViolations: 1 })
  })

  it('an order the dead worker left pending with no intent, still unsettled after the pass, is a violation too', () => {
    const counts = { oversoldUnits: 0, lostUpdates: 0, doubleChargedOrders: 0, gatewayCharges: 2, payments: 2, unsettledOrders: 1 }
    expect(checkHistory(sorted([...life, ...deaths]), counts)).toMatchObject({ moneyViolations: 1, safetyViolations: 1 })
    expect(checkHistory(sorted([...life, ...deaths]), { ...counts, unsettledOrders: 0 })).toMatchObject({ moneyViolations: 0 })
  })
})
