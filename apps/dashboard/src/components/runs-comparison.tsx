import { CHAOS_SHORT, formatCount, formatMs, MODE_LABELS } from '../format'
import type { RunView } from '../wire'

function Count({ value, bad, col }: { value: number | undefined; bad?: boolean; col: string }) {
  if (value === undefined) return <td className="num" data-col={col}>–</td>
  return (
    <td className={`num${bad && value > 0 ? ' cell-bad' : ''}${bad && value === 0 ? ' cell-ok' : ''}`} data-col={col}>
      {formatCount(value)}
    </td>
  )
}

function statusText(run: RunView): string {
  if (run.status === 'running') return `running · ${run.phase}`
  if (run.status === 'done') return run.durationMs === null ? 'done' : formatMs(run.durationMs)
  return run.status
}

/** The last runs side by side: mode, chaos and what the database counted after each. */
export function RunsComparison({ runs }: { runs: readonly RunView[] }) {
  return (
    <section className="panel" aria-labelledby="runs-title">
      <h2 id="runs-title">Runs compared</h2>
      {runs.length === 0 ? (
        <p className="empty">No run yet. Start one above: the same sale with no lock, the lock alone and lock + fencing shows what each protects.</p>
      ) : (
        <div className="table-wrap" role="region" aria-labelledby="runs-title" tabIndex={0}>
          <table className="table runs">
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
                  Double charges
                </th>
                <th scope="col" className="num">
                  Lost updates
                </th>
                <th scope="col" className="num">
                  Stale writes rejected
                </th>
                <th scope="col">Time</th>
              </tr>
            </thead>
            <tbody>
              {runs.map((run) => {
                const r = run.result
                return (
                  <tr key={run.id} data-run-id={run.id} data-status={run.status}>
                    <th scope="row">{run.id}</th>
                    <td data-col="mode">{MODE_LABELS[run.mode]}</td>
                    <td data-col="chaos">{CHAOS_SHORT[run.chaos]}</td>
                    <td className="num" data-col="sold">
                      {r ? `${formatCount(r.sold)} / ${formatCount(run.stock)}` : `– / ${formatCount(run.stock)}`}
                    </td>
                    <Count col="oversold" value={r?.oversold} bad />
                    <Count col="double-charges" value={r?.doubleCharges} bad />
                    <Count col="lost-updates" value={r?.lostUpdates} bad />
                    <Count col="stale-rejected" value={r?.staleWritesRejected} />
                    <td data-col="status" title={run.error ?? undefined}>
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
