import { onAbort } from '../abort-listeners.js'

/** Resolves after `ms` (an unref'd timer), or at once when `signal` aborts. Never rejects. */
export function pause(ms: number, signal: AbortSignal): Promise<void> {
  if (signal.aborted) return Promise.resolve()
  return new Promise((resolve) => {
    const timer = setTimeout(done, Math.max(0, ms))
    timer.unref()
    const stop = onAbort(signal, done)
    function done(): void {
      clearTimeout(timer)
      stop()
      resolve()
    }
  })
}
