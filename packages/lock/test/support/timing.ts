/** Small timing helpers; all on the monotonic clock. */

/**
 * How soon after a release a waiter must be served by the release message (pub/sub) or the local
 * hand-off. The defects it tells apart are slower by far: a waiter woken only by its safety poll
 * (4 s and more with the tests' 5 s poll) or a lock left handed to a queue head that does not
 * take it (`handoffMs`, 500 ms). Measured: 1-5 ms; the room is for a loaded 2-core machine, which
 * can keep the test process off the CPU for a few hundred ms (it was 100-200 ms, and broke there).
 */
export const HANDOFF_BOUND_MS = 400

export const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms))

/** Polls `probe` every `everyMs` until it returns true; rejects after `timeoutMs`. */
export async function waitUntil(
  probe: () => boolean | Promise<boolean>,
  { timeoutMs = 5_000, everyMs = 5, what = 'condition' } = {},
): Promise<number> {
  const start = performance.now()
  while (performance.now() - start < timeoutMs) {
    if (await probe()) return performance.now() - start
    await sleep(everyMs)
  }
  throw new Error(`${what} not reached within ${timeoutMs} ms`)
}

/**
 * Settles a call into a value or an error, with the time it took, for assertions on both. Pass the
 * call as a function when asserting a lower bound on `ms`: a promise passed in was started before
 * this runs, and whatever ran in between (or a preemption on a loaded machine) is not counted.
 */
export async function settle<T>(
  call: Promise<T> | (() => Promise<T>),
): Promise<{ value?: T; error?: unknown; ms: number }> {
  const start = performance.now()
  try {
    const value = await (typeof call === 'function' ? call() : call)
    return { value, ms: performance.now() - start }
  } catch (error) {
    return { error, ms: performance.now() - start }
  }
}
