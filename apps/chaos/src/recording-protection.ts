/**
 * Wraps a demo-shop {@link Protection} so that the history records what the business code did
 * under it: each lock asked for, and how the acquire ended (an entry, or the error it failed
 * with); each critical section's entry and exit with its token; and each transaction that
 * wrote, accepted (with its place in the row's commit order) or rejected for a stale token.
 * The business code itself (`ShopService`) is the shop's, unchanged.
 */
import { StaleFencingTokenError } from '@fencelock/fencing'
import { quoteIdent } from '@fencelock/demo-shop/database'
import type { GuardedRow, Protection, Tx } from '@fencelock/demo-shop/protection'
import type { Recorder } from './history.js'

/** The sequence that orders the accepted writes of a run (created by the runner in the run's schema). */
export const WRITE_SEQUENCE = 'chaos_write_seq'

const rowName = (row: GuardedRow): string => (row.model === 'Product' ? `Product:${row.where.sku}` : `Order:${row.where.id}`)

/**
 * The place of this transaction in its row's commit order, or undefined when it wrote nothing.
 * Drawn after the business code ran, so after the row was written and its row lock taken: the
 * row lock is held until commit, so for one row the numbers follow the commit order.
 * `txid_current_if_assigned()` is null in a transaction that has not written.
 */
async function commitOrder(tx: Tx, schema: string): Promise<number | undefined> {
  const [written] = await tx.$queryRawUnsafe<{ xid: string | null }[]>('SELECT txid_current_if_assigned()::text AS xid')
  if (written?.xid == null) return undefined
  const sequence = `${quoteIdent(schema)}.${quoteIdent(WRITE_SEQUENCE)}`
  const [drawn] = await tx.$queryRawUnsafe<{ seq: string }[]>(`SELECT nextval('${sequence}')::text AS seq`)
  return drawn === undefined ? undefined : Number(drawn.seq)
}

/** `inner` with every section and write recorded by `recorder` as instance `inst`. */
export function recordingProtection(inner: Protection, recorder: Recorder, inst: string, schema: string): Protection {
  return {
    mode: inner.mode,
    run: async (resource, fn) => {
      const asked = recorder.record({ k: 'ask', inst, res: resource }).mono
      let entered = false
      try {
        return await inner.run(resource, async (guard) => {
          entered = true
          const token = String(guard.token ?? 0n)
          recorder.record({ k: 'enter', inst, res: resource, token, asked })
          try {
            // A step that writes: recorded accepted (with its place in the row's commit order) or
            // rejected for a stale token.
            const recorded =
              (kind: 'write' | 'transaction') =>
              async <T>(row: GuardedRow, work: (tx: Tx) => Promise<T>): Promise<T> => {
                let seq: number | undefined
                try {
                  const result = await guard[kind](row, async (tx) => {
                    const out = await work(tx)
                    seq = await commitOrder(tx, schema)
                    return out
                  })
                  if (seq !== undefined) recorder.record({ k: 'write', inst, res: resource, row: rowName(row), token, outcome: 'accepted', seq })
                  return result
                } catch (error) {
                  if (error instanceof StaleFencingTokenError) recorder.record({ k: 'write', inst, res: resource, row: rowName(row), token, outcome: 'rejected' })
                  throw error
                }
              }
            return await fn({
              resource: guard.resource,
              token: guard.token,
              outsideCall: (key) => guard.outsideCall(key),
              // A read writes no business data (in fenced mode only the row's fence): its refusal
              // is recorded, an accepted one is not a write of the history.
              read: async (row, also) => {
                try {
                  return await guard.read(row, also)
                } catch (error) {
                  if (error instanceof StaleFencingTokenError) recorder.record({ k: 'write', inst, res: resource, row: rowName(row), token, outcome: 'rejected' })
                  throw error
                }
              },
              write: recorded('write'),
              // Recorded with its place in the commit order, so run as a transaction of its one statement.
              writeOne: recorded('write'),
              transaction: recorded('transaction'),
            })
          } finally {
            recorder.record({ k: 'exit', inst, res: resource, token })
          }
        })
      } catch (error) {
        // Thrown before the protected code ran: the acquire failed (the lock's typed errors, or
        // anything else, which the quorum scenario counts as unclean).
        if (!entered) recorder.record({ k: 'acquire-failed', inst, res: resource, asked, error: error instanceof Error ? error.name : typeof error, detail: describeError(error) })
        throw error
      }
    },
  }
}

/** An error's message and its cause's, cut to 300 characters. */
function describeError(error: unknown): string {
  if (!(error instanceof Error)) return String(error).slice(0, 300)
  const cause = error.cause instanceof Error ? ` (cause: ${error.cause.message})` : ''
  return `${error.message}${cause}`.slice(0, 300)
}
