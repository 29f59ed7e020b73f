import { useState, type FormEvent } from 'react'
import { chaosToSend, offeredChaos, REDIS_RESTART_UNAVAILABLE } from '../chaos-choices'
import { CHAOS_LABELS, CHAOS_SHORT, countOf, formatCount, formatMoney, MODE_LABELS } from '../format'
import { brokenInvariants, runVerdict } from '../verdict'
import type { ApiError, ComparisonRequest, RunLimits, RunView, WireChaos, WireMode } from '../wire'

/** Posts a comparison; resolves with the server's error message, or null when it started. */
export type StartComparison = (request: ComparisonRequest) => Promise<string | null>

export const postComparison: StartComparison = async (request) => {
  try {
    const res = await fetch('/api/comparisons', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(request),
    })
    if (res.ok) return null
    const body = (await res.json().catch(() => null)) as ApiError | null
    return body?.message ?? `the shop answered ${res.status}`
  } catch {
    return 'the shop did not answer; is the demo still running?'
  }
}

const MODE_ORDER: readonly WireMode[] = ['unsafe', 'lock', 'fenced']
/** The chaos the comparison form offers, in this order. */
const COMPARISON_CHAOS: readonly WireChaos[] = ['pause', 'redis-restart', 'none']
export const MODE_COLORS: Readonly<Record<WireMode, string>> = { unsafe: '#dc2626', lock: '#d97706', fenced: '#16a34a' }

/** The four figures of the chart: what each counts, and where. */
export const FIGURES = [
  {
    key: 'oversold',
    label: 'Oversold units',
    def: 'Units sold beyond the stock: orders in the database for units that did not exist.',
  },
  {
    key: 'chargedTwice',
    label: 'Orders charged twice',
    def: "Orders the payment gateway charged more than once, counted in the gateway's own ledger, where the money moves.",
  },
  {
    key: 'lostUpdates',
    label: 'Lost updates',
    def: 'Stock decrements overwritten by a write computed from an older read: remaining + sold ≠ initial stock.',
  },
  {
    key: 'overcharged',
    label: 'Money overcharged',
    def: "Every charge beyond an order's first, in dollars (extra charges × the price), from the gateway's ledger.",
  },
] as const
type FigureKey = (typeof FIGURES)[number]['key']

function valueOf(run: RunView, key: FigureKey): number | null {
  const r = run.result
  if (r === null) return null
  return key === 'oversold'
    ? r.oversold
    : key === 'chargedTwice'
      ? r.doubleChargedOrders
      : key === 'lostUpdates'
        ? r.lostUpdates
        : r.overchargedCents
}

const show = (key: FigureKey, v: number | null) =>
  v === null ? '…' : key === 'overcharged' ? formatMoney(v) : formatCount(v)

/**
 * Grouped bars: one group per figure, one bar per mode; each group on its own scale (units
 * differ). Drawn in HTML, not SVG: a label keeps its size at every width, and each bar's column is
 * at least as wide as its label, so no two labels can overlap (an SVG scaled to a phone shrank
 * them to 6 px, and `$249.95` ran into the `$0.00` beside it).
 */
