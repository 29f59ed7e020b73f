import { cleanup, render, screen, within } from '@testing-library/react'
import { afterEach, describe, expect, it } from 'vitest'
import { LocksTable } from '../../src/components/locks-table'
import type { HeldLockView } from '../../src/wire'

afterEach(cleanup)

const lock = (overrides: Partial<HeldLockView>): HeldLockView => ({
  source: 'live',
  resource: 'product:drop-1',
  instance: 'shop-1',
  pid: 4242,
  token: '1',
  ttlLeftMs: 850,
  leaseLive: true,
  ...overrides,
})

describe('LocksTable', () => {
  it('shows tokens above 2^53 digit for digit', () => {
    // 2^53 + 1 and 2^64 + 1: as JS numbers they would read 9007199254740992 and 18446744073709552000.
    render(
      <LocksTable
        locks={[
          lock({ resource: 'order:7', token: '9007199254740993', instance: 'shop-2', pid: 100 }),
          lock({ resource: 'order:8', token: '18446744073709551617', instance: 'shop-3', pid: 101 }),
        ]}
      />,
    )
    expect(screen.getByText('9007199254740993')).toBeTruthy()
    expect(screen.getByText('18446744073709551617')).toBeTruthy()
    expect(screen.queryByText('9007199254740992')).toBeNull()
  })

  it('orders the holders of one resource by token as bigints, not as text or doubles', () => {
    render(
      <LocksTable
        locks={[
          lock({ resource: 'product:flash-1', token: '9007199254740993', instance: 'shop-3' }),
          lock({ resource: 'product:flash-1', token: '9007199254740992', instance: 'shop-2', leaseLive: false, ttlLeftMs: 0 }),
          lock({ resource: 'product:flash-1', token: '10', instance: 'shop-1' }),
        ]}
      />,
    )
    const rows = within(screen.getByRole('table')).getAllByRole('row').slice(1)
    expect(rows.map((r) => r.querySelector('.token')?.textContent)).toEqual(['10', '9007199254740992', '9007199254740993'])
  })

  it('gives resource, holder, token and TTL left, and flags a holder whose lease is gone', () => {
    render(<LocksTable locks={[lock({ source: 'run-4', resource: 'order:12', instance: 'shop-2', pid: 777, token: '55', ttlLeftMs: 640 }), lock({ token: '56', leaseLive: false, ttlLeftMs: 0 })]} />)
    const [header, ...rows] = within(screen.getByRole('table')).getAllByRole('row')
    expect(within(header as HTMLElement).getAllByRole('columnheader').map((h) => h.textContent)).toEqual(['Shop', 'Resource', 'Holder', 'Token', 'TTL left'])
    const cells = (row: HTMLElement) => within(row).getAllByRole('cell').map((c) => c.textContent)
    expect(cells(rows[0] as HTMLElement)).toEqual(['live', 'product:drop-1', 'shop-1 pid 4242', '56', 'lease gone — holder frozen'])
    expect(cells(rows[1] as HTMLElement)).toEqual(['run #4', 'order:12', 'shop-2 pid 777', '55', '640 ms'])
  })

  it('says when no lock is held', () => {
    render(<LocksTable locks={[]} />)
    expect(screen.getByText(/No lock held/)).toBeTruthy()
  })
})
