/**
 * The dashboard's one connection to the shop: an EventSource on `/api/dashboard/stream`.
 *
 * - `history` (once per connection) replaces the chart points; `snapshot` (every second) brings
 *   the latest numbers and one more point.
 * - The browser reconnects an EventSource by itself when the connection drops (after the
 *   server's `retry:` of 2 s). When it gives up (`readyState` CLOSED: the server answered with an
 *   error, or a proxy did), a new one is opened with exponential backoff, 1 s doubling to 15 s.
 * - A stream that stays open but silent (a frozen server, a half-open socket) is treated as lost
 *   after `staleAfterMs`, closed and reopened the same way.
 * In every one of those cases `connection.state` is `lost` and the page says so.
 */
import { useEffect, useRef, useState } from 'react'
import type { DashboardHistory, DashboardSnapshot, MetricsPoint } from './wire'

/** The EventSource the hook needs (the browser's, or a stand-in in tests). */
export interface EventSourceLike {
  readonly readyState: number
  onerror: ((this: EventSourceLike, ev: Event) => unknown) | null
  addEventListener(type: string, listener: (ev: MessageEvent<string>) => void): void
  close(): void
}

/** The state of the connection, for the banner. */
export interface ConnectionState {
  readonly state: 'connecting' | 'open' | 'lost'
  /** Consecutive failed attempts since the last message. */
  readonly attempts: number
  /** When the next attempt is due (epoch ms), when the hook (not the browser) schedules it. */
  readonly retryAtMs: number | null
}

/** Options of {@link useDashboardStream}. */
export interface StreamOptions {
  /** Default `/api/dashboard/stream`. */
  readonly url?: string
  /** Default: `new EventSource(url)`. */
  readonly createEventSource?: (url: string) => EventSourceLike
  /** A stream silent this long is lost, in ms. Default 5 000. */
  readonly staleAfterMs?: number
  /** Most points kept for the charts. Default 300 (5 minutes). */
  readonly maxPoints?: number
}

/** What the hook returns. */
export interface DashboardStream {
  readonly snapshot: DashboardSnapshot | null
  readonly points: readonly MetricsPoint[]
  readonly connection: ConnectionState
}

const CLOSED = 2

/** Backoff before attempt `n` (1-based) of the hook's own reconnects, in ms: 1, 2, 4, 8, 15, 15... s. */
export function backoffMs(attempt: number): number {
  return Math.min(15_000, 1_000 * 2 ** Math.max(0, attempt - 1))
}

/**
 * Subscribes to the dashboard stream for as long as the component is mounted.
 * @example
 * ```tsx
 * const { snapshot, points, connection } = useDashboardStream()
 * ```
 */
export function useDashboardStream(options: StreamOptions = {}): DashboardStream {
  const url = options.url ?? '/api/dashboard/stream'
  const staleAfterMs = options.staleAfterMs ?? 5_000
  const maxPoints = options.maxPoints ?? 300
  const create = useRef(options.createEventSource ?? ((u: string) => new EventSource(u) as unknown as EventSourceLike))
  const [snapshot, setSnapshot] = useState<DashboardSnapshot | null>(null)
  const [points, setPoints] = useState<readonly MetricsPoint[]>([])
  const [connection, setConnection] = useState<ConnectionState>({ state: 'connecting', attempts: 0, retryAtMs: null })

  useEffect(() => {
    let source: EventSourceLike | undefined
    let retryTimer: ReturnType<typeof setTimeout> | undefined
    let attempts = 0
    let lastMessageAt = Date.now()
    let disposed = false

    const lost = (retryAtMs: number | null) => setConnection({ state: 'lost', attempts, retryAtMs })

    // The hook's own reconnect: a fresh EventSource after a backoff.
    const reopenLater = () => {
      source?.close()
      source = undefined
      attempts++
      const delay = backoffMs(attempts)
      lost(Date.now() + delay)
      clearTimeout(retryTimer)
      retryTimer = setTimeout(open, delay)
    }

    function open() {
      if (disposed) return
      lastMessageAt = Date.now()
      const es = create.current(url)
      source = es
      const alive = () => {
        lastMessageAt = Date.now()
        if (attempts !== 0 || connectionState !== 'open') {
          attempts = 0
          connectionState = 'open'
          setConnection({ state: 'open', attempts: 0, retryAtMs: null })
        }
      }
      es.addEventListener('history', (ev) => {
        if (source !== es) return
        try {
          const history = JSON.parse(ev.data) as DashboardHistory
          setPoints(history.points.slice(-maxPoints))
          alive()
        } catch {
          // A torn message: the next snapshot will do.
        }
      })
      es.addEventListener('snapshot', (ev) => {
        if (source !== es) return
        try {
          const next = JSON.parse(ev.data) as DashboardSnapshot
          setSnapshot(next)
          setPoints((old) => {
            const last = old[old.length - 1]
            if (last !== undefined && last.atMs >= next.point.atMs) return old
            const out = [...old, next.point]
            return out.length > maxPoints ? out.slice(out.length - maxPoints) : out
          })
          alive()
        } catch {
          // Ignore it; a snapshot comes every second.
        }
      })
      es.onerror = () => {
        if (source !== es) return
        connectionState = 'lost'
        if (es.readyState === CLOSED) reopenLater()
        // Else the browser retries by itself; say so meanwhile.
        else {
          attempts++
          lost(null)
        }
      }
    }

    let connectionState: ConnectionState['state'] = 'connecting'
    open()
    const watchdog = setInterval(() => {
      if (source !== undefined && Date.now() - lastMessageAt > staleAfterMs) {
        connectionState = 'lost'
        reopenLater()
      }
    }, 1_000)

    return () => {
      disposed = true
      clearInterval(watchdog)
      clearTimeout(retryTimer)
      source?.close()
    }
  }, [url, staleAfterMs, maxPoints])

  return { snapshot, points, connection }
}
