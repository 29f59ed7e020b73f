/**
 * The one place that builds the shop's own Redis key names (the lock's keys are built by
 * `@fencelock/lock`). Everything of one run sits under `fencelock-shop:<runId>:`, so runs that
 * share a Redis (tests in parallel, a demo next to a test) never see each other.
 */

/** Lock names: one lock resource guards one row (docs/FENCING.md, "One lock per fenced row"). */
export const lockResource = {
  product: (sku: string): string => `product:${sku}`,
  order: (orderId: number): string => `order:${orderId}`,
  /** One segment of a product's segmented stock (segments.ts): each segment row its own lock and fence. */
  stockSegment: (sku: string, segment: number): string => `stock:${sku}:${segment}`,
} as const

/** The lock package's key prefix for a run: locks of different runs never contend. */
export function lockPrefixOf(runId: string): string {
  return `fencelock:${runId}:`
}

/** The shop's keys for one run. */
export function shopKeys(runId: string): { heldLocks: string } {
  const base = `fencelock-shop:${runId}:`
  return {
    /** Hash: `<resource> <token>` → JSON of the holder, for `GET /api/state`. */
    heldLocks: `${base}held`,
  }
}

/** Run ids go into key names and schema names: letters, digits, `_` and `-` only. */
export const RUN_ID_PATTERN = /^[A-Za-z0-9_-]{1,40}$/
