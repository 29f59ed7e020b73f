import { CHAOS_SHORT, FIGURE_LABELS, formatCount, formatMoney, formatMs, MODE_LABELS } from '../format'
import { chaosLanded, runVerdict } from '../verdict'
import type { RunView } from '../wire'

function Count({ value, bad, col, label, onOpen }: { value: number | undefined; bad?: boolean; col: string; label: string; onOpen?: (() => void) | undefined }) {
  if (value === undefined)
    return (
      <td className="num" data-col={col} data-label={label}>
        –
      </td>
    )
  return (
    <td className={`num${bad && value > 0 ? ' cell-bad' : ''}${bad && value === 0 ? ' cell-ok' : ''}`} data-col={col} data-label={label}>
      {onOpen && value > 0 ? (
        <button type="button" className="count-button" onClick={onOpen} title="The orders, with the instances and tokens of each charge">
          {formatCount(value)}
        </button>
      ) : (
        formatCount(value)
      )}
    </td>
  )
}

function statusText(run: RunView): string {
  if (run.status === 'running') return `running · ${run.phase}`
  if (run.status === 'done') return run.durationMs === null ? 'done' : formatMs(run.durationMs)
  return run.status
}

/**
 * The last runs side by side: mode, chaos and what the shop's database and the gateway's ledger
 * counted after each. A "charged twice" count above 0 opens its orders (`onChargedTwice`); a run's
 * "timeline" button draws its incident (`onTimeline`).
 */
export function RunsComparison({
  runs,
  onChargedTwice,
  onTimeline,
  timelineRun = null,
}: {
  runs: readonly RunView[]
  onChargedTwice?: (runId: number) => void
  onTimeline?: (runId: number) => void
  /** The run whose incident is drawn. */
  timelineRun?: number | null
}) {
  return (
    <section className="panel" aria-labelledby="runs-title">
      <h2 id="runs-title">Runs</h2>
      {runs.length === 0 ? (
        <p className="empty">No run yet. Start one above: the same sale with no lock, the lock alone and lock + fencing shows what each protects.</p>
      ) : (
        <div className="table-wrap" role="region" aria-labelledby="runs-title" tabIndex={0}>
          <table className="table stack runs">
            <thead>
              <tr>
                <th scope="col">#</th>
                <th scope="col">Mode</th>
                <th scope="col">Chaos</th>
                <th scope="col" className="num">
                  Sold / stock
                </th>
                <th scope="col" className="num">
                  Oversold
                </th>
                <th scope="col" className="num">
                  {FIGURE_LABELS.chargedTwice}
                </th>
                <th scope="col" className="num">
                  Lost updates
                </th>
                <th scope="col" className="num">
                  Overcharged
                </th>
                <th scope="col" className="num">
                  {FIGURE_LABELS.gatewayCharges}
                </th>
                <th scope="col" className="num">
                  {FIGURE_LABELS.payments}
                </th>
                <th scope="col" className="num">
                  Stale writes rejected
                </th>
                <th scope="col">Chaos that landed</th>
                <th scope="col">Verdict</th>
                <th scope="col">Time</th>
              </tr>
            </thead>
            <tbody>
              {runs.map((run) => {
                const r = run.result
                const verdict = runVerdict(run)
                return (
                  <tr key={run.id} data-run-id={run.id} data-status={run.status}>
                    <th scope="row" data-label="Run">
                      {run.id}
                      {run.comparison !== null ? <span className="run-of"> (comparison {run.comparison}, seed {run.seed})</span> : null}
                      {run.segments > 1 ? <span className="run-of"> · {run.segments} segments</span> : null}
                      {onTimeline && run.status === 'done' && run.mode !== 'unsafe' ? (
                        <button type="button" className="count-button timeline-button" aria-pressed={timelineRun === run.id} onClick={() => onTimeline(run.id)} title="Draw this sale's incident">
                          timeline
                        </button>
                      ) : null}
                    </th>
                    <td data-col="mode" data-label="Mode">
                      {MODE_LABELS[run.mode]}
                    </td>
                    <td data-col="chaos" data-label="Chaos">
                      {CHAOS_SHORT[run.chaos]}
                    </td>
                    <td className="num" data-col="sold" data-label="Sold / stock">
                      {r ? `${formatCount(r.sold)} / ${formatCount(run.stock)}` : `– / ${formatCount(run.stock)}`}
                    </td>
                    <Count col="oversold" label="Oversold" value={r?.oversold} bad />
                    <Count
                      col="charged-twice"
                      label={FIGURE_LABELS.chargedTwice}
                      value={r?.doubleChargedOrders}
                      bad
                      onOpen={onChargedTwice && run.status === 'done' ? () => onChargedTwice(run.id) : undefined}
                    />
                    <Count col="lost-updates" label="Lost updates" value={r?.lostUpdates} bad />
                    <td className={`num${r && r.overchargedCents > 0 ? ' cell-bad' : ''}`} data-col="overcharged" data-label="Overcharged">
                      {r ? formatMoney(r.overchargedCents) : '–'}
                    </td>
                    <Count col="gateway-charges" label={FIGURE_LABELS.gatewayCharges} value={r?.gatewayCharges} />
                    <Count col="payments" label={FIGURE_LABELS.payments} value={r?.payments} />
                    <Count col="stale-rejected" label="Stale writes rejected" value={r?.staleWritesRejected} />
                    <td data-col="chaos-landed" data-label="Chaos that landed">
                      {chaosLanded(run)}
                    </td>
                    <td className={`verdict-cell tone-${verdict.tone}`} data-col="verdict" data-label="Verdict" title={verdict.detail}>
                      {verdict.text}
                    </td>
                    <td data-col="status" data-label="Time" title={run.error ?? undefined}>
                      {statusText(run)}
                      {run.error ? <span className="hint"> {run.error}</span> : null}
                    </td>
                  </tr>
                )
              })}
            </tbody>
          </table>
        </div>
      )}
    </section>
  )
}
