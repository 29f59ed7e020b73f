import { CHAOS_SHORT, FIGURE_LABELS, formatCount, MODE_LABELS } from '../format'
import { cardVerdict, chargedUnpaidSettled } from '../verdict'
import type { InvariantsView } from '../wire'

function Row({ label, value, bad, warn, hint }: { label: string; value: string; bad?: boolean; warn?: boolean; hint?: string | undefined }) {
  return (
    <div className={`kv${bad ? ' kv-bad' : warn ? ' kv-warn' : ''}`}>
      <dt>{label}</dt>
      <dd>
        {value}
        {hint ? <span className="hint"> {hint}</span> : null}
      </dd>
    </div>
  )
}

function InvariantsCard({ view }: { view: InvariantsView }) {
  const verdict = cardVerdict(view)
  const healthy = verdict.tone !== 'bad'
  // Charged and not paid is a violation once settled; counted now by a shop that does not give its
  // charges in flight apart, it may be a payment being recorded: shown, not called a violation.
  const settled = chargedUnpaidSettled(view)
  const id = `inv-${view.source}`
  const title = `${view.title} · ${MODE_LABELS[view.mode]}${view.chaos === undefined ? '' : `, chaos ${CHAOS_SHORT[view.chaos]}`}`
  return (
    <section className={`inv-card inv-${verdict.tone}`} aria-labelledby={id} data-source={view.source}>
      <header className="inv-head">
        <h3 id={id}>{title}</h3>
        <span className={`status status-${verdict.tone}`} role="status" aria-label={`Status: ${verdict.label}`} title={verdict.detail}>
          {verdict.text}
        </span>
      </header>
      <dl className="kvs">
        <Row label="Stock left" value={formatCount(view.stock)} hint={`of ${formatCount(view.initialStock)}`} />
        <Row label="Sold" value={formatCount(view.sold)} />
        <Row label="Oversold" value={formatCount(view.oversold)} bad={view.oversold > 0} />
        <Row
          label={FIGURE_LABELS.chargedTwice}
          value={formatCount(view.doubleChargedOrders)}
          bad={view.doubleChargedOrders > 0}
          hint={
            view.extraCharges > view.doubleChargedOrders ? `${formatCount(view.extraCharges)} extra charges` : undefined
          }
        />
        <Row label="Lost updates" value={formatCount(view.lostUpdates)} bad={view.lostUpdates > 0} />
        <Row
          label="Charged, not paid"
          value={formatCount(view.chargedUnpaidOrders)}
          bad={settled && view.chargedUnpaidOrders > 0}
          warn={!settled && view.chargedUnpaidOrders > 0}
          hint={!settled && view.chargedUnpaidOrders > 0 ? 'in flight, or not yet reconciled' : undefined}
        />
        <Row
          label="Paid, not charged"
          value={formatCount(view.paidUnchargedOrders)}
          bad={view.paidUnchargedOrders > 0}
        />
        <Row
          label="Charged another amount"
          value={formatCount(view.amountMismatchOrders)}
          bad={view.amountMismatchOrders > 0}
        />
        <Row label="Charges of no order" value={formatCount(view.unmatchedCharges)} bad={view.unmatchedCharges > 0} />
        {view.unsettledOrders === undefined ? null : (
          <Row
            label="Ordered, never paid"
            value={formatCount(view.unsettledOrders)}
            bad={view.unsettledOrders > 0}
            hint={view.unsettledOrders > 0 ? 'until the reconciler cancels it' : undefined}
          />
        )}
      </dl>
      {/* Not invariants by themselves: where the money moved, next to what the shop recorded of it. */}
      <dl className="kvs kvs-money" aria-label="Charges and payments">
        <Row label={FIGURE_LABELS.gatewayCharges} value={formatCount(view.gatewayCharges)} />
        <Row label={FIGURE_LABELS.payments} value={formatCount(view.payments)} />
        <Row label={FIGURE_LABELS.paidOrders} value={formatCount(view.paidOrders)} />
        {view.chargesInFlight === undefined ? null : (
          <Row label="Charges in flight" value={formatCount(view.chargesInFlight)} hint="being recorded" />
        )}
        <Row
          label="Reconciled: paid / cancelled"
          value={`${formatCount(view.reconciledPaid)} / ${formatCount(view.cancelledOrders)}`}
        />
      </dl>
      <p className="note">
        {MODE_LABELS[view.mode]} · {view.kind === 'final' ? 'final, counted after the run' : 'counted now'}: stock and
        orders from the shop's database, charges from the gateway's ledger
        {!healthy && view.mode !== 'fenced' ? ' · expected without fencing' : ''}
      </p>
    </section>
  )
}

/** The shop's invariants, one card per shop (the live shop, the current or last run). */
export function InvariantsPanel({ invariants }: { invariants: readonly InvariantsView[] }) {
  return (
    <section className="panel" aria-labelledby="invariants-title">
      <h2 id="invariants-title">Invariants</h2>
      {invariants.length === 0 ? (
        <p className="empty">Waiting for the shop's counts…</p>
      ) : (
        <div className="inv-grid">
          {invariants.map((view) => (
            <InvariantsCard key={view.source} view={view} />
          ))}
        </div>
      )}
    </section>
  )
}
