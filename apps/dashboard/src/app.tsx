import { useState } from 'react'
import { ChargedTwicePanel } from './components/charged-twice-panel'
import { ChartsPanel } from './components/charts-panel'
import { defaultIncidentRun, IncidentPanel } from './components/incident-panel'
import { ComparisonPanel } from './components/comparison-panel'
import { ConnectionBanner } from './components/connection-banner'
import { InvariantsPanel } from './components/invariants-panel'
import { LocksTable } from './components/locks-table'
import { RunControls } from './components/run-controls'
import { RunsComparison } from './components/runs-comparison'
import { useDashboardStream, type StreamOptions } from './use-dashboard-stream'

/** The whole dashboard: one stream in, panels out. */
export function App({ stream }: { stream?: StreamOptions }) {
  const { snapshot, points, connection } = useDashboardStream(stream)
  const updated = snapshot ? new Date(snapshot.atMs).toLocaleTimeString() : null
  const runs = snapshot?.runs ?? []
  // The incident drawn: the run picked in the table, else the newest finished one with a lock.
  // Opening a run's charged-twice orders picks that run, so the two panels never show two sales;
  // picking another run's timeline closes the orders of the first.
  const [picked, setPicked] = useState<number | null>(null)
  const [drill, setDrill] = useState<number | null>(null)
  const openChargedTwice = (runId: number) => {
    setDrill(runId)
    setPicked(runId)
  }
  const openTimeline = (runId: number) => {
    setPicked(runId)
    setDrill((open) => (open === runId ? open : null))
  }
  const timelineRun = picked !== null && runs.some((r) => r.id === picked) ? picked : defaultIncidentRun(runs)
  const drillRun = runs.find((r) => r.id === drill) ?? null
  return (
    <div className="page">
      <header className="top">
        <h1>
          FenceLock <span className="sub">flash-sale shop, live</span>
        </h1>
        <p className={`live-pill live-${connection.state}`} aria-live="polite">
          {connection.state === 'open' ? `● Live · ${updated ?? ''}` : connection.state === 'connecting' ? '○ Connecting' : '○ Reconnecting'}
        </p>
      </header>
      <ConnectionBanner connection={connection} />
      <main className="grid">
        <div className="area-verdict">
          <ComparisonPanel limits={snapshot?.limits ?? null} comparison={snapshot?.comparison ?? []} busy={(snapshot?.activeRun ?? null) !== null} offline={connection.state !== 'open'} />
        </div>
        <div className="area-run">
          <RunControls limits={snapshot?.limits ?? null} activeRun={snapshot?.activeRun ?? null} offline={connection.state !== 'open'} />
        </div>
        <div className="area-inv">
          <InvariantsPanel invariants={snapshot?.invariants ?? []} />
        </div>
        <div className="area-charts">
          <ChartsPanel points={points} />
        </div>
        <div className="area-locks">
          <LocksTable locks={snapshot?.locks ?? []} />
        </div>
        <div className="area-runs">
          <RunsComparison runs={runs} onChargedTwice={openChargedTwice} onTimeline={openTimeline} timelineRun={timelineRun} />
          {drillRun ? <ChargedTwicePanel run={drillRun} onClose={() => setDrill(null)} /> : null}
        </div>
        <div className="area-incident">
          <IncidentPanel runs={runs} runId={timelineRun} />
        </div>
      </main>
    </div>
  )
}
