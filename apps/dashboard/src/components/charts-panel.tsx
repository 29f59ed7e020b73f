import { useMemo } from 'react'
import type uPlot from 'uplot'
import { formatMs, formatPercent, formatRate } from '../format'
import type { MetricsPoint } from '../wire'
import { MetricChart } from './metric-chart'

const COLORS = { blue: '#2563eb', green: '#16a34a', amber: '#d97706', purple: '#7c3aed', red: '#dc2626', teal: '#0d9488' }

const ms = (v: number) => (v >= 1000 ? `${(v / 1000).toFixed(v >= 10_000 ? 0 : 1)} s` : `${Math.round(v)} ms`)
const pct = (v: number) => `${Math.round(v * 100)} %`
const num = (v: number) => (Number.isInteger(v) ? String(v) : v.toFixed(1))

/** The lock metrics of the last minutes, summed over every instance watched. */
export function ChartsPanel({ points }: { points: readonly MetricsPoint[] }) {
  const columns = useMemo(() => {
    const x = points.map((p) => p.atMs / 1000)
    const col = (f: (p: MetricsPoint) => number | null) => points.map(f)
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
  }, [points])
  const last = points[points.length - 1]
  const data = (...cols: Array<Array<number | null>>): uPlot.AlignedData => [columns.x, ...cols] as uPlot.AlignedData
  const lostTotal = columns.lost.reduce<number>((a, v) => a + (v ?? 0), 0)
  const rejectedTotal = columns.rejections.reduce<number>((a, v) => a + (v ?? 0), 0)

  return (
    <section className="panel" aria-labelledby="charts-title">
      <h2 id="charts-title">
        Lock metrics <span className="hint">last {Math.max(1, Math.round(points.length / 60))} min · rates and quantiles over 5 s · every instance</span>
      </h2>
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
