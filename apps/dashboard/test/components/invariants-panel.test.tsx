import { cleanup, render, screen, within } from '@testing-library/react'
import { afterEach, describe, expect, it } from 'vitest'
import { InvariantsPanel } from '../../src/components/invariants-panel'
import { invariants } from './fixtures'

afterEach(cleanup)

const card = (name: RegExp) => screen.getByRole('region', { name })

describe('InvariantsPanel', () => {
  it('says healthy when nothing is oversold, charged twice or lost', () => {
    render(<InvariantsPanel invariants={[invariants()]} />)
    const live = card(/Live shop/)
    expect(within(live).getByRole('status', { name: 'Status: healthy' }).textContent).toContain('Healthy')
    expect(within(live).getByText('Stock left').nextElementSibling?.textContent).toBe('12 of 60')
    expect(within(live).getByText('Sold').nextElementSibling?.textContent).toBe('48')
    expect(within(live).getByText(/counted now: stock and orders from the shop's database, charges from the gateway's ledger/)).toBeTruthy()
  })

  it('counts double charges in the gateway ledger, and shows its charges next to the payments the shop recorded', () => {
    // A holder charged, froze, and its payment row was refused; a newer holder charged again
    // and recorded it: one payment in the shop, two charges at the gateway.
    render(<InvariantsPanel invariants={[invariants({ source: 'run-4', title: 'Flash sale #4', mode: 'lock', kind: 'final', doubleChargedOrders: 1, extraCharges: 1, gatewayCharges: 21, payments: 20, paidOrders: 20 })]} />)
    const run = card(/Flash sale #4/)
    const charged = within(run).getByText('Charged twice (gateway)')
    expect(charged.nextElementSibling?.textContent).toBe('1')
    expect(charged.closest('.kv')?.className).toContain('kv-bad')
    const money = within(run).getByLabelText('Charges and payments')
    expect(within(money).getByText('Charges (gateway ledger)').nextElementSibling?.textContent).toBe('21')
    expect(within(money).getByText('Payments (shop)').nextElementSibling?.textContent).toBe('20')
    expect(within(money).getByText('Paid orders (shop)').nextElementSibling?.textContent).toBe('20')
    // Neither is a violation by itself: the card is violated by the charge counted twice.
    expect(within(money).getByText('Charges (gateway ledger)').closest('.kv')?.className).not.toContain('kv-bad')
    expect(within(run).getByRole('status').getAttribute('aria-label')).toBe('Status: violated (1)')
    expect(screen.queryByText('Double charges')).toBeNull()
  })

  it('says how many extra charges when an order was charged more than twice', () => {
    render(<InvariantsPanel invariants={[invariants({ source: 'run-5', title: 'Flash sale #5', mode: 'unsafe', doubleChargedOrders: 2, extraCharges: 5 })]} />)
    expect(within(card(/Flash sale #5/)).getByText('Charged twice (gateway)').nextElementSibling?.textContent).toBe('2 5 extra charges')
  })

  it.each([
    ['oversold', { oversold: 3 }, 'Oversold'],
    ['orders charged twice at the gateway', { doubleChargedOrders: 1, extraCharges: 1 }, 'Charged twice (gateway)'],
    ['lost updates', { lostUpdates: 2 }, 'Lost updates'],
  ] as const)('says violated on %s alone, and marks that count', (_name, bad, label) => {
    render(<InvariantsPanel invariants={[invariants({ source: 'run-2', title: 'Flash sale #2', mode: 'lock', kind: 'final', ...bad })]} />)
    const run = card(/Flash sale #2/)
    expect(within(run).getByRole('status').getAttribute('aria-label')).toMatch(/^Status: violated/)
    expect(within(run).getByRole('status').textContent).toContain('Violated')
    expect(within(run).getByText(label).closest('.kv')?.className).toContain('kv-bad')
    expect(within(run).getByText(/final, counted after the run/)).toBeTruthy()
    expect(within(run).getByText(/expected without fencing/)).toBeTruthy()
  })

  it('shows each shop on its own card with its own status', () => {
    render(<InvariantsPanel invariants={[invariants(), invariants({ source: 'run-3', title: 'Flash sale #3 · unsafe', mode: 'unsafe', oversold: 41 })]} />)
    expect(within(card(/Live shop/)).getByRole('status').textContent).toContain('Healthy')
    expect(within(card(/Flash sale #3/)).getByRole('status').textContent).toContain('Violated')
    expect(within(card(/Flash sale #3/)).getByText('Oversold').nextElementSibling?.textContent).toBe('41')
  })

  it('waits for the first counts', () => {
    render(<InvariantsPanel invariants={[]} />)
    expect(screen.getByText(/Waiting for the shop/)).toBeTruthy()
  })
})
