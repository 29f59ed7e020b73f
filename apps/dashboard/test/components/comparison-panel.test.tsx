import { cleanup, fireEvent, render, screen, waitFor } from '@testing-library/react'
import { afterEach, describe, expect, it } from 'vitest'
import { ComparisonPanel } from '../../src/components/comparison-panel'
import type { ComparisonRequest, RunLimits } from '../../src/wire'
import { result, run } from './fixtures'

afterEach(cleanup)

const limits: RunLimits = {
  buyers: { min: 10, max: 2000, default: 200 },
  stock: { min: 1, max: 500, default: 20 },
  instances: 3,
  compare: { buyers: 1000, stock: 100 },
  segments: [1, 2, 4, 8],
  redisRestart: true,
}

/** One comparison as the server sends it: seed 1001, pause chaos, 1000 buyers / 100 units. */
const comparison = [
  run({
    id: 4,
    mode: 'unsafe',
    comparison: 1,
    seed: 1001,
    buyers: 1000,
    stock: 100,
    result: result({
      sold: 160,
      oversold: 60,
      doubleChargedOrders: 12,
      extraCharges: 14,
      overchargedCents: 14 * 4_999,
      lostUpdates: 70,
      staleWritesRejected: 0,
    }),
  }),
  run({
    id: 5,
    mode: 'lock',
    comparison: 1,
    seed: 1001,
    buyers: 1000,
    stock: 100,
    result: result({
      sold: 137,
      oversold: 37,
      doubleChargedOrders: 2,
      extraCharges: 2,
      overchargedCents: 2 * 4_999,
      lostUpdates: 0,
      staleWritesRejected: 0,
    }),
  }),
  run({
    id: 6,
    mode: 'fenced',
    comparison: 1,
    seed: 1001,
    buyers: 1000,
    stock: 100,
    result: result({ sold: 100, staleWritesRejected: 6 }),
  }),
]

const bar = (figure: string, mode: string) =>
  document.querySelector(`[data-figure="${figure}"] [data-mode="${mode}"]`)?.getAttribute('data-value')

