// Small statistics helpers: order statistics on sorted copies, never in place.

/** The q-quantile (0..1) by linear interpolation between closest ranks; NaN for no samples. */
export function quantile(samples: readonly number[] | Float64Array, q: number): number {
  if (samples.length === 0) return Number.NaN
  const sorted = Float64Array.from(samples).sort()
  const pos = (sorted.length - 1) * q
  const lo = Math.floor(pos)
  const hi = Math.ceil(pos)
  return sorted[lo]! + (sorted[hi]! - sorted[lo]!) * (pos - lo)
}

export function median(samples: readonly number[]): number {
  return quantile(samples, 0.5)
}

export function max(samples: readonly number[] | Float64Array): number {
  let m = Number.NEGATIVE_INFINITY
  for (const s of samples) if (s > m) m = s
  return samples.length === 0 ? Number.NaN : m
}

export function min(samples: readonly number[] | Float64Array): number {
  let m = Number.POSITIVE_INFINITY
  for (const s of samples) if (s < m) m = s
  return samples.length === 0 ? Number.NaN : m
}
