/**
 * One vote counter for quorum mode's calls (acquire, extend, release, subscribe): each node asked
 * votes once — yes, no, or failed (no answer, an error) — and the tally settles as soon as the
 * outcome is known: won when `needed` said yes, lost when that many can no longer say yes. What a
 * lost call means (held by someone else or unavailable, not ours or an error) is the caller's to
 * say from the counts.
 */
export class Tally {
  yes = 0
  no = 0
  /** The errors of the nodes that failed (and of those not asked, counted up front). */
  readonly errors: Error[] = []
  #pending: number
  #settled = false
  readonly #needed: number
  readonly #waitForAll: boolean
  readonly #onSettle: (won: boolean, tally: Tally) => void

  /**
   * @param voters how many nodes vote (the nodes not asked are counted with {@link fail} at once).
   * @param needed how many yes votes win.
   * @param onSettle called once, with whether the call was won (and the tally: it may settle while
   *   being built, when the nodes counted up front already decide it).
   * @param waitForAll a lost call settles only when every voter voted (a release reports what the
   *   nodes said, not only that a majority can no longer free it).
   */
  constructor(
    voters: number,
    needed: number,
    onSettle: (won: boolean, tally: Tally) => void,
    { waitForAll = false } = {},
  ) {
    this.#pending = voters
    this.#needed = needed
    this.#onSettle = onSettle
    this.#waitForAll = waitForAll
  }

  get settled(): boolean {
    return this.#settled
  }

  get failed(): number {
    return this.errors.length
  }

  /** Voters so far, yes and no: the nodes that answered. */
  get answered(): number {
    return this.yes + this.no
  }

  agree(): void {
    this.yes++
    this.#vote()
  }

  refuse(): void {
    this.no++
    this.#vote()
  }

  fail(error: Error): void {
    this.errors.push(error)
    this.#vote()
  }

  #vote(): void {
    this.#pending--
    if (this.#settled) return
    if (this.yes >= this.#needed) return this.#settle(true)
    if (this.yes + this.#pending < this.#needed && (!this.#waitForAll || this.#pending === 0)) this.#settle(false)
  }

  #settle(won: boolean): void {
    this.#settled = true
    this.#onSettle(won, this)
  }
}

/**
 * Many nodes' errors as one, naming each node and its reason (each error names its node:
 * {@link onNode}, or "node i was not asked: ..."); the first is the cause.
 */
export function nodesFailed(what: string, errors: readonly Error[], n: number): Error {
  const first = errors[0]
  const each = errors.map((e) => e.message).join('; ')
  return new Error(
    `${what}: ${errors.length} of ${n} nodes did not answer${first ? ` (${each})` : ''}`,
    first ? { cause: first } : undefined,
  )
}

/** A node's error, its message prefixed with the node's index (`node 2: ...`); the error is the cause. */
export function onNode(index: number, error: Error): Error {
  return new Error(`node ${index}: ${error.message}`, { cause: error })
}
