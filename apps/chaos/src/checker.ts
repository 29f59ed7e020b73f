/**
 * Reads a merged history (see history.ts) and the database's own counts, and reports every
 * safety violation. Pure: the unit tests feed it hand-made histories.
 *
 * - overlapping critical sections: two holders (different tokens) of one resource inside their
 *   sections at once, by CLOCK_MONOTONIC; "unwarned" when the first had not been told its lock
 *   was lost (the Locker's `lost` event) by the time the second entered. A section is stamped after the grant and before the
 *   release, so a recorded section lies inside the real one: an overlap found is a real overlap.
 *   Overlaps are what the lock alone cannot prevent; they are a violation only of the lock's
 *   mutual exclusion, and with fencing they are expected and harmless.
 * - stale writes accepted: an accepted write whose token is below a token already accepted on the
 *   same row, in the row's commit order (`seq`).
 * - tokens that did not increase: a grant whose token is not larger than that of a section of the
 *   same resource entered before it was even asked for. Grants are ordered by when they were
 *   asked for and when they entered, not by entry alone: a process whose event loop is blocked
 *   enters late a section granted before the block, and that is no inversion.
 * - acquires asked while a fault had a minority or a majority of a quorum down: how each ended
 *   (granted while the nodes were still down, granted after, failed with which error, or never),
 *   and the slowest, less the time its own process did not run (`stall` events: the lock's
 *   deadlines cannot fire in a process that does not run). With a majority down no lock can be
 *   granted, and an acquire must fail with the lock's typed error within its wait, never hang
 *   (judged in scenarios.ts).
 * - oversold units and lost updates: counted from the shop's database; orders charged twice:
 *   counted from the payment gateway's ledger (`GatewayCharge`), where the money moves. The shop's
 *   payment rows cannot tell: a holder frozen inside its charge wakes up with the card charged,
 *   and the fence refuses only its payment row. Charges and payments are reported next to each
 *   other, not judged: a charge whose payment row was refused is money moved once.
 * - a worker killed mid-operation (a `fault` naming its `inst`): its open operations are not
 *   violations by themselves. A section it never left ends at its death (not at the end of the
 *   history, which would overlap every later holder), an acquire it asked and never ended is not
 *   a hang, and an operation it never finished is not counted; what it did land is judged where
 *   it landed, by the database and the gateway ledger after the reconciler's pass (the counts).
 *   Recovery per death: from the kill to the first grant of the same instance's next process.
 */
import type { AcquireFailedEvent, AskEvent, EnterEvent, ExitEvent, FaultEvent, HistoryEvent, LostEvent, StallEvent, WriteEvent } from './history.js'

/** What the stores counted after a run (`countShop` of the demo shop). */
export interface StoreCounts {
  /** From the shop's database. */
  readonly oversoldUnits: number
  readonly lostUpdates: number
  /** Orders charged more than once in the gateway's ledger. */
  readonly doubleChargedOrders: number
  /** Charges in the gateway's ledger, and payments recorded in the shop's database. */
  readonly gatewayCharges: number
  readonly payments: number
  /**
   * Money, the ledger against the orders after the reconciler's pass (see the demo shop's
   * shop-counts.ts): orders charged and not paid, paid and not charged, charged another amount,
   * and charges of no order. Absent: 0.
   */
  readonly chargedUnpaidOrders?: number
  readonly paidUnchargedOrders?: number
  readonly amountMismatchOrders?: number
  readonly unmatchedCharges?: number
  /** Orders left pending with no payment intent after the reconciler's pass (their unit held). Absent: 0. */
  readonly unsettledOrders?: number
}

/** One critical section. `exit` is the end of the history when the holder never left. */
export interface Section {
  readonly inst: string
  readonly res: string
  readonly token: string
  readonly enter: number
  readonly exit: number
  /** When the lock was asked for (`enter` when the history does not say). */
  readonly asked: number
}

