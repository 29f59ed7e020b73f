/** How the dashboard writes numbers, durations, modes and chaos. */
import type { WireChaos, WireMode } from './wire'

/** Mode names as people say them. */
export const MODE_LABELS: Readonly<Record<WireMode, string>> = Object.freeze({
  unsafe: 'No lock',
  lock: 'Lock only',
  fenced: 'Lock + fencing',
})

/** Chaos names as people say them. */
export const CHAOS_LABELS: Readonly<Record<WireChaos, string>> = Object.freeze({
  none: 'None',
  pause: 'Pause a lock holder',
  'redis-restart': 'Restart Redis',
  kill: 'Kill an instance (SIGKILL)',
})

/** Short chaos names, for tables. */
export const CHAOS_SHORT: Readonly<Record<WireChaos, string>> = Object.freeze({
  none: 'none',
  pause: 'pause',
  'redis-restart': 'Redis restart',
  kill: 'kill',
})

/**
 * Names of the money figures, where the invariants card and the runs table show them: a double
 * charge is counted in the gateway's ledger, where the money moves; the shop's payment rows are
 * what the shop recorded of it.
 */
export const FIGURE_LABELS = Object.freeze({
  chargedTwice: 'Charged twice (gateway)',
  gatewayCharges: 'Charges (gateway ledger)',
  payments: 'Payments (shop)',
  paidOrders: 'Paid orders (shop)',
})

const dash = '–'

/** Cents as dollars: `$1,249.75`. */
export function formatMoney(cents: number | null): string {
  if (cents === null || !Number.isFinite(cents)) return dash
  return (cents / 100).toLocaleString('en-US', { style: 'currency', currency: 'USD' })
}

/** `12.3 /s`. */
export function formatRate(perSecond: number | null): string {
  if (perSecond === null || !Number.isFinite(perSecond)) return dash
  return `${perSecond >= 100 ? perSecond.toFixed(0) : perSecond.toFixed(1)} /s`
}

/** A ratio 0..1 as `98.7 %`. */
export function formatPercent(ratio: number | null): string {
  if (ratio === null || !Number.isFinite(ratio)) return dash
  const pct = ratio * 100
  return `${pct === 0 || pct === 100 ? pct.toFixed(0) : pct.toFixed(1)} %`
}

/** A duration: `850 ms`, `2.5 s`, `1 min 5 s`. */
export function formatMs(ms: number | null): string {
  if (ms === null || !Number.isFinite(ms)) return dash
  if (ms < 1) return `${ms.toFixed(2)} ms`
  if (ms < 10) return `${ms.toFixed(1)} ms`
  if (ms < 1_000) return `${Math.round(ms)} ms`
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)} s`
  const s = Math.round(ms / 1000)
  return `${Math.floor(s / 60)} min ${s % 60} s`
}

/** An integer count, grouped: `1 234`. */
export function formatCount(n: number | null): string {
  if (n === null || !Number.isFinite(n)) return dash
  return Math.round(n).toLocaleString('en-US').replaceAll(',', '\u202f')
}

/** A count and its noun, the noun agreeing with it: `1 pause`, `3 pauses`, `0 leases`. */
export function countOf(n: number, one: string, many = `${one}s`): string {
  return `${formatCount(n)} ${n === 1 ? one : many}`
}

/**
 * Orders fencing tokens (decimal strings) as the bigints they are. Never through Number: a token
 * above 2^53 would lose its last digits and compare equal to its neighbours.
 */
export function compareTokens(a: string, b: string): number {
  const x = /^\d+$/.test(a) ? BigInt(a) : undefined
  const y = /^\d+$/.test(b) ? BigInt(b) : undefined
  if (x === undefined || y === undefined) return a.localeCompare(b)
  return x < y ? -1 : x > y ? 1 : 0
}
