import { useEffect, useState } from 'react'
import { formatCount, formatMoney, MODE_LABELS } from '../format'
import type { ChargedTwiceAnswer, RunView } from '../wire'

/** Reads a run's orders charged twice; resolves with the answer, or an error message. */
export type LoadChargedTwice = (runId: number) => Promise<ChargedTwiceAnswer | string>

/** `GET /api/runs/:id/charged-twice`. */
export const getChargedTwice: LoadChargedTwice = async (runId) => {
  try {
    const res = await fetch(`/api/runs/${runId}/charged-twice`)
    if (!res.ok) return `the shop answered ${res.status}`
    return (await res.json()) as ChargedTwiceAnswer
  } catch {
    return 'the shop did not answer'
  }
}

/**
 * The drill-down of "charged twice": the orders the gateway's ledger charged more than once, each
 * charge with the instance that sent it and the lock token it held, and the payments the shop
 * recorded of them.
 */
export function ChargedTwicePanel({
  run,
  onClose,
  load = getChargedTwice,
}: {
  run: RunView
  onClose: () => void
  load?: LoadChargedTwice
}) {
  const [answer, setAnswer] = useState<{ runId: number; value: ChargedTwiceAnswer | string } | null>(null)
  useEffect(() => {
    let cancelled = false
    void load(run.id).then((value) => {
      if (!cancelled) setAnswer({ runId: run.id, value })
    })
    return () => {
      cancelled = true
    }
  }, [run.id, load])
  const current = answer?.runId === run.id ? answer.value : null
  return (
    <section className="panel drill" aria-labelledby="drill-title" data-run-id={run.id}>
      <div className="drill-head">
        <h2 id="drill-title">
          Charged twice{' '}
          <span className="hint">
            sale #{run.id} · {MODE_LABELS[run.mode]} · from the gateway’s ledger and the orders table
          </span>
        </h2>
        <button type="button" onClick={onClose} aria-label="Close the orders charged twice">
          Close
        </button>
      </div>
      {current === null ? (
        <p className="empty">Loading…</p>
      ) : typeof current === 'string' ? (
        <p className="form-error">Could not load the orders: {current}</p>
      ) : current.orders.length === 0 ? (
        <p className="empty">No order was charged twice in this sale.</p>
      ) : (
        <>
          {current.total > current.orders.length ? (
            <p className="hint">
              The first {formatCount(current.orders.length)} of {formatCount(current.total)} orders.
            </p>
          ) : null}
          <ul className="drill-orders">
            {current.orders.map((order) => (
              <li key={order.orderId} data-order-id={order.orderId}>
                <p>
                  <strong>Order #{order.orderId}</strong> · {order.status} ·{' '}
                  {order.amountCents === null ? '–' : formatMoney(order.amountCents)} · charged {order.charges.length}{' '}
                  times · order fence {order.fenceToken === '0' ? 'never raised (no fencing)' : order.fenceToken}
                </p>
                <ol className="drill-charges">
                  {order.charges.map((c) => (
                    <li key={c.chargeId}>
                      {formatCount(c.atMs)} ms: charge <code>{c.chargeId}</code> by{' '}
                      {c.instance ?? 'an unknown instance'}
                      {c.token ? ` with token ${c.token}` : ''} · {formatMoney(c.amountCents)}
                      {c.idempotencyKey ? ` · key ${c.idempotencyKey}` : ' · no idempotency key'} ·{' '}
                      {c.paymentRecorded ? 'payment recorded' : 'no payment recorded'}
                    </li>
                  ))}
                </ol>
              </li>
            ))}
          </ul>
        </>
      )}
    </section>
  )
}