describe('ComparisonPanel', () => {
  it('draws the three modes side by side per figure, with what they prove', () => {
    render(<ComparisonPanel limits={limits} comparison={comparison} busy={false} />)
    expect([bar('oversold', 'unsafe'), bar('oversold', 'lock'), bar('oversold', 'fenced')]).toEqual(['60', '37', '0'])
    expect([bar('chargedTwice', 'unsafe'), bar('chargedTwice', 'lock'), bar('chargedTwice', 'fenced')]).toEqual([
      '12',
      '2',
      '0',
    ])
    expect(bar('overcharged', 'lock')).toBe(String(2 * 4_999))
    expect(screen.getByText('$99.98')).toBeTruthy()
    expect(screen.getByTestId('proves').textContent).toMatch(
      /no lock broke 142 invariants, the lock alone 39 .* lock \+ fencing 0: its stale writes were refused \(6\)/,
    )
    expect(screen.getByText(/seed 1001 · chaos pause · 1.000 buyers \/ 100 units/)).toBeTruthy()
    // Definitions on hover (each group's title) and on tap (the details element).
    expect(screen.getByText('What the bars count')).toBeTruthy()
    expect(document.querySelector('[data-figure="chargedTwice"]')?.getAttribute('title')).toMatch(/counted in the gateway's own ledger/)
    expect(screen.getAllByText(/counted in the gateway's own ledger/).map((e) => e.tagName.toLowerCase())).toEqual(['dd'])
    // The chart's figures, read out: one name for the whole chart, every value in it.
    expect(screen.getByRole('img').getAttribute('aria-label')).toContain(
      'Money overcharged: No lock $699.86, Lock only $99.98, Lock + fencing $0.00',
    )
  })

  it('draws every label as text of its own, one column per bar, in a chart the layout test can measure', () => {
    render(<ComparisonPanel limits={limits} comparison={comparison} busy={false} />)
    const chart = document.querySelector('[data-chart="verdict"]') as HTMLElement
    expect(chart.querySelector('svg')).toBeNull()
    const labels = [...chart.querySelectorAll('[data-figure="overcharged"] .chart-label')].map((l) => l.textContent)
    expect(labels).toEqual(['$699.86', '$99.98', '$0.00', 'Money overcharged'])
    expect(chart.querySelectorAll('.bar')).toHaveLength(12)
  })

  it('labels each control where it can be seen, and shows the default size whole as the placeholder', () => {
    render(<ComparisonPanel limits={limits} comparison={[]} busy={false} />)
    const visible = (name: string) => {
      const control = screen.getByLabelText(name) as HTMLInputElement | HTMLSelectElement
      return [document.querySelector(`label[for="${control.id}"]`)?.textContent, control instanceof HTMLInputElement ? control.placeholder : null]
    }
    expect(visible('Comparison chaos')).toEqual(['Chaos', null])
    expect(visible('Comparison buyers')).toEqual(['Buyers', '1000'])
    expect(visible('Comparison stock')).toEqual(['Stock', '100'])
    expect(visible('Comparison segments')).toEqual(['Segments', null])
  })

  it('offers Restart Redis only when the server can run it, and says why when it cannot', async () => {
    const sent: ComparisonRequest[] = []
    const start = async (r: ComparisonRequest) => (sent.push(r), null)
    const { rerender } = render(<ComparisonPanel limits={limits} comparison={[]} busy={false} startComparison={start} />)
    const options = () => [...(screen.getByLabelText('Comparison chaos') as HTMLSelectElement).options].map((o) => o.value)
    expect(options()).toEqual(['pause', 'redis-restart', 'none'])
    expect(screen.queryByText(/REDIS_URL/)).toBeNull()
    fireEvent.change(screen.getByLabelText('Comparison chaos'), { target: { value: 'redis-restart' } })
    // The server restarted with REDIS_URL set: the option goes, the reason comes, and the choice
    // made before is not sent (the server would refuse it, 422).
    rerender(<ComparisonPanel limits={{ ...limits, redisRestart: false }} comparison={[]} busy={false} startComparison={start} />)
    expect(options()).toEqual(['pause', 'none'])
    expect(screen.getByText(/Restart Redis is not offered: REDIS_URL is set/)).toBeTruthy()
    fireEvent.click(screen.getByRole('button', { name: 'Compare the three modes' }))
    await waitFor(() => expect(sent).toEqual([{ chaos: 'pause' }]))
    // Before the server's limits arrive nothing is known: not offered either.
    rerender(<ComparisonPanel limits={null} comparison={[]} busy={false} startComparison={start} />)
    expect(options()).toEqual(['pause', 'none'])
  })

  it('counts in its sentence what each run’s verdict counts, money mismatches included', () => {
    const withMoney = comparison.map((r) => (r.mode === 'lock' && r.result ? { ...r, result: { ...r.result, chargedUnpaidOrders: 3 } } : r))
    render(<ComparisonPanel limits={limits} comparison={withMoney} busy={false} />)
    expect(screen.getByTestId('proves').textContent).toMatch(/the lock alone 42 /)
  })

  it('says a fenced sale whose chaos refused nothing tested nothing', () => {
    const missed = [
      comparison[0],
      comparison[1],
      run({ id: 6, mode: 'fenced', comparison: 1, seed: 1001, result: result({ staleWritesRejected: 0 }) }),
    ].filter((r) => r !== undefined)
    render(<ComparisonPanel limits={limits} comparison={missed} busy={false} />)
    expect(screen.getByTestId('proves').textContent).toMatch(/the chaos missed the fenced sale/)
  })

  it('posts the chaos and, when given, the size and the segments; refuses while a sale runs', async () => {
    const sent: ComparisonRequest[] = []
    const { rerender } = render(
      <ComparisonPanel
        limits={limits}
        comparison={[]}
        busy={false}
        startComparison={async (r) => (sent.push(r), null)}
      />,
    )
    fireEvent.change(screen.getByLabelText('Comparison buyers'), { target: { value: '60' } })
    fireEvent.click(screen.getByRole('button', { name: 'Compare the three modes' }))
    await waitFor(() => expect(sent).toEqual([{ chaos: 'pause', buyers: 60 }]))
    expect([...(screen.getByLabelText('Comparison segments') as HTMLSelectElement).options].map((o) => o.value)).toEqual(['1', '2', '4', '8'])
    fireEvent.change(screen.getByLabelText('Comparison segments'), { target: { value: '4' } })
    fireEvent.click(screen.getByRole('button', { name: 'Compare the three modes' }))
    await waitFor(() => expect(sent).toEqual([{ chaos: 'pause', buyers: 60 }, { chaos: 'pause', buyers: 60, segments: 4 }]))
    rerender(<ComparisonPanel limits={limits} comparison={[]} busy={true} />)
    expect((screen.getByRole('button', { name: 'Compare the three modes' }) as HTMLButtonElement).disabled).toBe(true)
  })
})
