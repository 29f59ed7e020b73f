/**
 * What a sale proved, in one status: violated, fencing held (stale writes were refused), the chaos
 * missed (nothing was tested), nothing sold yet, or no violation so far. A green "Healthy" only
 * where something was sold and either no chaos was asked for or the chaos landed and was refused.
 *
 * A violation is any broken invariant the counts show: units oversold, orders charged twice at
 * the gateway, updates lost, orders left pending with no payment (an instance died after the
 * purchase; until the reconciler cancels them), and money the gateway's ledger and the shop's orders disagree on —
 * except a live count's orders charged and not yet paid while the shop does not say which of them
 * are still in flight (a charge whose payment is being recorded is not a violation).
 */
import { countOf, formatCount } from './format'
import type { InvariantsView, RunView, WireChaos, WireMode } from './wire'

/** The counts a violation is made of (a live or final count, or a run's result). */
type BrokenCounts = Pick<
  InvariantsView,
  | 'oversold'
  | 'doubleChargedOrders'
  | 'lostUpdates'
  | 'chargedUnpaidOrders'
  | 'paidUnchargedOrders'
  | 'amountMismatchOrders'
  | 'unmatchedCharges'
  | 'unsettledOrders'
>

/**
 * True when a count's charged-not-paid orders are settled ones: counted after the sale (nothing in
 * flight), or counted now by a shop that gives its in-flight charges apart.
 */
export function chargedUnpaidSettled(view: Pick<InvariantsView, 'kind' | 'chargesInFlight'>): boolean {
  return view.kind === 'final' || view.chargesInFlight !== undefined
}

/** Broken invariants in `counts`, each count once; charged-not-paid orders only when settled. */
export function brokenInvariants(counts: BrokenCounts, chargedUnpaidCounts: boolean): number {
  return (
    counts.oversold +
    counts.doubleChargedOrders +
    counts.lostUpdates +
    counts.paidUnchargedOrders +
    counts.amountMismatchOrders +
    counts.unmatchedCharges +
    (counts.unsettledOrders ?? 0) +
    (chargedUnpaidCounts ? counts.chargedUnpaidOrders : 0)
  )
}

export type VerdictTone = 'ok' | 'bad' | 'warn' | 'neutral'

export interface Verdict {
  readonly tone: VerdictTone
  /** Short, with its sign: `✗ Violated (3)`. */
  readonly text: string
  /** For a screen reader: `violated (3)`, `healthy`, `chaos missed`. */
  readonly label: string
  /** One sentence for a screen reader and the tooltip. */
  readonly detail: string
}

interface SaleFacts {
  readonly mode: WireMode
  readonly chaos: WireChaos | undefined
  /** Counted after the sale (true) or while it runs (false). */
  readonly final: boolean
  readonly sold: number
  readonly violations: number
  readonly chaosEvents: number | undefined
  readonly staleWritesRejected: number | null | undefined
}

/** The verdict of a sale (or of the live shop, which has no chaos of its own here). */
export function verdictOf(f: SaleFacts): Verdict {
  if (f.violations > 0) {
    return {
      tone: 'bad',
      text: `✗ Violated (${formatCount(f.violations)})`,
      label: `violated (${f.violations})`,
      detail: `${formatCount(f.violations)} broken invariants: oversold units, orders charged twice at the gateway, lost updates, money the gateway's ledger and the orders disagree on`,
    }
  }
  if (f.sold === 0)
    return {
      tone: 'neutral',
      text: '… Nothing sold yet',
      label: 'nothing sold yet',
      detail: 'no unit sold yet: nothing to judge',
    }
  if (!f.final)
    return {
      tone: 'neutral',
      text: 'No violation so far',
      label: 'no violation so far',
      detail: 'the sale is still running; the verdict comes once it is counted',
    }
  if (f.chaos === undefined || f.chaos === 'none')
    return {
      tone: 'ok',
      text: '✓ Healthy',
      label: 'healthy',
      detail: 'every unit sold once, every order charged at most once, no update lost',
    }
  if ((f.chaosEvents ?? 0) === 0)
    return {
      tone: 'warn',
      text: 'The chaos missed — nothing was tested',
      label: 'chaos missed',
      detail: 'no pause, restart or kill happened during the sale',
    }
  if (f.mode === 'fenced') {
    const rejected = f.staleWritesRejected ?? 0
    return rejected > 0
      ? {
          tone: 'ok',
          text: `✓ Fencing held (${formatCount(rejected)} stale refused)`,
          label: 'fencing held',
          detail: `${formatCount(rejected)} writes from a holder whose lease had gone were refused; nothing broke`,
        }
      : {
          tone: 'warn',
          text: 'The chaos missed — nothing was tested',
          label: 'chaos missed',
          detail: 'no holder wrote after its lease had gone, so fencing had nothing to refuse',
        }
  }
  return {
    tone: 'warn',
    text: 'No violation this time',
    label: 'no violation this time',
    detail: 'the chaos did not hit a holder in the middle of a write; without fencing nothing stops it when it does',
  }
}

/** The verdict of a run of the runs table. */
export function runVerdict(run: RunView): Verdict {
  const r = run.result
  if (run.status === 'failed' || run.status === 'aborted')
    return { tone: 'neutral', text: run.status, label: run.status, detail: run.error ?? run.status }
  if (r === null) return { tone: 'neutral', text: 'running', label: 'running', detail: 'the sale is still running' }
  return verdictOf({
    mode: run.mode,
    chaos: run.chaos,
    final: true,
    sold: r.sold,
    violations: brokenInvariants(r, true),
    chaosEvents: run.chaosEvents,
    staleWritesRejected: r.staleWritesRejected,
  })
}

/** The verdict of an invariants card. */
export function cardVerdict(view: InvariantsView): Verdict {
  return verdictOf({
    mode: view.mode,
    chaos: view.chaos,
    final: view.kind === 'final' || view.source === 'live',
    sold: view.sold,
    violations: brokenInvariants(view, chargedUnpaidSettled(view)),
    chaosEvents: view.chaosEvents,
    staleWritesRejected: view.staleWritesRejected,
  })
}

/** What of the chaos landed in a run: `3 pauses · 5 leases expired · 6 stale refused`. */
export function chaosLanded(run: RunView): string {
  if (run.chaos === 'none') return 'no chaos'
  const n = run.chaosEvents
  const what = run.chaos === 'pause' ? countOf(n, 'pause') : run.chaos === 'kill' ? countOf(n, 'kill') : countOf(n, 'Redis restart')
  const parts = [what]
  const r = run.result
  if (r !== null) {
    parts.push(`${countOf(r.expiredLocks, 'lease')} expired`)
    if (run.mode === 'fenced') parts.push(`${formatCount(r.staleWritesRejected)} stale refused`)
  }
  return parts.join(' · ')
}
