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

  it('counts an order left pending with no payment (its instance died after the purchase) as a violation until the reconciler cancels it; a shop that does not count them shows no tile', () => {
    render(<InvariantsPanel invariants={[invariants({ unsettledOrders: 1 }), invariants({ source: 'run-6', title: 'Flash sale #6', mode: 'fenced', kind: 'final', unsettledOrders: 0 })]} />)
    const live = card(/Live shop/)
    const tile = within(live).getByText('Ordered, never paid').closest('.kv') as HTMLElement
    expect(tile.className).toContain('kv-bad')
    expect(tile.textContent).toContain('until the reconciler cancels it')
    expect(within(live).getByRole('status').getAttribute('aria-label')).toBe('Status: violated (1)')
    expect(within(card(/Flash sale #6/)).getByText('Ordered, never paid').closest('.kv')?.className).not.toContain('kv-bad')
    cleanup()
    render(<InvariantsPanel invariants={[invariants()]} />)
    expect(screen.queryByText('Ordered, never paid')).toBeNull()
  })

  it('shows each shop on its own card with its own status', () => {
    render(<InvariantsPanel invariants={[invariants(), invariants({ source: 'run-3', title: 'Flash sale #3 · unsafe', mode: 'unsafe', oversold: 41 })]} />)
    expect(within(card(/Live shop/)).getByRole('status').textContent).toContain('Healthy')
    expect(within(card(/Flash sale #3/)).getByRole('status').textContent).toContain('Violated')
    expect(within(card(/Flash sale #3/)).getByText('Oversold').nextElementSibling?.textContent).toBe('41')
  })

  it('does not call a live charge in flight a violation when the shop does not say which are in flight: shown apart, with why', () => {
    // The gateway charged, the holder is recording the payment: the shop's count says "charged, not paid 1".
    render(<InvariantsPanel invariants={[invariants({ chargedUnpaidOrders: 1, gatewayCharges: 46 })]} />)
    const live = card(/Live shop/)
    expect(within(live).getByRole('status').getAttribute('aria-label')).toBe('Status: healthy')
    const tile = within(live).getByText('Charged, not paid').closest('.kv') as HTMLElement
    expect(tile.className).not.toContain('kv-bad')
    expect(tile.className).toContain('kv-warn')
    expect(tile.querySelector('dd')?.textContent).toBe('1 in flight, or not yet reconciled')
    expect(live.querySelectorAll('.kv-bad')).toHaveLength(0)
    expect(within(live).queryByText('Charges in flight')).toBeNull()
  })

  it('shows the charges in flight the shop gives apart, and then calls a charged-not-paid order what it is', () => {
    const { rerender } = render(<InvariantsPanel invariants={[invariants({ chargesInFlight: 1, gatewayCharges: 46 })]} />)
    let live = card(/Live shop/)
    expect(within(live).getByRole('status').getAttribute('aria-label')).toBe('Status: healthy')
    const money = within(live).getByLabelText('Charges and payments')
    expect(within(money).getByText('Charges in flight').nextElementSibling?.textContent).toBe('1 being recorded')
    expect(live.querySelectorAll('.kv-bad, .kv-warn')).toHaveLength(0)
    // Settled and still not paid: a violation, marked, in the status.
    rerender(<InvariantsPanel invariants={[invariants({ chargesInFlight: 0, chargedUnpaidOrders: 1, gatewayCharges: 46 })]} />)
    live = card(/Live shop/)
    expect(within(live).getByRole('status').getAttribute('aria-label')).toBe('Status: violated (1)')
    expect(within(live).getByText('Charged, not paid').closest('.kv')?.className).toContain('kv-bad')
  })

  it.each([
    ['charged, not paid', { chargedUnpaidOrders: 2 }, 'Charged, not paid', 2],
    ['paid, not charged', { paidUnchargedOrders: 1 }, 'Paid, not charged', 1],
    ['charged another amount', { amountMismatchOrders: 1 }, 'Charged another amount', 1],
    ['charges of no order', { unmatchedCharges: 3 }, 'Charges of no order', 3],
  ] as const)('says violated on money after a run — %s — never healthy beside a red count', (_name, bad, label, n) => {
    render(<InvariantsPanel invariants={[invariants({ source: 'run-6', title: 'Flash sale #6', kind: 'final', chaos: 'none', ...bad })]} />)
    const run = card(/Flash sale #6/)
    expect(within(run).getByRole('status').getAttribute('aria-label')).toBe(`Status: violated (${n})`)
    expect(within(run).getByText(label).closest('.kv')?.className).toContain('kv-bad')
  })

  it('waits for the first counts', () => {
    render(<InvariantsPanel invariants={[]} />)
    expect(screen.getByText(/Waiting for the shop/)).toBeTruthy()
  })
})
