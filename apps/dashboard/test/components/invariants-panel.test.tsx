import { cleanup, render, screen, within } from '@testing-library/react'
import { afterEach, describe, expect, it } from 'vitest'
import { InvariantsPanel } from '../../src/components/invariants-panel'
import { invariants } from './fixtures'

afterEach(cleanup)

const card = (name: RegExp) => screen.getByRole('region', { name })

describe('InvariantsPanel', () => {
  it('says healthy when nothing is oversold, double-charged or lost', () => {
    render(<InvariantsPanel invariants={[invariants()]} />)
    const live = card(/Live shop/)
    expect(within(live).getByRole('status', { name: 'Status: healthy' }).textContent).toContain('Healthy')
    expect(within(live).getByText('Stock left').nextElementSibling?.textContent).toBe('12 of 60')
    expect(within(live).getByText('Sold').nextElementSibling?.textContent).toBe('48')
  })

  it.each([
    ['oversold', { oversold: 3 }, 'Oversold'],
    ['double charges', { doubleCharges: 1 }, 'Double charges'],
    ['lost updates', { lostUpdates: 2 }, 'Lost updates'],
  ] as const)('says violated on %s alone, and marks that count', (_name, bad, label) => {
    render(<InvariantsPanel invariants={[invariants({ source: 'run-2', title: 'Flash sale #2', mode: 'lock', kind: 'final', ...bad })]} />)
    const run = card(/Flash sale #2/)
    expect(within(run).getByRole('status').getAttribute('aria-label')).toMatch(/^Status: violated/)
    expect(within(run).getByRole('status').textContent).toContain('Violated')
    expect(within(run).getByText(label).closest('.kv')?.className).toContain('kv-bad')
    expect(within(run).getByText(/final, counted from the database after the run/)).toBeTruthy()
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
