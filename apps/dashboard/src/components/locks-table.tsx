import { compareTokens, formatMs } from '../format'
import type { HeldLockView } from '../wire'

const sourceLabel = (source: string) => (source === 'live' ? 'live' : `run #${source.replace(/^run-/, '')}`)

/** The locks held now: resource, holder, fencing token (a decimal string, shown as is) and lease left. */
export function LocksTable({ locks }: { locks: readonly HeldLockView[] }) {
  const rows = [...locks].sort((a, b) => a.source.localeCompare(b.source) || a.resource.localeCompare(b.resource) || compareTokens(a.token, b.token))
  return (
    <section className="panel" aria-labelledby="locks-title">
      <h2 id="locks-title">Locks held now</h2>
      {rows.length === 0 ? (
        <p className="empty">No lock held at the last update.</p>
      ) : (
        <div className="table-wrap" role="region" aria-labelledby="locks-title" tabIndex={0}>
          <table className="table stack">
            <thead>
              <tr>
                <th scope="col">Shop</th>
                <th scope="col">Resource</th>
                <th scope="col">Holder</th>
                <th scope="col">Token</th>
                <th scope="col" className="num">
                  TTL left
                </th>
              </tr>
            </thead>
            <tbody>
              {rows.map((l) => (
                <tr key={`${l.source} ${l.resource} ${l.token}`} className={l.leaseLive ? undefined : 'row-stale'}>
                  <td data-label="Shop">{sourceLabel(l.source)}</td>
                  <td className="mono" data-label="Resource">
                    {l.resource}
                  </td>
                  <td data-label="Holder">
                    {l.instance} <span className="hint">pid {l.pid}</span>
                  </td>
                  <td className="mono token" data-label="Token">
                    {l.token}
                  </td>
                  <td className="num" data-label="TTL left">{l.leaseLive ? formatMs(l.ttlLeftMs) : <span className="tag-bad">lease gone — holder frozen</span>}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </section>
  )
}
