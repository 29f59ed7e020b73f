import { useState, type FormEvent } from 'react'
import { CHAOS_LABELS, CHAOS_SHORT, formatCount, formatMoney, MODE_LABELS } from '../format'
import { runVerdict } from '../verdict'
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

/** Grouped bars: one group per figure, one bar per mode; each group on its own scale (units differ). */
function Bars({ runs }: { runs: readonly RunView[] }) {
  const byMode = new Map(runs.map((r) => [r.mode, r]))
  const W = 640
  const H = 200
  const top = 18
  const base = H - 34
  const groupW = W / FIGURES.length
  const barW = 34
  return (
    <svg
      className="bars"
      viewBox={`0 0 ${W} ${H}`}
      role="img"
      aria-label="Violations per mode: oversold units, orders charged twice, lost updates, money overcharged"
    >
      <line className="axis" x1={0} x2={W} y1={base} y2={base} />
      {FIGURES.map((f, g) => {
        const values = MODE_ORDER.map((m) => {
          const run = byMode.get(m)
          return run === undefined ? null : valueOf(run, f.key)
        })
        const max = Math.max(1, ...values.map((v) => v ?? 0))
        const x0 = g * groupW + (groupW - barW * 3 - 8) / 2
        return (
          <g key={f.key} data-figure={f.key}>
            <title>{`${f.label}: ${f.def}`}</title>
            {MODE_ORDER.map((m, i) => {
              const v = values[i] ?? null
              const h = v === null ? 0 : Math.max(v > 0 ? 3 : 1, ((base - top) * v) / max)
              const x = x0 + i * (barW + 4)
              return (
                <g key={m} data-mode={m} data-value={v ?? ''}>
                  <rect x={x} y={base - h} width={barW} height={h} fill={MODE_COLORS[m]} rx={2}>
                    <title>{`${MODE_LABELS[m]} · ${f.label}: ${show(f.key, v)}`}</title>
                  </rect>
                  <text x={x + barW / 2} y={base - h - 4} textAnchor="middle">
                    {show(f.key, v)}
                  </text>
                </g>
              )
            })}
            <text x={g * groupW + groupW / 2} y={base + 16} textAnchor="middle" className="term">
              {f.label}
            </text>
          </g>
        )
      })}
    </svg>
  )
}

/** The sentence of what the last comparison proved, from its own figures. */
function proves(runs: readonly RunView[]): string {
  const done = runs.filter((r) => r.result !== null)
  if (runs.length === 0)
    return 'One click runs the same sale — one seed, one chaos, one size — with no lock, the lock alone, and lock + fencing, and counts what broke.'
  if (done.length < 3)
    return `Running the same sale in the three modes (seed ${runs[0]?.seed ?? ''}): ${done.length} of 3 counted…`
  const bad = (r: RunView) => (r.result ? r.result.oversold + r.result.doubleChargedOrders + r.result.lostUpdates : 0)
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

  const submit = async (event: FormEvent) => {
    event.preventDefault()
    setError(null)
    setPosting(true)
    const request: ComparisonRequest = {
      chaos,
      ...(buyers === '' ? {} : { buyers: Number(buyers) }),
      ...(stock === '' ? {} : { stock: Number(stock) }),
      ...(segments === 1 ? {} : { segments }),
    }
    const message = await startComparison(request)
    setPosting(false)
    if (message !== null) setError(message)
  }
  const first = comparison[0]
  return (
    <section className="panel" aria-labelledby="verdict-title">
      <div className="compare-head">
        <h2 id="verdict-title">The verdict: the same sale in three modes</h2>
        <form className="compare-form" onSubmit={(e) => void submit(e)}>
          <select
            aria-label="Comparison chaos"
            value={chaos}
            onChange={(e) => setChaos(e.target.value as WireChaos)}
            disabled={busy}
          >
            {(['pause', 'redis-restart', 'none'] as const).map((c) => (
              <option key={c} value={c} disabled={c === 'redis-restart' && limits?.redisRestart === false}>
                {CHAOS_LABELS[c]}
              </option>
            ))}
          </select>
          <input
            aria-label="Comparison buyers"
            className="num-input"
            type="number"
            min={limits?.buyers.min}
            max={limits?.buyers.max}
            placeholder={`${limits?.compare.buyers ?? ''} buyers`}
            value={buyers}
            onChange={(e) => setBuyers(e.target.value)}
            disabled={busy}
            size={7}
          />
          <input
            aria-label="Comparison stock"
            className="num-input"
            type="number"
            min={limits?.stock.min}
            max={limits?.stock.max}
            placeholder={`${limits?.compare.stock ?? ''} units`}
            value={stock}
            onChange={(e) => setStock(e.target.value)}
            disabled={busy}
            size={6}
          />
          <select
            aria-label="Comparison segments"
            title="--segments N: the stock split over N rows, each under its own lock and fence"
            value={segments}
            onChange={(e) => setSegments(Number(e.target.value))}
            disabled={busy}
          >
            {(limits?.segments ?? [1]).map((n) => (
              <option key={n} value={n}>
                {n === 1 ? '1 segment' : `${n} segments`}
              </option>
            ))}
          </select>
          <button type="submit" className="primary" disabled={disabled}>
            Compare the three modes
          </button>
        </form>
      </div>
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
              seed {first.seed} · chaos {CHAOS_SHORT[first.chaos]} · {formatCount(first.buyers)} buyers /{' '}
              {formatCount(first.stock)} units
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