function Bars({ runs }: { runs: readonly RunView[] }) {
  const byMode = new Map(runs.map((r) => [r.mode, r]))
  const groups = FIGURES.map((f) => ({
    figure: f,
    values: MODE_ORDER.map((m) => {
      const run = byMode.get(m)
      return run === undefined ? null : valueOf(run, f.key)
    }),
  }))
  const summary = groups
    .map(({ figure, values }) => `${figure.label}: ${MODE_ORDER.map((m, i) => `${MODE_LABELS[m]} ${show(figure.key, values[i] ?? null)}`).join(', ')}`)
    .join('; ')
  return (
    <div className="bars" data-chart="verdict" role="img" aria-label={`Violations per mode. ${summary}`}>
      {groups.map(({ figure: f, values }) => {
        const max = Math.max(1, ...values.map((v) => v ?? 0))
        return (
          <div key={f.key} className="bar-group" data-figure={f.key} title={`${f.label}: ${f.def}`}>
            <div className="bar-plot">
              {MODE_ORDER.map((m, i) => {
                const v = values[i] ?? null
                // The label's line comes off the plot's height; a 0 keeps a 1 px stub, any count at least 3 px.
                const height = v === null ? '0px' : `max(${v > 0 ? 3 : 1}px, calc((100% - 18px) * ${v / max}))`
                return (
                  <div key={m} className="bar-col" data-mode={m} data-value={v ?? ''} title={`${MODE_LABELS[m]} · ${f.label}: ${show(f.key, v)}`}>
                    <span className="chart-label bar-value">{show(f.key, v)}</span>
                    <span className="bar" style={{ height, background: MODE_COLORS[m] }} />
                  </div>
                )
              })}
            </div>
            <span className="chart-label bar-figure term">{f.label}</span>
          </div>
        )
      })}
    </div>
  )
}

/** The sentence of what the last comparison proved, from its own figures. */
function proves(runs: readonly RunView[]): string {
  const done = runs.filter((r) => r.result !== null)
  if (runs.length === 0)
    return 'One click runs the same sale — one seed, one chaos, one size — with no lock, the lock alone, and lock + fencing, and counts what broke.'
  if (done.length < 3)
    return `Running the same sale in the three modes (seed ${runs[0]?.seed ?? ''}): ${done.length} of 3 counted…`
  // The same count as each run's verdict in the table (brokenInvariants), so the two never disagree.
  const bad = (r: RunView) => (r.result ? brokenInvariants(r.result, true) : 0)
  const [unsafe, lock, fenced] = MODE_ORDER.map((m) => done.find((r) => r.mode === m))
  if (unsafe === undefined || lock === undefined || fenced === undefined) return ''
  const fencedVerdict = runVerdict(fenced)
  if (bad(fenced) > 0) return `Lock + fencing broke ${bad(fenced)} invariants in this sale: a bug — please report it.`
  if (fencedVerdict.tone === 'warn')
    return `No lock broke ${bad(unsafe)}, the lock alone ${bad(lock)}; the chaos missed the fenced sale, so this comparison tests nothing about fencing — run it again.`
  return `Same sale, same chaos: no lock broke ${bad(unsafe)} invariants, the lock alone ${bad(lock)} — a paused holder wakes up and writes after its lease is gone — and lock + fencing 0: its stale writes were refused (${fenced.result?.staleWritesRejected ?? 0}).`
}

