/**
 * Raw SQL on a fenced view (`db.$fenced(token).$executeRaw...`): the extension cannot read the
 * SQL, so it runs it in a transaction that set the token for the database guard
 * (SET_FENCE_TOKEN_SQL), and the guard decides — a write of a row whose fence is newer is refused,
 * a row written gets the token as its fence. Without the guard on a table, raw SQL there is not
 * fenced (docs/FENCING.md).
 */
import { StaleFencingTokenError, UnsupportedFencedWriteError } from '../shared/errors.js'
import { FENCE_TOKEN_SETTING, FENCE_TXID_SETTING, SET_FENCE_TOKEN_SQL } from '../guard/protocol.js'
import { fenceGuardRefusal } from '../guard/refusal.js'
import { lazyWrite, type PrismaPromiseLike } from './lazy-write.js'

/** Prisma's raw methods: on a fenced view they run under the view's token. */
export const RAW_METHODS: ReadonlySet<string> = new Set(['$executeRaw', '$executeRawUnsafe', '$queryRaw', '$queryRawUnsafe', '$queryRawTyped'])

interface RawClient {
  $executeRawUnsafe(query: string, ...values: unknown[]): Promise<number>
  $queryRawUnsafe<T>(query: string, ...values: unknown[]): Promise<T>
  $transaction<R>(fn: (tx: RawClient) => Promise<R>): Promise<R>
  $connect?: unknown
}

/** `client[method](...args)` under `token`, as a lazy promise (refused as an element of `$transaction([...])`: it takes several statements). */
export function rawUnderToken(client: object, method: string, args: unknown[], token: bigint): PrismaPromiseLike<unknown> {
  return lazyWrite({
    run: () => run(client as RawClient, method, args, token),
    joinBatch: () =>
      Promise.reject(new UnsupportedFencedWriteError('(raw SQL)', method, 'batch-transaction', method)),
  })
}

async function run(client: RawClient, method: string, args: unknown[], token: bigint): Promise<unknown> {
  const send = (c: RawClient) => Reflect.apply(Reflect.get(c, method) as (...a: unknown[]) => Promise<unknown>, c, args)
  try {
    // A client (not a transaction client, from which Prisma removes $connect): a transaction of its own.
    if (typeof client.$connect === 'function') {
      return await client.$transaction(async (tx) => {
        await tx.$executeRawUnsafe(SET_FENCE_TOKEN_SQL, token.toString())
        return send(tx)
      })
    }
    // Inside the caller's transaction: the token for this statement only; the transaction's own
    // settings are put back after it, so its other statements are not written under this token.
    const [saved] = await client.$queryRawUnsafe<{ token: string | null; txid: string | null }[]>(
      `SELECT current_setting('${FENCE_TOKEN_SETTING}', true) AS token, current_setting('${FENCE_TXID_SETTING}', true) AS txid`,
    )
    await client.$executeRawUnsafe(SET_FENCE_TOKEN_SQL, token.toString())
    const result = await send(client)
    await client.$executeRawUnsafe(
      `SELECT set_config('${FENCE_TOKEN_SETTING}', $1, true), set_config('${FENCE_TXID_SETTING}', $2, true)`,
      saved?.token ?? '',
      saved?.txid ?? '',
    )
    return result
  } catch (error) {
    const refusal = fenceGuardRefusal(error)
    if (refusal === undefined) throw error
    throw new StaleFencingTokenError(refusal.table ?? 'unknown table', refusal.operation ?? method, token, refusal.storedToken, error)
  }
}