/** Two sections of one resource held at once. */
export interface Overlap {
  readonly res: string
  readonly first: Section
  readonly second: Section
  /** How long both were inside, in ms. */
  readonly overlapMs: number
  /**
   * When the first holder's Locker told it the lock was lost (`lost`), or null when it never did.
   * Told after `second` entered (or never): the lock was taken while its holder still believed it
   * held it, so no holder code could have stopped in time ("unwarned").
   */
  readonly firstToldLostAt: number | null
  /**
   * Why it was lost, as the Locker said (`not-owner`: the nodes no longer held its key, e.g. a
   * node restarted without persistence; `expired`: its lease ran out before a renewal
   * succeeded), or null when it was never told.
   */
  readonly firstLostReason: string | null
  /**
   * The longest time the first holder's process did not run (its `stall` events) between its entry
   * and the second's, in ms: a holder whose process stood still that long could not renew its lease
   * — a pause, whatever the fault under test was.
   */
  readonly firstLongestStallMs: number
}

/** How the acquires asked during the fault windows of one kind (a minority or a majority of a quorum down) ended. */
export interface WindowAcquires {
  /** Fault windows of the kind. */
  readonly windows: number
  /** Acquires asked while a window was open. */
  readonly asked: number
  /** Granted before their window closed: with a majority of the quorum down, a lock bug. */
  readonly grantedDuring: { inst: string; res: string; token: string; asked: number; enter: number; windowEnd: number }[]
  /** Granted after their window closed (the wait outlasted the fault). */
  readonly grantedAfter: number
  /** Failed, by the error's class name. */
  readonly failed: Readonly<Record<string, number>>
  /** Asked and never ended by the end of the history: hung. */
  readonly unresolved: AskEvent[]
  /**
   * The acquire that took longest from its ask to its end (grant or error), less the time its
   * own process did not run then (`stalledMs`: its `stall` events), or null when none ended.
   * `ms` is the whole time, stalls included.
   */
  readonly slowest: { inst: string; res: string; asked: number; ms: number; stalledMs: number; outcome: string } | null
}

/** What the checker found. */
export interface CheckResult {
  readonly sections: number
  readonly operations: number
  readonly acceptedWrites: number
  readonly rejectedWrites: number
  readonly overlaps: Overlap[]
  /** Overlaps whose first holder had not been told its lock was lost when the second entered. */
  readonly unwarnedOverlaps: number
  readonly staleWritesAccepted: WriteEvent[]
  readonly nonIncreasingTokens: { res: string; previous: Section; next: Section }[]
  readonly oversoldUnits: number
  /** Orders charged twice (gateway ledger): more than one charge of the order at the gateway. */
  readonly doubleChargedOrders: number
  readonly lostUpdates: number
  /** Charges in the gateway's ledger, and payments recorded in the shop: shown, not judged. */
  readonly gatewayCharges: number
  readonly payments: number
  /** Money the ledger and the orders disagree on, after the reconciler's pass: the four counts of {@link StoreCounts}, summed. */
  readonly moneyViolations: number
  readonly faults: number
  /** Acquires asked while a minority of a quorum was down (availability: shown, not judged here). */
  readonly minorityDown: WindowAcquires
  /** Acquires asked while a majority of a quorum was down: none may be granted, none may hang. */
  readonly majorityDown: WindowAcquires
  /** Per fault: ms from its end to the next grant (any resource), or null when none followed. */
  readonly recoveryMs: (number | null)[]
  /**
   * Per worker death (a fault naming its `inst`): ms from the death to the first grant of that
   * instance's restarted process, or null when it was not granted a lock again before the end.
   */
  readonly restartRecoveryMs: (number | null)[]
  /** Sections a killed worker never left (ended at its death), and acquires it asked and never ended. */
  readonly diedInSection: number
  readonly diedAsking: number
  /** Stale writes + oversold + orders charged twice (gateway ledger) + lost updates + money violations + non-increasing tokens: must be 0 with fencing. */
  readonly safetyViolations: number
}

const NO_COUNTS: StoreCounts = { oversoldUnits: 0, lostUpdates: 0, doubleChargedOrders: 0, gatewayCharges: 0, payments: 0 }

/** Worker deaths (faults naming the process they killed), by instance, earliest first. */
function deathsOf(events: readonly HistoryEvent[]): Map<string, number[]> {
  const deaths = new Map<string, number[]>()
  for (const e of events) if (e.k === 'fault' && e.inst !== undefined) deaths.set(e.inst, [...(deaths.get(e.inst) ?? []), e.start])
  for (const list of deaths.values()) list.sort((a, b) => a - b)
  return deaths
}

