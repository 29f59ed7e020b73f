import { AsyncLocalStorage } from 'node:async_hooks'
import { parseFenceToken, type FenceTokenInput } from './fence-token.js'

// One store per copy of this module. The lock package never imports us (nor we it): the code
// that holds a lock puts its token here, and `$fenced()` reads it.
const storage = new AsyncLocalStorage<bigint>()

/**
 * Runs `fn` with `token` as the ambient fencing token, so `db.$fenced()` inside it (and in
 * everything it awaits) needs no argument. The token is checked first: a bad one throws
 * `InvalidFenceTokenError` and `fn` does not run. Scopes nest; the innermost wins.
 *
 * @example
 * ```ts
 * await locker.using(`product:${sku}`, (lock) =>
 *   withFenceToken(lock.token, () => buy(db, sku)), // buy() calls db.$fenced().product.update(...)
 * )
 * ```
 */
export function withFenceToken<R>(token: FenceTokenInput, fn: () => R): R {
  return storage.run(parseFenceToken(token), fn)
}

/** The ambient token set by the innermost {@link withFenceToken}, or `undefined` outside one. */
export function currentFenceToken(): bigint | undefined {
  return storage.getStore()
}
