import { useEffect, useRef } from 'react'
import uPlot from 'uplot'
import 'uplot/dist/uPlot.min.css'

/** One line of a chart. */
export interface ChartSeries {
  readonly label: string
  readonly color: string
  /** Draw as bars (event counts) instead of a line. */
  readonly bars?: boolean
}

/** Props of {@link MetricChart}. */
export interface MetricChartProps {
  readonly title: string
  /** The latest value, written next to the title and read by screen readers. */
  readonly now: string
  readonly series: readonly ChartSeries[]
  /** `[x (epoch s), ...one array per series]`; null is a gap. */
  readonly data: uPlot.AlignedData
  /** Formats a y value for the axis. */
  readonly formatY: (value: number) => string
  /** Fixed y range (e.g. 0..1 for ratios); default from 0 to the data's max. */
  readonly yRange?: readonly [number, number]
  readonly height?: number
}

const bars = uPlot.paths.bars?.({ size: [0.8, 12] })

/** A time series chart (uPlot on a canvas), resized with its container. */
export function MetricChart({ title, now, series, data, formatY, yRange, height = 150 }: MetricChartProps) {
  const box = useRef<HTMLDivElement>(null)
  const plot = useRef<uPlot | null>(null)
  const latest = useRef({ data, formatY })
  latest.current = { data, formatY }

  // The chart is made once per shape (series, range, height: `shape`); data changes go through setData.
  const shape = JSON.stringify({ series, yRange, height })
  useEffect(() => {
    const el = box.current
    if (el === null) return
    const opts: uPlot.Options = {
      width: Math.max(200, el.clientWidth),
      height,
      legend: { show: series.length > 1 },
      cursor: { drag: { x: false, y: false } },
      scales: {
        x: { time: true },
        y: yRange ? { range: [yRange[0], yRange[1]] } : { range: (_u, _min, max) => [0, max > 0 ? max * 1.1 : 1] },
      },
      axes: [
        { stroke: '#5b6472', grid: { stroke: '#eef0f3' }, ticks: { stroke: '#d9dde3' }, size: 28, font: '11px system-ui, sans-serif' },
        {
          stroke: '#5b6472',
          grid: { stroke: '#eef0f3' },
          ticks: { stroke: '#d9dde3' },
          size: 56,
          font: '11px system-ui, sans-serif',
          values: (_u, splits) => splits.map((v) => latest.current.formatY(v)),
        },
      ],
      series: [
        {},
        ...series.map((s) => ({
          label: s.label,
          stroke: s.color,
          width: 2,
          fill: s.bars ? s.color : `${s.color}1a`,
          points: { show: false },
          spanGaps: false,
          ...(s.bars && bars ? { paths: bars } : {}),
          value: (_u: uPlot, v: number | null) => (v === null ? '–' : latest.current.formatY(v)),
        })),
      ],
    }
    const u = new uPlot(opts, latest.current.data, el)
    plot.current = u
    const resize = new ResizeObserver(() => {
      const width = Math.max(200, el.clientWidth)
      if (width !== u.width) u.setSize({ width, height })
    })
    resize.observe(el)
    return () => {
      resize.disconnect()
      u.destroy()
      plot.current = null
    }
  }, [shape])

  useEffect(() => {
    plot.current?.setData(data)
  }, [data])

  return (
    <figure className="chart" aria-label={`${title}: ${now}`} role="img">
      <figcaption>
        <span className="chart-title">{title}</span> <span className="chart-now">{now}</span>
      </figcaption>
      <div ref={box} className="chart-canvas" aria-hidden="true" />
    </figure>
  )
}
