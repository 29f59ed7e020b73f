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
    // Definitions on hover (SVG titles) and on tap (the details element).
    expect(screen.getByText('What the bars count')).toBeTruthy()
    expect(screen.getAllByText(/counted in the gateway's own ledger/).map((e) => e.tagName.toLowerCase())).toEqual([
      'title',
      'dd',
    ])
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
