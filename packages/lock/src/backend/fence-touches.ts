/** Resources whose last refresh a backend keeps (then it starts over: they are refreshed once more). */
const KEPT = 1_024

/**
 * Quorum mode with the restart guard on: when this backend's grants last refreshed each
 * resource's token counter on its node, so that a grant refreshes it only when that is due.
 *
 * Each refresh sets the counter to live `fenceTtlMs + slackMs` (the node backend's `fenceTtlMs`
 * carries the slack: seeds and raises set it too). A grant sent at `sentAt` whose reply is
 * awaited at most `ms` executes by `sentAt + ms` (a reply later than that is given back: nothing
 * of it is kept); if a refresh of ours was sent at `at`, the counter lives at least until
 * `at + fenceTtlMs + slackMs`. So when `sentAt + ms - at <= slackMs` the counter outlives the
 * grant by `fenceTtlMs`, as if the grant had refreshed it, and the grant skips the `PEXPIRE`:
 * under steady use a counter is refreshed once per `slackMs` per Locker, not once per grant.
 * (Every write of the counter only moves its expiry later, as long as the Lockers that share a
 * prefix share `fenceTtlMs`; a missing counter is seeded afresh whatever this says.)
 */
export class FenceTouches {
  readonly #at = new Map<string, number>()
  readonly #slackMs: number

  constructor(slackMs: number) {
    this.#slackMs = slackMs
  }

  /** Whether a grant of `resource` sent at `sentAt`, awaited at most `ms`, must refresh the counter. */
  due(resource: string, sentAt: number, ms: number): boolean {
    const at = this.#at.get(resource)
    return at === undefined || sentAt + ms - at > this.#slackMs
  }

  /** A grant sent at `sentAt` that refreshed the counter was granted. */
  touched(resource: string, sentAt: number): void {
    if (this.#at.size >= KEPT && !this.#at.has(resource)) this.#at.clear()
    this.#at.set(resource, sentAt)
  }
}

/**
 * The slack of quorum mode's counter refreshes ({@link FenceTouches}) for a `fenceTtlMs`: a
 * quarter of it, at most a minute — a counter then lives at most that much longer than
 * `fenceTtlMs` after its last grant.
 */
export function fenceSlackMs(fenceTtlMs: number): number {
  return Math.min(60_000, Math.floor(fenceTtlMs / 4))
}
