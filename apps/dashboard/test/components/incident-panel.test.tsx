import { cleanup, fireEvent, render, screen } from '@testing-library/react'
import { afterEach, describe, expect, it, vi } from 'vitest'
import { ChargedTwicePanel, type LoadChargedTwice } from '../../src/components/charged-twice-panel'
import { defaultIncidentRun, IncidentPanel, type LoadIncident } from '../../src/components/incident-panel'
import { RunsComparison } from '../../src/components/runs-comparison'
import type { IncidentAnswer } from '../../src/wire'
import { result, run } from './fixtures'

afterEach(cleanup)

// The shape the server sends for a fenced sale with a rejection (a real sale's, cut short).
const answer: IncidentAnswer = {
  reason: null,
  incident: {
    runId: 2,
    mode: 'fenced',
    resource: 'order:1',
    operation: 'charge',
    holderA: { instance: 'shop-1', token: '1795761712563429' },
    holderB: { instance: 'shop-3', token: '1795761713576898' },
    ttlMs: 1000,
    ending: 'refused',
    summary:
      'Fencing held: shop-1’s lease ran out while it was frozen, shop-3 took over with token 1795761713576898, and when shop-1 woke up the database refused its write.',
    pausesOnHolders: 4,
    steps: [
      {
        atMs: 697,
        actor: 'chaos',
        instance: 'shop-1',
        token: '1795761712563429',
        kind: 'frozen',
        outcome: 'ok',
        text: 'shop-1 is frozen (SIGSTOP)',
      },
      {
        atMs: 1602,
        actor: 'A',
        instance: 'shop-1',
        token: '1795761712563429',
        kind: 'lease-expired',
        outcome: 'ok',
        text: 'shop-1’s lease runs out',
      },
      {
        atMs: 1616,
        actor: 'B',
        instance: 'shop-3',
        token: '1795761713576898',
        kind: 'acquired',
        outcome: 'ok',
        text: 'shop-3 takes order:1',
      },
      {
        atMs: 1700,
        actor: 'B',
        instance: 'shop-3',
        token: '1795761713576898',
        kind: 'charge',
        outcome: 'replayed',
        text: 'the gateway answers from the idempotency record',
      },
      {
        atMs: 3315,
        actor: 'A',
        instance: 'shop-1',
        token: '1795761712563429',
        kind: 'write',
        outcome: 'refused',
        text: 'the database refuses shop-1’s write',
      },
    ],
  },
}

describe('IncidentPanel', () => {
  it('draws the incident of a finished sale as a timeline, with tokens, times and instances', async () => {
    const load = vi.fn<LoadIncident>(async () => answer)
    render(<IncidentPanel runs={[run({ id: 2 })]} runId={2} load={load} />)
    expect(await screen.findByText(/^Fencing held/)).toBeTruthy()
    expect(load).toHaveBeenCalledWith(2)
    const steps = screen.getAllByRole('listitem')
    expect(steps.map((s) => s.getAttribute('data-kind'))).toEqual([
      'frozen',
      'lease-expired',
      'acquired',
      'charge',
      'write',
    ])
    expect(steps[4]?.textContent).toMatch(/^3\D?315 ms/)
    expect(steps[4]?.textContent).toContain('A · shop-1 · token 1795761712563429')
    expect(steps[4]?.textContent).toContain('refused')
  })

  it('says why there is none, and waits for a running sale', async () => {
    render(
      <IncidentPanel
        runs={[run({ id: 3, mode: 'lock' })]}
        runId={3}
        load={async () => ({ incident: null, reason: 'No pause landed on a lock holder in this sale.' })}
      />,
    )
    expect(await screen.findByText('No pause landed on a lock holder in this sale.')).toBeTruthy()
    cleanup()
    const load = vi.fn<LoadIncident>(async () => answer)
    render(<IncidentPanel runs={[run({ id: 4, status: 'running', result: null })]} runId={4} load={load} />)
    expect(screen.getByText(/still running/)).toBeTruthy()
    expect(load).not.toHaveBeenCalled()
  })

  it('draws the newest finished sale with a lock by default', () => {
    expect(
      defaultIncidentRun([
        run({ id: 5, status: 'running' }),
        run({ id: 4, mode: 'unsafe' }),
        run({ id: 3, mode: 'lock' }),
      ]),
    ).toBe(3)
  })
})

describe('charged twice, drilled down', () => {
  it('a count above 0 in the runs table opens the orders, each charge with its instance and token', async () => {
    const opened = vi.fn()
    render(
      <RunsComparison
        runs={[run({ id: 7, mode: 'lock', result: result({ doubleChargedOrders: 2, extraCharges: 2 }) })]}
        onChargedTwice={opened}
      />,
    )
    fireEvent.click(screen.getByRole('button', { name: '2' }))
    expect(opened).toHaveBeenCalledWith(7)
    cleanup()

    const load: LoadChargedTwice = async () => ({
      runId: 7,
      total: 1,
      orders: [
        {
          orderId: 60,
          status: 'paid',
          amountCents: 4999,
          fenceToken: '0',
          charges: [
            {
              chargeId: 'ch_b',
              atMs: 8880,
              amountCents: 4999,
              idempotencyKey: null,
              instance: 'shop-4',
              token: '1795761747738875',
              paymentRecorded: true,
            },
            {
              chargeId: 'ch_a',
              atMs: 10356,
              amountCents: 4999,
              idempotencyKey: null,
              instance: 'shop-2',
              token: '1795761746736493',
              paymentRecorded: true,
            },
          ],
          payments: [],
        },
      ],
    })
    const close = vi.fn()
    render(<ChargedTwicePanel run={run({ id: 7, mode: 'lock' })} onClose={close} load={load} />)
    expect(await screen.findByText('Order #60')).toBeTruthy()
    const charges = screen
      .getAllByRole('listitem')
      .filter((li) => li.textContent?.includes('ms: charge ch_') && !li.textContent.startsWith('Order'))
    expect(charges.map((c) => c.textContent)).toEqual([
      expect.stringContaining('by shop-4 with token 1795761747738875'),
      expect.stringContaining('by shop-2 with token 1795761746736493'),
    ])
    fireEvent.click(screen.getByRole('button', { name: /Close/ }))
    expect(close).toHaveBeenCalled()
  })
})
