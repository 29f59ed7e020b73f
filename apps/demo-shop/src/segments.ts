/**
 * Segmented stock (issue 23): a hot product's stock split over N `StockSegment` rows, each under
 * its own lock resource (`stock:<sku>:<segment>`) and its own fence, so up to N purchases of the
 * one product run at once instead of queueing behind one lock.
 *
 * A buyer starts at a random segment and goes round the ring: each segment gets one try of its
 * lock (`waitMs: 0`); an empty one is passed over, and so are busy ones, up to
 * {@link PROBES_BEFORE_RACE} of them. Then the buyer waits on every segment not found empty at once
 * (a race: one acquire per segment, the normal wait, one AbortController; each acquire's first
 * try takes a free segment at once): the first holder claims the sale and aborts the other waits;
 * a racer granted before the abort landed sells nothing and releases at once. Waiting on one
 * segment in turn kept a buyer queued behind a slow holder while another segment freed; trying
 * every busy segment once before the race cost 7-8 failed acquires (Redis round trips) per unit
 * sold at 8 segments, each tried again by the race's first tries (bench:shop, docs/BENCHMARKS.md).
 * A claimed segment found empty ends the race; the buyer goes on with it known empty. The product
 * is sold out when every segment was found empty. A segment found empty stays empty for the buyer (stock only
 * goes down, but for the reconciler's give-back of a cancelled order's unit: a buyer may then say
 * sold out while one unit is back, as with one segment).
 *
 * Each segment is a fenced row of its own: its lock's token guards it, as `product:<sku>` guards
 * the product's own stock. A product without segment rows sells from `Product.stock` as before.
 */
import { LockAbortedError, LockTimeoutError } from '@fencelock/lock'
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

/** How one try of one segment is made. */
export interface SegmentTry {
  /** `0`: one try (LockTimeoutError when held); `undefined`: the protection's own wait. */
  readonly waitMs: number | undefined
  /** Aborts the wait (LockAbortedError): another segment of the race sold. Absent on one-try rounds. */
  readonly signal?: AbortSignal
  /**
   * Called under the segment's lock as soon as it is granted, before the segment is read: true for
   * the one try that may sell; false when another segment of the race claimed the sale first —
   * then read and sell nothing (the lock is released).
   */
  readonly claim: () => boolean
}

/** What one try of one segment did. */
export type SegmentAttempt<T> =
  | { readonly kind: 'sold'; readonly value: T }
  | { readonly kind: 'empty' }
  /** Granted after another segment of the race had claimed the sale: nothing read or sold. */
  | { readonly kind: 'yielded' }

/** Busy segments a buyer tries once (`waitMs: 0`) before it waits on all the segments left. */
export const PROBES_BEFORE_RACE = 2

const alwaysClaim = () => true

/**
 * Sells from `segments` as the module's comment says: `attempt(segment, how)` runs the sale under
 * the segment's protection with `how.waitMs` and `how.signal`, and throws LockTimeoutError when the
 * lock stayed held (LockAbortedError when the signal aborted the wait).
 * @returns the sold value, or `'sold-out'` when every segment was found empty.
 */
export async function sellFromSegments<T>(
  segments: readonly SegmentRef[],
  random: () => number,
  attempt: (segment: SegmentRef, how: SegmentTry) => Promise<SegmentAttempt<T>>,
): Promise<T | 'sold-out'> {
  const n = segments.length
  const start = Math.min(n - 1, Math.floor(random() * n))
  const empty = new Set<number>()
  for (;;) {
    let busy = 0
    for (let i = 0; i < n && busy < PROBES_BEFORE_RACE; i++) {
      const segment = segments[(start + i) % n] as SegmentRef
      if (empty.has(segment.segment)) continue
      let result: SegmentAttempt<T>
      try {
        result = await attempt(segment, { waitMs: 0, claim: alwaysClaim })
      } catch (error) {
        // Busy: the next segment, and this one is in the race if no segment sells this round.
        if (error instanceof LockTimeoutError) {
          busy++
          continue
        }
        throw error
      }
      if (result.kind === 'sold') return result.value
      empty.add(segment.segment)
    }
    // Every segment not found empty, in ring order from the start.
    const left = Array.from({ length: n }, (_, i) => segments[(start + i) % n] as SegmentRef).filter(
      (s) => !empty.has(s.segment),
    )
    if (left.length === 0) return 'sold-out'
    const raced = await race(left, attempt)
    if (raced.kind === 'sold') return raced.value
    for (const segment of raced.empty) empty.add(segment)
    // The claimed segment was empty (the last units went meanwhile): a one-try round again.
  }
}

/**
 * Waits on every segment of `racers` at once, as {@link sellFromSegments} says. Settles when every
 * racer has (so no racer's lock is still held when the purchase answers).
 */
async function race<T>(
  racers: readonly SegmentRef[],
  attempt: (segment: SegmentRef, how: SegmentTry) => Promise<SegmentAttempt<T>>,
): Promise<{ kind: 'sold'; value: T } | { kind: 'none'; empty: number[] }> {
  const controller = new AbortController()
  let winner: SegmentRef | undefined
  const results = await Promise.allSettled(
    racers.map((segment) =>
      attempt(segment, {
        waitMs: undefined,
        signal: controller.signal,
        claim: () => {
          if (winner !== undefined) return false
          winner = segment
          controller.abort()
          return true
        },
      }),
    ),
  )
  const empty: number[] = []
  let failure: { error: unknown } | undefined
  for (const [i, result] of results.entries()) {
    const segment = racers[i] as SegmentRef
    if (result.status === 'fulfilled') {
      if (result.value.kind === 'sold') return { kind: 'sold', value: result.value.value }
      if (result.value.kind === 'empty') empty.push(segment.segment)
      continue
    }
    // The winner's failure is the purchase's; a loser's wait aborted by the claim is no failure.
    if (segment === winner) throw result.reason
    if (winner !== undefined && result.reason instanceof LockAbortedError) continue
    failure ??= { error: result.reason }
  }
  if (winner === undefined && failure !== undefined) throw failure.error
  return { kind: 'none', empty }
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