/** When the process of `inst` that was running at `mono` died, or undefined when it lived to the end. */
function deathAfter(deaths: Map<string, number[]>, inst: string, mono: number): number | undefined {
  return deaths.get(inst)?.find((at) => at >= mono)
}

/**
 * Pairs entries with exits into sections, keyed by holder, resource and token. A section never
 * left ends at its holder's death when a fault killed it, else at the end of the history.
 */
export function sectionsOf(events: readonly HistoryEvent[]): Section[] {
  const end = events.reduce((m, e) => Math.max(m, e.mono), 0)
  const deaths = deathsOf(events)
  const open = new Map<string, EnterEvent>()
  const sections: Section[] = []
  const key = (e: EnterEvent | ExitEvent) => `${e.inst}\u0000${e.res}\u0000${e.token}`
  for (const e of [...events].sort((a, b) => a.mono - b.mono)) {
    if (e.k === 'enter') open.set(key(e), e)
    else if (e.k === 'exit') {
      const entered = open.get(key(e))
      if (entered === undefined) continue
      open.delete(key(e))
      sections.push({ inst: e.inst, res: e.res, token: e.token, enter: entered.mono, exit: e.mono, asked: entered.asked ?? entered.mono })
    }
  }
  for (const e of open.values()) sections.push({ inst: e.inst, res: e.res, token: e.token, enter: e.mono, exit: deathAfter(deaths, e.inst, e.mono) ?? end, asked: e.asked ?? e.mono })
  return sections.sort((a, b) => a.enter - b.enter)
}

function byResource<T extends { res: string }>(items: readonly T[]): Map<string, T[]> {
  const map = new Map<string, T[]>()
  for (const item of items) {
    const list = map.get(item.res)
    if (list === undefined) map.set(item.res, [item])
    else list.push(item)
  }
  return map
}

/**
 * Overlapping sections of each resource (a sweep by entry time against the latest exit seen),
 * each with when its first holder was told its lock was lost (the `lost` events of `events`).
 */
export function findOverlaps(sections: readonly Section[], events: readonly HistoryEvent[] = []): Overlap[] {
  const toldLost = new Map<string, LostEvent>()
  const key = (inst: string, res: string, token: string) => `${inst}\u0000${res}\u0000${token}`
  for (const e of events) if (e.k === 'lost' && !toldLost.has(key(e.inst, e.res, e.token))) toldLost.set(key(e.inst, e.res, e.token), e)
  const stalls = events.filter((e): e is StallEvent => e.k === 'stall')
  const longestStall = (inst: string, from: number, to: number) =>
    stalls.reduce((most, st) => (st.inst === inst ? Math.max(most, Math.min(to, st.end) - Math.max(from, st.start)) : most), 0)
  const overlaps: Overlap[] = []
  for (const [res, list] of byResource(sections)) {
    let widest: Section | undefined
    for (const s of list) {
      if (widest !== undefined && s.enter < widest.exit && s.token !== widest.token) {
        const lost = toldLost.get(key(widest.inst, res, widest.token))
        overlaps.push({ res, first: widest, second: s, overlapMs: Math.min(widest.exit, s.exit) - s.enter, firstToldLostAt: lost?.mono ?? null, firstLostReason: lost?.reason ?? null, firstLongestStallMs: longestStall(widest.inst, widest.enter, s.enter) })
      }
      if (widest === undefined || s.exit > widest.exit) widest = s
    }
  }
  return overlaps
}

/** Accepted writes whose token is below one already accepted on the row, in commit order. */
export function findStaleWrites(events: readonly HistoryEvent[]): WriteEvent[] {
  const accepted = events.filter((e): e is WriteEvent => e.k === 'write' && e.outcome === 'accepted')
  const rows = new Map<string, WriteEvent[]>()
  for (const w of accepted) rows.set(w.row, [...(rows.get(w.row) ?? []), w])
  const stale: WriteEvent[] = []
  for (const writes of rows.values()) {
    writes.sort((a, b) => (a.seq ?? a.mono) - (b.seq ?? b.mono))
    let max: bigint | undefined
    for (const w of writes) {
      const token = BigInt(w.token)
      if (max !== undefined && token < max) stale.push(w)
      else max = token
    }
  }
  return stale
}