/** "Compare the three modes": the action, the grouped bars, and what they prove. */
export function ComparisonPanel({
  limits,
  comparison,
  busy,
  offline = false,
  startComparison = postComparison,
}: {
  limits: RunLimits | null
  comparison: readonly RunView[]
  busy: boolean
  offline?: boolean
  startComparison?: StartComparison
}) {
  const [chaos, setChaos] = useState<WireChaos>('pause')
  const [buyers, setBuyers] = useState('')
  const [stock, setStock] = useState('')
  const [segments, setSegments] = useState(1)
  const [error, setError] = useState<string | null>(null)
  const [posting, setPosting] = useState(false)
  const disabled = busy || posting || offline || limits === null
  const offered = offeredChaos(COMPARISON_CHAOS, limits)
  const chosen = chaosToSend(chaos, offered)

  const submit = async (event: FormEvent) => {
    event.preventDefault()
    setError(null)
    setPosting(true)
    const request: ComparisonRequest = {
      chaos: chosen,
      ...(buyers === '' ? {} : { buyers: Number(buyers) }),
      ...(stock === '' ? {} : { stock: Number(stock) }),
      ...(segments === 1 ? {} : { segments }),
    }
    const message = await startComparison(request)
    setPosting(false)
    if (message !== null) setError(message)
  }
  const first = comparison[0]
  // Each control has a visible label; its accessible name says it is the comparison's (the run
  // form beside it has a Chaos, Buyers, Stock and Segments of its own).
  return (
    <section className="panel" aria-labelledby="verdict-title">
      <h2 id="verdict-title">The verdict: the same sale in three modes</h2>
      <form className="run-form compare-form" onSubmit={(e) => void submit(e)}>
        <div className="field">
          <label htmlFor="compare-chaos">Chaos</label>
          <select id="compare-chaos" aria-label="Comparison chaos" value={chosen} onChange={(e) => setChaos(e.target.value as WireChaos)} disabled={busy}>
            {offered.map((c) => (
              <option key={c} value={c}>
                {CHAOS_LABELS[c]}
              </option>
            ))}
          </select>
        </div>
        <div className="field field-small">
          <label htmlFor="compare-buyers">Buyers</label>
          <input
            id="compare-buyers"
            aria-label="Comparison buyers"
            type="number"
            inputMode="numeric"
            min={limits?.buyers.min}
            max={limits?.buyers.max}
            step={1}
            placeholder={String(limits?.compare.buyers ?? '')}
            value={buyers}
            onChange={(e) => setBuyers(e.target.value)}
            disabled={busy}
          />
        </div>
        <div className="field field-small">
          <label htmlFor="compare-stock">Stock</label>
          <input
            id="compare-stock"
            aria-label="Comparison stock"
            type="number"
            inputMode="numeric"
            min={limits?.stock.min}
            max={limits?.stock.max}
            step={1}
            placeholder={String(limits?.compare.stock ?? '')}
            value={stock}
            onChange={(e) => setStock(e.target.value)}
            disabled={busy}
          />
        </div>
        <div className="field field-small">
          <label htmlFor="compare-segments" title="--segments N: the stock split over N rows, each under its own lock and fence">
            Segments
          </label>
          <select id="compare-segments" aria-label="Comparison segments" value={segments} onChange={(e) => setSegments(Number(e.target.value))} disabled={busy}>
            {(limits?.segments ?? [1]).map((n) => (
              <option key={n} value={n}>
                {n}
              </option>
            ))}
          </select>
        </div>
        <button type="submit" className="primary" disabled={disabled}>
          Compare the three modes
        </button>
      </form>
      {limits !== null && !limits.redisRestart ? <p className="hint">{REDIS_RESTART_UNAVAILABLE}</p> : null}
      {error ? (
        <p className="form-error" role="alert">
          Not started: {error}
        </p>
      ) : null}
      <p className="proves" data-testid="proves">
        {proves(comparison)}
      </p>
      {first ? (
        <>
          <Bars runs={comparison} />
          <ul className="legend" aria-label="Modes">
            {MODE_ORDER.map((m) => {
              const run = comparison.find((r) => r.mode === m)
              return (
                <li key={m}>
                  <span className="swatch" style={{ background: MODE_COLORS[m] }} />
                  {MODE_LABELS[m]}
                  {run ? ` (#${run.id})` : ''}
                </li>
              )
            })}
            <li className="hint">
              seed {first.seed} · chaos {CHAOS_SHORT[first.chaos]} · {countOf(first.buyers, 'buyer')} /{' '}
              {countOf(first.stock, 'unit')}
              {first.segments > 1 ? ` · ${first.segments} segments` : ''}
              {first.chaos === 'redis-restart'
                ? ` · gateway ${first.gatewayLatencyMs} ms (a restart bites only during a slow charge)`
                : ''}
            </li>
          </ul>
        </>
      ) : null}
      <details className="defs">
        <summary>What the bars count</summary>
        <dl>
          {FIGURES.map((f) => (
            <div key={f.key}>
              <dt>{f.label}</dt>
              <dd>{f.def}</dd>
            </div>
          ))}
          <div>
            <dt>Lease, stale write</dt>
            <dd>
              The lock is a lease: it expires after its TTL even if its holder is frozen. A stale write is one from a
              holder whose lease has gone; fencing refuses it because a newer holder's token has already written.
            </dd>
          </div>
        </dl>
      </details>
    </section>
  )
}
