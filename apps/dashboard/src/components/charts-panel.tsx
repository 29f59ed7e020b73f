import { useMemo, useState } from 'react'
import type uPlot from 'uplot'
import { formatMs, formatPercent, formatRate } from '../format'
import type { MetricsPoint } from '../wire'
import { MetricChart } from './metric-chart'

const COLORS = { blue: '#2563eb', green: '#16a34a', amber: '#d97706', purple: '#7c3aed', red: '#dc2626', teal: '#0d9488' }

// Below 10 ms with a fraction, one decimal: an empty chart's 0 / 0.5 / 1 ms axis read "0 ms, 1 ms, 1 ms".
const ms = (v: number) =>
  v >= 1000 ? `${(v / 1000).toFixed(v >= 10_000 ? 0 : 1)} s` : v < 10 && !Number.isInteger(v) ? `${v.toFixed(1)} ms` : `${Math.round(v)} ms`
const pct = (v: number) => `${Math.round(v * 100)} %`
const num = (v: number) => (Number.isInteger(v) ? String(v) : v.toFixed(1))

type Figures = Omit<MetricsPoint, 'atMs' | 'sale'>

/**
 * The lock metrics of the last minutes: the live shop's, or the sales' (each from its own
 * instances only; the two are never summed).
 */
export function ChartsPanel({ points }: { points: readonly MetricsPoint[] }) {
  const saleIds = useMemo(() => [...new Set(points.flatMap((p) => (p.sale ? [p.sale.runId] : [])))], [points])
  const [chosen, setChosen] = useState<'live' | 'sale'>('live')
  const view = chosen === 'sale' && saleIds.length > 0 ? 'sale' : 'live'
  const columns = useMemo(() => {
    const x = points.map((p) => p.atMs / 1000)
    const figures = (p: MetricsPoint): Figures | null => (view === 'live' ? p : (p.sale ?? null))
    const col = (f: (p: Figures) => number | null) =>
      points.map((p) => {
        const of = figures(p)
        return of === null ? null : f(of)
      })
    return {
      x,
      rate: col((p) => p.acquireRate),
      success: col((p) => p.successRatio),
      p50: col((p) => p.waitP50Ms),
      p99: col((p) => p.waitP99Ms),
      expiry: col((p) => p.expiryRatio),
      lost: col((p) => p.lostLocks),
      rejections: col((p) => p.fencingRejections),
    }
  }, [points, view])
  const lastPoint = points[points.length - 1]
  const last: Figures | undefined = view === 'live' ? lastPoint : (lastPoint?.sale ?? undefined)
  const saleLabel = saleIds.length === 1 ? `Sale #${saleIds[0]}` : saleIds.length > 1 ? `Sales #${saleIds.join(', #')}` : 'Sale'
  const data = (...cols: Array<Array<number | null>>): uPlot.AlignedData => [columns.x, ...cols] as uPlot.AlignedData
  const lostTotal = columns.lost.reduce<number>((a, v) => a + (v ?? 0), 0)
  const rejectedTotal = columns.rejections.reduce<number>((a, v) => a + (v ?? 0), 0)

  return (
    <section className="panel" aria-labelledby="charts-title">
      <h2 id="charts-title">
        Lock metrics{' '}
        <span className="hint">
          {view === 'live' ? 'live shop' : `${saleLabel.toLowerCase()}, its own instances`} · last {Math.max(1, Math.round(points.length / 60))} min · rates and quantiles over 5 s
        </span>
      </h2>
      <div className="chart-switch" role="group" aria-label="Whose lock metrics">
        <button type="button" aria-pressed={view === 'live'} onClick={() => setChosen('live')}>
          Live shop
        </button>
        <button type="button" aria-pressed={view === 'sale'} onClick={() => setChosen('sale')} disabled={saleIds.length === 0} title={saleIds.length === 0 ? 'No sale in the last minutes' : undefined}>
          {saleLabel}
        </button>
      </div>
      {last ? (
        <p className="hint instances">
          Instances answering: {last.instancesUp} of {last.instancesWatched}
          {last.instancesUp < last.instancesWatched ? ' — one may be frozen by the pause chaos' : ''}
        </p>
      ) : null}
      <div className="charts">
        <MetricChart title="Acquire rate" now={formatRate(last?.acquireRate ?? null)} series={[{ label: 'acquires/s', color: COLORS.blue }]} data={data(columns.rate)} formatY={num} />
        <MetricChart
          title="Acquire success"
          now={formatPercent(last?.successRatio ?? null)}
          series={[{ label: 'granted', color: COLORS.green }]}
          data={data(columns.success)}
          formatY={pct}
          yRange={[0, 1]}
        />
        <MetricChart
          title="Wait P50 / P99"
          now={`${formatMs(last?.waitP50Ms ?? null)} / ${formatMs(last?.waitP99Ms ?? null)}`}
          series={[
            { label: 'P50', color: COLORS.teal },
            { label: 'P99', color: COLORS.purple },
          ]}
          data={data(columns.p50, columns.p99)}
          formatY={ms}
        />
        <MetricChart title="Expiry ratio" now={formatPercent(last?.expiryRatio ?? null)} series={[{ label: 'expired or lost', color: COLORS.amber }]} data={data(columns.expiry)} formatY={pct} yRange={[0, 1]} />
        <MetricChart title="Lost locks" now={`${lostTotal} in view`} series={[{ label: 'lost', color: COLORS.red, bars: true }]} data={data(columns.lost)} formatY={num} />
        <MetricChart
          title="Fencing rejections"
          now={`${rejectedTotal} in view`}
          series={[{ label: 'stale writes rejected', color: COLORS.purple, bars: true }]}
          data={data(columns.rejections)}
          formatY={num}
        />
      </div>
    </section>
  )
}