/**
 * Grants whose token is not above that of every section of the resource entered before the
 * grant was asked for (`previous`: the one with the highest token among those).
 */
export function findNonIncreasingTokens(sections: readonly Section[]): CheckResult['nonIncreasingTokens'] {
  const found: CheckResult['nonIncreasingTokens'] = []
  for (const [res, list] of byResource(sections)) {
    const byEnter = [...list].sort((a, b) => a.enter - b.enter)
    const byAsked = [...list].sort((a, b) => a.asked - b.asked || a.enter - b.enter)
    let i = 0
    let highest: Section | undefined
    for (const next of byAsked) {
      while (i < byEnter.length && byEnter[i]!.enter < next.asked) {
        const s = byEnter[i++]!
        if (highest === undefined || BigInt(s.token) > BigInt(highest.token)) highest = s
      }
      if (highest !== undefined && highest !== next && BigInt(next.token) <= BigInt(highest.token)) found.push({ res, previous: highest, next })
    }
  }
  return found
}

/**
 * How the acquires asked during the faults that took down `down` of a quorum ended. An ask is
 * matched with its end (an `enter` or an `acquire-failed` of the same instance and resource
 * carrying its `asked`); one with neither never ended.
 */
export function acquiresDuring(events: readonly HistoryEvent[], down: 'minority' | 'majority'): WindowAcquires {
  const windows = events.filter((e): e is FaultEvent => e.k === 'fault' && e.quorumDown === down)
  const key = (inst: string, res: string, asked: number) => `${inst}\u0000${res}\u0000${asked}`
  const ends = new Map<string, EnterEvent | AcquireFailedEvent>()
  for (const e of events) {
    if (e.k === 'acquire-failed' || (e.k === 'enter' && e.asked !== undefined)) ends.set(key(e.inst, e.res, e.asked as number), e)
  }
  let asked = 0
  let grantedAfter = 0
  const grantedDuring: WindowAcquires['grantedDuring'] = []
  const failed: Record<string, number> = {}
  const unresolved: AskEvent[] = []
  let slowest: WindowAcquires['slowest'] = null
  const deaths = deathsOf(events)
  const stalls = events.filter((e): e is StallEvent => e.k === 'stall')
  const stalledMs = (inst: string, from: number, to: number) =>
    stalls.reduce((sum, s) => (s.inst === inst ? sum + Math.max(0, Math.min(to, s.end) - Math.max(from, s.start)) : sum), 0)
  for (const ask of events) {
    if (ask.k !== 'ask') continue
    const window = windows.find((w) => ask.mono >= w.start && ask.mono <= w.end)
    if (window === undefined) continue
    asked++
    const end = ends.get(key(ask.inst, ask.res, ask.mono))
    if (end === undefined) {
      // Its process was killed while it waited: it died, it did not hang.
      if (deathAfter(deaths, ask.inst, ask.mono) === undefined) unresolved.push(ask)
      continue
    }
    const outcome = end.k === 'enter' ? 'granted' : end.error
    if (end.k === 'enter') {
      if (end.mono < window.end) grantedDuring.push({ inst: end.inst, res: end.res, token: end.token, asked: ask.mono, enter: end.mono, windowEnd: window.end })
      else grantedAfter++
    } else failed[end.error] = (failed[end.error] ?? 0) + 1
    const ms = end.mono - ask.mono
    const stalled = stalledMs(ask.inst, ask.mono, end.mono)
    if (slowest === null || ms - stalled > slowest.ms - slowest.stalledMs) slowest = { inst: ask.inst, res: ask.res, asked: ask.mono, ms, stalledMs: stalled, outcome }
  }
  return { windows: windows.length, asked, grantedDuring, grantedAfter, failed, unresolved, slowest }
}

/** For each fault, ms from its end to the first grant after it (of the fault's `resources`, when it names them). */
export function recoveryTimes(events: readonly HistoryEvent[]): (number | null)[] {
  const enters = events.filter((e): e is EnterEvent => e.k === 'enter').sort((a, b) => a.mono - b.mono)
  const faults = events.filter((e): e is FaultEvent => e.k === 'fault').sort((a, b) => a.end - b.end)
  return faults.map((f) => {
    const next = enters.find((g) => g.mono >= f.end && (f.resources === undefined || f.resources.includes(g.res)))
    return next === undefined ? null : next.mono - f.end
  })
}

