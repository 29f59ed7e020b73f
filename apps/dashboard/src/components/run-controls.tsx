import { useState, type FormEvent } from 'react'
import { chaosToSend, offeredChaos, REDIS_RESTART_UNAVAILABLE } from '../chaos-choices'
import { CHAOS_LABELS, CHAOS_SHORT, countOf, formatCount, MODE_LABELS } from '../format'
import type { ApiError, RunLimits, RunRequest, RunView, WireChaos, WireMode } from '../wire'

const MODES = Object.keys(MODE_LABELS) as WireMode[]
const CHAOS = Object.keys(CHAOS_LABELS) as WireChaos[]

/** Posts a run request; resolves with the server's error message, or null when the run started. */
export type StartRun = (request: RunRequest) => Promise<string | null>

/** `POST /api/runs`, the one write the dashboard makes. */
export const postRun: StartRun = async (request) => {
  try {
    const res = await fetch('/api/runs', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(request) })
    if (res.ok) return null
    const body = (await res.json().catch(() => null)) as ApiError | null
    return body?.message ?? `the shop answered ${res.status}`
  } catch {
    return 'the shop did not answer; is the demo still running?'
  }
}

function RunProgress({ run }: { run: RunView }) {
  const phase =
    run.phase === 'starting'
      ? 'starting the instances'
      : run.phase === 'selling'
        ? `selling: ${formatCount(run.buyersDone)} of ${formatCount(run.buyers)} buyers done`
        : run.phase === 'draining'
          ? 'waiting for the instances to finish'
          : run.phase === 'counting'
            ? 'counting from the database'
            : 'finished'
  return (
    <div className="progress-box" aria-live="polite">
      <p>
        <strong>
          Flash sale #{run.id}: {MODE_LABELS[run.mode]}, chaos {CHAOS_SHORT[run.chaos]}
          {run.segments > 1 ? `, ${run.segments} segments` : ''}
        </strong>{' '}
        — {phase}
      </p>
      <progress max={run.buyers} value={run.buyersDone} aria-label={`Flash sale #${run.id} progress`} />
      <p className="hint">
        ordered {formatCount(run.ordered)} · sold out {formatCount(run.soldOut)} · paid {formatCount(run.paid)}
        {run.chaos === 'none' ? '' : ` · ${countOf(run.chaosEvents, run.chaos === 'redis-restart' ? 'Redis restart' : run.chaos === 'kill' ? 'kill' : 'pause')}`}
      </p>
    </div>
  )
}

/** Start a flash sale (mode, chaos, size) and watch the one going on. */
export function RunControls({
  limits,
  activeRun,
  offline = false,
  startRun = postRun,
}: {
  limits: RunLimits | null
  activeRun: RunView | null
  /** The stream is down: a run could not be watched, so none is started. */
  offline?: boolean
  startRun?: StartRun
}) {
  const [mode, setMode] = useState<WireMode>('fenced')
  const [chaos, setChaos] = useState<WireChaos>('pause')
  const [buyers, setBuyers] = useState<string>('')
  const [stock, setStock] = useState<string>('')
  const [segments, setSegments] = useState<number>(1)
  const [error, setError] = useState<string | null>(null)
  const [posting, setPosting] = useState(false)

  const buyersValue = buyers === '' ? (limits?.buyers.default ?? 300) : Number(buyers)
  const stockValue = stock === '' ? (limits?.stock.default ?? 30) : Number(stock)
  const busy = posting || activeRun !== null
  const disabled = busy || offline || limits === null
  const offered = offeredChaos(CHAOS, limits)
  const chosen = chaosToSend(chaos, offered)

  const submit = async (event: FormEvent) => {
    event.preventDefault()
    setError(null)
    setPosting(true)
    const message = await startRun({ mode, chaos: chosen, buyers: buyersValue, stock: stockValue, segments })
    setPosting(false)
    if (message !== null) setError(message)
  }

  return (
    <section className="panel" aria-labelledby="run-title">
      <h2 id="run-title">Run a flash sale</h2>
      <form className="run-form" onSubmit={(e) => void submit(e)}>
        <div className="field">
          <label htmlFor="run-mode">Mode</label>
          <select id="run-mode" value={mode} onChange={(e) => setMode(e.target.value as WireMode)} disabled={busy}>
            {MODES.map((m) => (
              <option key={m} value={m}>
                {MODE_LABELS[m]}
              </option>
            ))}
          </select>
        </div>
        <div className="field">
          <label htmlFor="run-chaos">Chaos</label>
          <select id="run-chaos" value={chosen} onChange={(e) => setChaos(e.target.value as WireChaos)} disabled={busy}>
            {offered.map((c) => (
              <option key={c} value={c}>
                {CHAOS_LABELS[c]}
              </option>
            ))}
          </select>
        </div>
        <div className="field field-small">
          <label htmlFor="run-buyers">Buyers</label>
          <input
            id="run-buyers"
            type="number"
            inputMode="numeric"
            min={limits?.buyers.min}
            max={limits?.buyers.max}
            step={1}
            placeholder={String(limits?.buyers.default ?? '')}
            value={buyers}
            onChange={(e) => setBuyers(e.target.value)}
            disabled={busy}
            required={false}
          />
        </div>
        <div className="field field-small">
          <label htmlFor="run-stock">Stock</label>
          <input
            id="run-stock"
            type="number"
            inputMode="numeric"
            min={limits?.stock.min}
            max={limits?.stock.max}
            step={1}
            placeholder={String(limits?.stock.default ?? '')}
            value={stock}
            onChange={(e) => setStock(e.target.value)}
            disabled={busy}
          />
        </div>
        <div className="field field-small">
          <label htmlFor="run-segments" title="--segments N: the stock split over N rows, each under its own lock and fence">
            Segments
          </label>
          <select id="run-segments" value={segments} onChange={(e) => setSegments(Number(e.target.value))} disabled={busy}>
            {(limits?.segments ?? [1]).map((n) => (
              <option key={n} value={n}>
                {n}
              </option>
            ))}
          </select>
        </div>
        <button type="submit" className="primary" disabled={disabled}>
          {posting ? 'Starting…' : activeRun ? 'A sale is running' : 'Start the sale'}
        </button>
      </form>
      {error ? (
        <p className="form-error" role="alert">
          Not started: {error}
        </p>
      ) : null}
      {activeRun ? (
        <RunProgress run={activeRun} />
      ) : (
        <p className="hint">
          {limits ? `${limits.instances} shop instances, each buyer buys one unit once; ` : ''}the live shop’s crowd waits while a sale runs. One sale at a time.
          {limits !== null && !limits.redisRestart ? ` ${REDIS_RESTART_UNAVAILABLE}` : ''}
          {segments > 1 ? ` The stock is split over ${segments} rows, each under its own lock and fence: up to ${segments} purchases at once.` : ''}
          {chosen === 'redis-restart' ? ' A Redis restart lets a second holder in only while the first is inside a slow charge: these sales use a 300-600 ms gateway.' : ''}
        </p>
      )}
    </section>
  )
}
