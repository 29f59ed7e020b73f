/**
 * Reads a merged history (see history.ts) and the database's own counts, and reports every
 * safety violation. Pure: the unit tests feed it hand-made histories.
 *
 * - overlapping critical sections: two holders (different tokens) of one resource inside their
 *   sections at once, by CLOCK_MONOTONIC. A section is stamped after the grant and before the
 *   release, so a recorded section lies inside the real one: an overlap found is a real overlap.
 *   Overlaps are what the lock alone cannot prevent; they are a violation only of the lock's
 *   mutual exclusion, and with fencing they are expected and harmless.
 * - stale writes accepted: an accepted write whose token is below a token already accepted on the
 *   same row, in the row's commit order (`seq`).
 * - tokens that did not increase: a grant whose token is not larger than that of a section of the
 *   same resource entered before it was even asked for. Grants are ordered by when they were
 *   asked for and when they entered, not by entry alone: a process whose event loop is blocked
 *   enters late a section granted before the block, and that is no inversion.
 * - oversold units and lost updates: counted from the shop's database; orders charged twice:
 *   counted from the payment gateway's ledger (`GatewayCharge`), where the money moves. The shop's
 *   payment rows cannot tell: a holder frozen inside its charge wakes up with the card charged,
 *   and the fence refuses only its payment row. Charges and payments are reported next to each
 *   other, not judged: a charge whose payment row was refused is money moved once.
 */
import type { EnterEvent, ExitEvent, FaultEvent, HistoryEvent, WriteEvent } from './history.js'

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
}

/** What the checker found. */
export interface CheckResult {
  readonly sections: number
  readonly operations: number
  readonly acceptedWrites: number
  readonly rejectedWrites: number
  readonly overlaps: Overlap[]
  readonly staleWritesAccepted: WriteEvent[]
  readonly nonIncreasingTokens: { res: string; previous: Section; next: Section }[]
  readonly oversoldUnits: number
  /** Orders charged twice (gateway ledger): more than one charge of the order at the gateway. */
  readonly doubleChargedOrders: number
  readonly lostUpdates: number
  /** Charges in the gateway's ledger, and payments recorded in the shop: shown, not judged. */
  readonly gatewayCharges: number
  readonly payments: number
  readonly faults: number
  /** Per fault: ms from its end to the next grant (any resource), or null when none followed. */
  readonly recoveryMs: (number | null)[]
  /** Stale writes + oversold + orders charged twice (gateway ledger) + lost updates + non-increasing tokens: must be 0 with fencing. */
  readonly safetyViolations: number
}

const NO_COUNTS: StoreCounts = { oversoldUnits: 0, lostUpdates: 0, doubleChargedOrders: 0, gatewayCharges: 0, payments: 0 }

/** Pairs entries with exits into sections, keyed by holder, resource and token. */
export function sectionsOf(events: readonly HistoryEvent[]): Section[] {
  const end = events.reduce((m, e) => Math.max(m, e.mono), 0)
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
  for (const e of open.values()) sections.push({ inst: e.inst, res: e.res, token: e.token, enter: e.mono, exit: end, asked: e.asked ?? e.mono })
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

/** Overlapping sections of each resource (a sweep by entry time against the latest exit seen). */
export function findOverlaps(sections: readonly Section[]): Overlap[] {
  const overlaps: Overlap[] = []
  for (const [res, list] of byResource(sections)) {
    let widest: Section | undefined
    for (const s of list) {
      if (widest !== undefined && s.enter < widest.exit && s.token !== widest.token) {
        overlaps.push({ res, first: widest, second: s, overlapMs: Math.min(widest.exit, s.exit) - s.enter })
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

/** For each fault, ms from its end to the first grant after it. */
export function recoveryTimes(events: readonly HistoryEvent[]): (number | null)[] {
  const grants = events.filter((e) => e.k === 'enter').map((e) => e.mono).sort((a, b) => a - b)
  const faults = events.filter((e): e is FaultEvent => e.k === 'fault').sort((a, b) => a.end - b.end)
  return faults.map((f) => {
    const next = grants.find((g) => g >= f.end)
    return next === undefined ? null : next - f.end
  })
}

/** Checks a merged history against what the stores counted (the shop's database, the gateway's ledger). */
export function checkHistory(events: readonly HistoryEvent[], counts: StoreCounts = NO_COUNTS): CheckResult {
  const sections = sectionsOf(events)
  const staleWritesAccepted = findStaleWrites(events)
  const nonIncreasingTokens = findNonIncreasingTokens(sections)
  const writes = events.filter((e): e is WriteEvent => e.k === 'write')
  return {
    sections: sections.length,
    operations: events.filter((e) => e.k === 'op').length,
    acceptedWrites: writes.filter((w) => w.outcome === 'accepted').length,
    rejectedWrites: writes.filter((w) => w.outcome === 'rejected').length,
    overlaps: findOverlaps(sections),
    staleWritesAccepted,
    nonIncreasingTokens,
    oversoldUnits: counts.oversoldUnits,
    doubleChargedOrders: counts.doubleChargedOrders,
    lostUpdates: counts.lostUpdates,
    gatewayCharges: counts.gatewayCharges,
    payments: counts.payments,
    faults: events.filter((e) => e.k === 'fault').length,
    recoveryMs: recoveryTimes(events),
    safetyViolations:
      staleWritesAccepted.length + nonIncreasingTokens.length + counts.oversoldUnits + counts.doubleChargedOrders + counts.lostUpdates,
  }
}
