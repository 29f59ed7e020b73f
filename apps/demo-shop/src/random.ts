/**
 * A seeded pseudo-random generator (mulberry32), so a run's choices — which instance a buyer
 * hits, which holder the chaos pauses, gateway latencies — follow from `--seed`. The timing of
 * real processes still varies from run to run; the seed fixes the choices, not the interleaving.
 */
export interface Random {
  /** A float in [0, 1). */
  next(): number
  /** An integer in [min, max], both included. */
  int(min: number, max: number): number
  /** One element of a non-empty array. */
  pick<T>(items: readonly T[]): T
}

/** A {@link Random} seeded with a 32-bit integer. */
export function seededRandom(seed: number): Random {
  let state = seed >>> 0
  const next = (): number => {
    state = (state + 0x6d2b79f5) >>> 0
    let t = state
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
  return {
    next,
    int: (min, max) => min + Math.floor(next() * (max - min + 1)),
    pick: <T>(items: readonly T[]): T => {
      if (items.length === 0) throw new RangeError('pick() needs at least one item')
      return items[Math.floor(next() * items.length)] as T
    },
  }
}
