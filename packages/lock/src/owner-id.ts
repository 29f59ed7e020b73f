import { randomBytes } from 'node:crypto'

// Owner ids are 128 random bits from the CSPRNG. Drawing 16 bytes at a time costs a syscall per
// lock; a pooled buffer (as crypto.randomUUID does internally) keeps acquire cheap.
const POOL_IDS = 256
let pool = randomBytes(16 * POOL_IDS)
let next = 0

/** A new 128-bit owner id as 32 hex characters; never repeats, never guessable. */
export function newOwnerId(): string {
  if (next === POOL_IDS) {
    pool = randomBytes(16 * POOL_IDS)
    next = 0
  }
  const start = 16 * next++
  return pool.toString('hex', start, start + 16)
}
