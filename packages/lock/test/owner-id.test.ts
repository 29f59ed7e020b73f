import { describe, expect, it } from 'vitest'
import { newOwnerId } from '../src/owner-id.js'

describe('newOwnerId', () => {
  it('is 128 bits as 32 hex characters, and never repeats across pool refills', () => {
    const ids = Array.from({ length: 5_000 }, () => newOwnerId())
    for (const id of ids) expect(id).toMatch(/^[0-9a-f]{32}$/)
    expect(new Set(ids).size).toBe(ids.length)
  })

  it('looks random: every hex digit shows up about equally often', () => {
    const counts = new Map<string, number>()
    for (let i = 0; i < 2_000; i++) for (const c of newOwnerId()) counts.set(c, (counts.get(c) ?? 0) + 1)
    // 64 000 digits, 4 000 expected each; a counter or a timestamp would be far off.
    expect(counts.size).toBe(16)
    for (const n of counts.values()) expect(Math.abs(n - 4_000)).toBeLessThan(400)
  })
})
