import { useEffect, useState } from 'react'
import type { ConnectionState } from '../use-dashboard-stream'

/** Says when the dashboard is not receiving the shop's numbers, and that it is reconnecting. */
export function ConnectionBanner({ connection }: { connection: ConnectionState }) {
  const [now, setNow] = useState(() => Date.now())
  useEffect(() => {
    if (connection.retryAtMs === null) return
    const timer = setInterval(() => setNow(Date.now()), 500)
    return () => clearInterval(timer)
  }, [connection.retryAtMs])

  if (connection.state === 'open') return null
  if (connection.state === 'connecting') {
    return (
      <div className="banner banner-info" role="status">
        Connecting to the shop…
      </div>
    )
  }
  const seconds = connection.retryAtMs === null ? null : Math.max(0, Math.ceil((connection.retryAtMs - now) / 1000))
  return (
    <div className="banner banner-error" role="alert">
      <strong>Connection to the shop lost.</strong> The numbers below are frozen at the last update.{' '}
      {seconds === null || seconds === 0 ? 'Reconnecting…' : `Reconnecting in ${seconds} s…`}
      {connection.attempts > 1 ? ` (attempt ${connection.attempts})` : ''}
    </div>
  )
}
