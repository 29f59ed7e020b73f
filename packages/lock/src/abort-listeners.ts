/**
 * One `abort` listener per signal, however many acquires wait on it. Node warns
 * (`MaxListenersExceededWarning`) when an `AbortSignal` gets more than 10 listeners — a request's
 * signal passed to a dozen acquires does that — and the warning would be ours, not the caller's.
 * The listener is removed with the last acquire that waits on the signal.
 */
interface Registrations {
  readonly callbacks: Set<() => void>
  readonly listener: () => void
}

const bySignal = new WeakMap<AbortSignal, Registrations>()

/**
 * Calls `callback` once when `signal` aborts (not at all when it already has: check first).
 * @returns a function that stops listening.
 */
export function onAbort(signal: AbortSignal, callback: () => void): () => void {
  let r = bySignal.get(signal)
  if (r === undefined) {
    const callbacks = new Set<() => void>()
    const listener = (): void => {
      bySignal.delete(signal)
      for (const fn of [...callbacks]) fn()
    }
    r = { callbacks, listener }
    bySignal.set(signal, r)
    signal.addEventListener('abort', listener, { once: true })
  }
  const registrations = r
  // A function per registration: the same callback may be registered twice and removed once.
  const entry = (): void => callback()
  registrations.callbacks.add(entry)
  return () => {
    if (!registrations.callbacks.delete(entry) || registrations.callbacks.size > 0) return
    if (bySignal.get(signal) === registrations) bySignal.delete(signal)
    signal.removeEventListener('abort', registrations.listener)
  }
}
