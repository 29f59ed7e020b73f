import { randomBytes } from 'node:crypto'

// Owner ids are 128 random bits from the CSPRNG. Drawing 16 bytes at a time costs a syscall per
// lock; a pooled draw (as crypto.randomUUID does internally), hex-encoded once per refill, makes
// an id one substring.
const POOL_IDS = 256
const ID_CHARS = 32
let pool = ''
let next = POOL_IDS

/** A new 128-bit owner id as 32 hex characters; never repeats, never guessable. */
export function newOwnerId(): string {
  if (next === POOL_IDS) {
    pool = randomBytes((ID_CHARS / 2) * POOL_IDS).toString('hex')
    next = 0
  }
  const start = ID_CHARS * next++
  return pool.slice(start, start + ID_CHARS)
}
