/**
 * Segmented stock (issue 23): a hot product's stock split over N `StockSegment` rows, each under
 * its own lock resource (`stock:<sku>:<segment>`) and its own fence, so up to N purchases of the
 * one product run at once instead of queueing behind one lock.
 *
 * A buyer starts at a random segment and goes round the ring: each segment gets one try of its
 * lock (`waitMs: 0`); a busy one and an empty one are passed over. When a round found every
 * segment that still has stock busy, the next round waits (the normal wait) on each of them in
 * turn. The product is sold out when every segment was found empty. A segment found empty stays
 * empty for the buyer (stock only goes down, but for the reconciler's give-back of a cancelled
 * order's unit: a buyer may then say sold out while one unit is back, as with one segment).
 *
 * Each segment is a fenced row of its own: its lock's token guards it, as `product:<sku>` guards
 * the product's own stock. A product without segment rows sells from `Product.stock` as before.
 */
import { LockTimeoutError } from '@fencelock/lock'
import type { PrismaClient } from '../../../generated/prisma/client.js'
import type { Protection } from './protection.js'
import { lockResource } from './shop-keys.js'

/** One segment row of a product. */
export interface SegmentRef {
  /** The row's id (its fenced key). */
  readonly id: number
  /** Its number, 0..N-1 (the lock name's last part). */
  readonly segment: number
}

/** The product's segments, by number (empty: the product is not segmented). */
export async function loadSegments(db: Pick<PrismaClient, 'stockSegment'>, productId: number): Promise<SegmentRef[]> {
  return db.stockSegment.findMany({
    where: { productId },
    orderBy: { segment: 'asc' },
    select: { id: true, segment: true },
  })
}

/** What one try of one segment did. */
export type SegmentAttempt<T> = { readonly kind: 'sold'; readonly value: T } | { readonly kind: 'empty' }

/**
 * Sells from `segments` as the module's comment says: `attempt(segment, waitMs)` runs the sale
 * under the segment's protection with that wait (`0`: one try; `undefined`: the protection's
 * own wait) and throws LockTimeoutError when the lock stayed held.
 * @returns the sold value, or `'sold-out'` when every segment was found empty.
 */
export async function sellFromSegments<T>(
  segments: readonly SegmentRef[],
  random: () => number,
  attempt: (segment: SegmentRef, waitMs: number | undefined) => Promise<SegmentAttempt<T>>,
): Promise<T | 'sold-out'> {
  const n = segments.length
  const start = Math.min(n - 1, Math.floor(random() * n))
  const empty = new Set<number>()
  for (let wait = false; ; wait = true) {
    for (let i = 0; i < n; i++) {
      const segment = segments[(start + i) % n] as SegmentRef
      if (empty.has(segment.segment)) continue
      let result: SegmentAttempt<T>
      try {
        result = await attempt(segment, wait ? undefined : 0)
      } catch (error) {
        // Busy on a one-try round: the next segment. A wait that timed out is the caller's error.
        if (!wait && error instanceof LockTimeoutError) continue
        throw error
      }
      if (result.kind === 'sold') return result.value
      empty.add(segment.segment)
    }
    if (empty.size === n) return 'sold-out'
  }
}

/**
 * Returns `quantity` units of a cancelled order to its segment, under the segment's lock (the
 * reconciler's give-back; the fence is the segment's, as the purchase that took them).
 */
export async function giveBackToSegment(
  protection: Protection,
  db: Pick<PrismaClient, 'stockSegment'>,
  sku: string,
  productId: number,
  segment: number,
  quantity: number,
): Promise<void> {
  const found = await db.stockSegment.findUnique({
    where: { productId_segment: { productId, segment } },
    select: { id: true },
  })
  if (found === null) return
  const row = { model: 'StockSegment', where: { id: found.id } } as const
  await protection.run(lockResource.stockSegment(sku, segment), (guard) =>
    guard.transaction(row, (tx) =>
      tx.stockSegment.update({ where: { id: found.id }, data: { stock: { increment: quantity } } }),
    ),
  )
}
