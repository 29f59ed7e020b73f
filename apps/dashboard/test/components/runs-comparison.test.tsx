import { cleanup, render, screen, within } from '@testing-library/react'
import { afterEach, describe, expect, it } from 'vitest'
import { RunsComparison } from '../../src/components/runs-comparison'
import { result, run } from './fixtures'

afterEach(cleanup)

const cell = (row: HTMLElement, col: string) => row.querySelector(`[data-col="${col}"]`) as HTMLElement

describe('RunsComparison', () => {
  it('puts the runs side by side: mode, chaos, sold, oversold, charged twice at the gateway, charges and payments, stale writes rejected', () => {
    render(
      <RunsComparison
        runs={[
          run({ id: 3, mode: 'unsafe', chaos: 'none', stock: 10, result: result({ remainingStock: 4, sold: 57, oversold: 47, doubleChargedOrders: 31, extraCharges: 33, overchargedCents: 33 * 4_999, lostUpdates: 51, gatewayCharges: 90, payments: 90, paidOrders: 57, staleWritesRejected: 0, expiredLocks: 0, acquireP99Ms: null }) }),
          run({ id: 2, mode: 'lock', chaos: 'pause', result: result({ sold: 21, oversold: 1, doubleChargedOrders: 1, extraCharges: 1, lostUpdates: 1, gatewayCharges: 22, payments: 22, paidOrders: 21, staleWritesRejected: 0, expiredLocks: 2, acquireP99Ms: 2500 }) }),
          run({ id: 1 }),
        ]}
      />,
    )
    const table = screen.getByRole('table')
    const headers = within(table).getAllByRole('columnheader').map((h) => h.textContent)
    expect(headers).toEqual(['#', 'Mode', 'Chaos', 'Sold / stock', 'Oversold', 'Charged twice (gateway)', 'Lost updates', 'Overcharged', 'Charges (gateway ledger)', 'Payments (shop)', 'Stale writes rejected', 'Chaos that landed', 'Verdict', 'Time'])
    const rows = within(table).getAllByRole('row').slice(1)
    expect(rows.map((r) => r.getAttribute('data-run-id'))).toEqual(['3', '2', '1'])
    const [unsafe, lock, fenced] = rows as [HTMLElement, HTMLElement, HTMLElement]
    expect([cell(unsafe, 'mode').textContent, cell(unsafe, 'chaos').textContent, cell(unsafe, 'sold').textContent]).toEqual(['No lock', 'none', '57 / 10'])
    expect([cell(unsafe, 'oversold').textContent, cell(unsafe, 'charged-twice').textContent, cell(unsafe, 'stale-rejected').textContent]).toEqual(['47', '31', '0'])
    expect(cell(unsafe, 'oversold').className).toContain('cell-bad')
    expect(cell(unsafe, 'charged-twice').className).toContain('cell-bad')
    expect(cell(unsafe, 'charged-twice').getAttribute('data-label')).toBe('Charged twice (gateway)')
    expect([cell(lock, 'mode').textContent, cell(lock, 'chaos').textContent, cell(lock, 'oversold').textContent]).toEqual(['Lock only', 'pause', '1'])
    expect([cell(lock, 'charged-twice').textContent, cell(lock, 'gateway-charges').textContent, cell(lock, 'payments').textContent]).toEqual(['1', '22', '22'])
    // Charges and payments are shown, not judged: neither is marked by itself.
    expect(cell(lock, 'gateway-charges').className).not.toMatch(/cell-(bad|ok)/)
    expect(
      [cell(fenced, 'mode'), cell(fenced, 'oversold'), cell(fenced, 'charged-twice'), cell(fenced, 'gateway-charges'), cell(fenced, 'payments'), cell(fenced, 'stale-rejected')].map((c) => c.textContent),
    ).toEqual(['Lock + fencing', '0', '0', '20', '20', '2'])
    expect(cell(fenced, 'oversold').className).toContain('cell-ok')
    expect(cell(fenced, 'charged-twice').className).toContain('cell-ok')
    expect(cell(fenced, 'status').textContent).toBe('21.4 s')
    // The chaos that landed, and what it proved, per run.
    expect(cell(unsafe, 'chaos-landed').textContent).toBe('no chaos')
    expect(cell(lock, 'chaos-landed').textContent).toBe('3 pauses · 2 leases expired')
    expect(cell(fenced, 'chaos-landed').textContent).toBe('3 pauses · 3 leases expired · 2 stale refused')
    expect([cell(unsafe, 'verdict').textContent, cell(lock, 'verdict').textContent, cell(fenced, 'verdict').textContent]).toEqual(['✗ Violated (129)', '✗ Violated (3)', '✓ Fencing held (2 stale refused)'])
    // Money overcharged at the gateway, in dollars.
    expect(cell(unsafe, 'overcharged').textContent).toBe('$1,649.67')
  })

  it('marks a fenced sale whose chaos refused nothing as untested, never healthy', () => {
    render(<RunsComparison runs={[run({ id: 7, result: result({ staleWritesRejected: 0 }) }), run({ id: 6, chaosEvents: 0, result: result({ staleWritesRejected: 0 }) })]} />)
    const [missed, noChaos] = within(screen.getByRole('table')).getAllByRole('row').slice(1) as [HTMLElement, HTMLElement]
    expect(cell(missed, 'verdict').textContent).toBe('The chaos missed — nothing was tested')
    expect(cell(noChaos, 'verdict').textContent).toBe('The chaos missed — nothing was tested')
    expect(screen.queryByText(/Healthy/)).toBeNull()
  })

  it('shows the money overcharged and the comparison a run belongs to', () => {
    render(<RunsComparison runs={[run({ id: 9, mode: 'lock', comparison: 2, seed: 1002, result: result({ doubleChargedOrders: 3, extraCharges: 4, overchargedCents: 4 * 4_999 }) })]} />)
    const [row] = within(screen.getByRole('table')).getAllByRole('row').slice(1) as [HTMLElement]
    expect(cell(row, 'overcharged').textContent).toBe('$199.96')
    expect(cell(row, 'overcharged').className).toContain('cell-bad')
    expect(row.querySelector('th')?.textContent).toBe('9 (comparison 2, seed 1002)')
  })

  it('shows a run going on without numbers yet, and a failed run with its reason', () => {
    render(
      <RunsComparison
        runs={[run({ id: 5, status: 'running', phase: 'selling', result: null, durationMs: null }), run({ id: 4, status: 'failed', result: null, error: 'instances not ready within 60000 ms' })]}
      />,
    )
    const [running, failed] = within(screen.getByRole('table')).getAllByRole('row').slice(1) as [HTMLElement, HTMLElement]
    expect(cell(running, 'oversold').textContent).toBe('–')
    expect(cell(running, 'status').textContent).toBe('running · selling')
    expect(cell(failed, 'status').textContent).toContain('instances not ready')
  })

  it('makes each count of the chaos agree with its noun: 1 pause, 1 lease, 1 kill, 1 Redis restart', () => {
    render(
      <RunsComparison
        runs={[
          run({ id: 3, chaos: 'pause', chaosEvents: 1, result: result({ expiredLocks: 1, staleWritesRejected: 1 }) }),
          run({ id: 2, mode: 'lock', chaos: 'kill', chaosEvents: 1, result: result({ expiredLocks: 0 }) }),
          run({ id: 1, mode: 'lock', chaos: 'redis-restart', chaosEvents: 1, result: result({ expiredLocks: 2 }) }),
        ]}
      />,
    )
    const landed = within(screen.getByRole('table'))
      .getAllByRole('row')
      .slice(1)
      .map((r) => cell(r, 'chaos-landed').textContent)
    expect(landed).toEqual(['1 pause · 1 lease expired · 1 stale refused', '1 kill · 0 leases expired', '1 Redis restart · 2 leases expired'])
  })

  it('counts money the ledger and the orders disagree on in a run’s verdict', () => {
    render(<RunsComparison runs={[run({ id: 4, mode: 'lock', chaos: 'none', result: result({ paidUnchargedOrders: 1, chargedUnpaidOrders: 2 }) })]} />)
    const [row] = within(screen.getByRole('table')).getAllByRole('row').slice(1) as [HTMLElement]
    expect(cell(row, 'verdict').textContent).toBe('✗ Violated (3)')
  })

  it('invites a first run', () => {
    render(<RunsComparison runs={[]} />)
    expect(screen.getByText(/No run yet/)).toBeTruthy()
  })
})