/** For each worker death, ms from it to the first grant of the same instance after it (its restarted process), or null. */
export function restartRecoveryTimes(events: readonly HistoryEvent[]): (number | null)[] {
  const enters = events.filter((e): e is EnterEvent => e.k === 'enter').sort((a, b) => a.mono - b.mono)
  return events
    .filter((e): e is FaultEvent & { inst: string } => e.k === 'fault' && e.inst !== undefined)
    .sort((a, b) => a.start - b.start)
    .map((death) => {
      const next = enters.find((g) => g.inst === death.inst && g.mono > death.start)
      return next === undefined ? null : next.mono - death.start
    })
}

/** Sections a killed worker never left, and acquires it asked and never ended (each ended by its death). */
function openAtDeath(events: readonly HistoryEvent[]): { sections: number; asks: number } {
  const deaths = deathsOf(events)
  if (deaths.size === 0) return { sections: 0, asks: 0 }
  const exited = new Set<string>()
  const ended = new Set<string>()
  for (const e of events) {
    if (e.k === 'exit') exited.add(`${e.inst}\u0000${e.res}\u0000${e.token}`)
    else if (e.k === 'acquire-failed' || (e.k === 'enter' && e.asked !== undefined)) ended.add(`${e.inst}\u0000${e.res}\u0000${e.asked}`)
  }
  let sections = 0
  let asks = 0
  for (const e of events) {
    if (e.k === 'enter' && !exited.has(`${e.inst}\u0000${e.res}\u0000${e.token}`) && deathAfter(deaths, e.inst, e.mono) !== undefined) sections++
    if (e.k === 'ask' && !ended.has(`${e.inst}\u0000${e.res}\u0000${e.mono}`) && deathAfter(deaths, e.inst, e.mono) !== undefined) asks++
  }
  return { sections, asks }
}

/** Checks a merged history against what the stores counted (the shop's database, the gateway's ledger). */
export function checkHistory(events: readonly HistoryEvent[], counts: StoreCounts = NO_COUNTS): CheckResult {
  const sections = sectionsOf(events)
  const staleWritesAccepted = findStaleWrites(events)
  const nonIncreasingTokens = findNonIncreasingTokens(sections)
  const overlaps = findOverlaps(sections, events)
  const writes = events.filter((e): e is WriteEvent => e.k === 'write')
  const died = openAtDeath(events)
  const moneyViolations = (counts.chargedUnpaidOrders ?? 0) + (counts.paidUnchargedOrders ?? 0) + (counts.amountMismatchOrders ?? 0) + (counts.unmatchedCharges ?? 0) + (counts.unsettledOrders ?? 0)
  return {
    sections: sections.length,
    operations: events.filter((e) => e.k === 'op').length,
    acceptedWrites: writes.filter((w) => w.outcome === 'accepted').length,
    rejectedWrites: writes.filter((w) => w.outcome === 'rejected').length,
    overlaps,
    unwarnedOverlaps: overlaps.filter((o) => o.firstToldLostAt === null || o.firstToldLostAt > o.second.enter).length,
    staleWritesAccepted,
    nonIncreasingTokens,
    oversoldUnits: counts.oversoldUnits,
    doubleChargedOrders: counts.doubleChargedOrders,
    lostUpdates: counts.lostUpdates,
    gatewayCharges: counts.gatewayCharges,
    payments: counts.payments,
    moneyViolations,
    faults: events.filter((e) => e.k === 'fault').length,
    minorityDown: acquiresDuring(events, 'minority'),
    majorityDown: acquiresDuring(events, 'majority'),
    recoveryMs: recoveryTimes(events),
    restartRecoveryMs: restartRecoveryTimes(events),
    diedInSection: died.sections,
    diedAsking: died.asks,
    safetyViolations:
      staleWritesAccepted.length + nonIncreasingTokens.length + counts.oversoldUnits + counts.doubleChargedOrders + counts.lostUpdates + moneyViolations,
  }
}
