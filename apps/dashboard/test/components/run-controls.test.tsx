import { cleanup, fireEvent, render, screen, waitFor } from '@testing-library/react'
import { afterEach, describe, expect, it, vi } from 'vitest'
import { RunControls, type StartRun } from '../../src/components/run-controls'
import type { RunLimits } from '../../src/wire'
import { run } from './fixtures'

afterEach(cleanup)

const limits: RunLimits = { buyers: { min: 10, max: 2000, default: 300 }, stock: { min: 1, max: 500, default: 30 }, instances: 3, compare: { buyers: 1000, stock: 100 }, segments: [1, 2, 4, 8], redisRestart: false }

describe('RunControls', () => {
  it('labels every control and sends the chosen mode, chaos, sizes and segments', async () => {
    const startRun = vi.fn<StartRun>(async () => null)
    render(<RunControls limits={limits} activeRun={null} startRun={startRun} />)
    fireEvent.change(screen.getByLabelText('Mode'), { target: { value: 'unsafe' } })
    fireEvent.change(screen.getByLabelText('Chaos'), { target: { value: 'none' } })
    fireEvent.change(screen.getByLabelText('Buyers'), { target: { value: '120' } })
    fireEvent.change(screen.getByLabelText('Segments'), { target: { value: '4' } })
    fireEvent.click(screen.getByRole('button', { name: 'Start the sale' }))
    await waitFor(() => expect(startRun).toHaveBeenCalledWith({ mode: 'unsafe', chaos: 'none', buyers: 120, stock: 30, segments: 4 }))
    expect(screen.queryByRole('alert')).toBeNull()
  })

  it('offers redis-restart only where the demo owns a Redis, and says why not', () => {
    const { rerender } = render(<RunControls limits={limits} activeRun={null} startRun={async () => null} />)
    expect(screen.queryByRole('option', { name: /Restart Redis/ })).toBeNull()
    expect(screen.getByText(/Restart Redis is not offered: REDIS_URL is set/)).toBeTruthy()
    rerender(<RunControls limits={{ ...limits, redisRestart: true }} activeRun={null} startRun={async () => null} />)
    expect(screen.getByRole('option', { name: 'Restart Redis' })).toBeTruthy()
    expect(screen.queryByText(/REDIS_URL/)).toBeNull()
  })

  it('shows why the shop refused a run', async () => {
    render(<RunControls limits={limits} activeRun={null} startRun={async () => 'run #4 is still going on; one run at a time'} />)
    fireEvent.click(screen.getByRole('button', { name: 'Start the sale' }))
    expect((await screen.findByRole('alert')).textContent).toBe('Not started: run #4 is still going on; one run at a time')
  })

  it('shows the progress of the run going on and cannot start another', () => {
    render(<RunControls limits={limits} activeRun={run({ id: 4, status: 'running', phase: 'selling', buyers: 200, buyersDone: 50, result: null })} startRun={async () => null} />)
    expect((screen.getByRole('button') as HTMLButtonElement).disabled).toBe(true)
    const bar = screen.getByRole('progressbar', { name: 'Flash sale #4 progress' }) as HTMLProgressElement
    expect([bar.value, bar.max]).toEqual([50, 200])
    expect(screen.getByText(/selling: 50 of 200 buyers done/)).toBeTruthy()
    expect(screen.getByText(/paid 20 · 3 pauses$/)).toBeTruthy()
  })

  it('says 1 pause, not 1 pauses', () => {
    render(<RunControls limits={limits} activeRun={run({ id: 5, status: 'running', phase: 'selling', chaosEvents: 1, result: null })} startRun={async () => null} />)
    expect(screen.getByText(/ · 1 pause$/)).toBeTruthy()
  })
})
