/** Raised (internally) when a Redis call did not answer within its deadline. */
export class DeadlineExceededError extends Error {
  constructor(readonly ms: number) {
    super(`Redis did not answer within ${Math.round(ms)} ms`)
    this.name = 'DeadlineExceededError'
  }
}

/** One call on the clock; opaque to callers. */
export interface Pending {
  /** performance.now() at which the call is given up. */
  readonly at: number
  readonly ms: number
  readonly reject: (error: Error) => void
  prev: Pending | undefined
  next: Pending | undefined
  /** Still on the clock: neither settled nor timed out. */
  live: boolean
  /** What the call belongs to, for {@link Deadlines.failGroup} (a connection); undefined for most. */
  readonly group: object | undefined
}

/**
 * Deadlines for Redis calls. ioredis has no command timeout by default and queues commands while
 * disconnected, so every call made on a caller's behalf is tracked here.
 *
 * One timer serves all calls of a Locker: it is armed for the earliest deadline and only moved
 * when a call with an earlier one comes, so a call that answers in time (nearly all of them) costs
 * no timer work at all, only a link in a list (no Set: an object's first use as a Set key costs
 * V8 an identity hash, measurably, on every acquire). When the timer fires it gives up every call
 * that is due, on the monotonic clock, and re-arms for the next. It is unref'd: a pending deadline
 * does not keep the process alive (the connection does, as long as there is one).
 */
export class Deadlines {
  #head: Pending | undefined
  #tail: Pending | undefined
  #size = 0
  #timer: NodeJS.Timeout | undefined
  /** When the timer fires; Infinity when it is not armed. */
  #armedFor = Number.POSITIVE_INFINITY

  /**
   * Starts the clock of one call: `onTimeout` gets a {@link DeadlineExceededError} after `ms`
   * from `from` (default: now) unless {@link settle} is called first.
   */
  track(ms: number, onTimeout: (error: Error) => void, from: number = performance.now(), group?: object): Pending {
    const entry: Pending = {
      at: from + Math.max(0, ms),
      ms,
      reject: onTimeout,
      prev: this.#tail,
      next: undefined,
      live: true,
      group,
    }
    if (this.#tail) this.#tail.next = entry
    else this.#head = entry
    this.#tail = entry
    this.#size++
    if (entry.at < this.#armedFor) this.#arm(entry.at)
    return entry
  }

  /** Stops the clock of a call; false when it had already run out (its outcome is then late). */
  settle(entry: Pending): boolean {
    if (!entry.live) return false
    this.#unlink(entry)
    return true
  }

  /**
   * Gives up at once every call of `group` still on the clock, with `error()` (a connection that
   * closed: ioredis would only send them again later). Their late replies go where late replies
   * go. Rare, so a walk of the list.
   */
  failGroup(group: object, error: () => Error): void {
    const due: Pending[] = []
    for (let entry = this.#head; entry; entry = entry.next) if (entry.group === group) due.push(entry)
    for (const entry of due) this.#unlink(entry)
    for (const entry of due) entry.reject(error())
  }

  /**
   * Settles with `promise`, or rejects with {@link DeadlineExceededError} after `ms`. The late
   * outcome of `promise` is swallowed: the caller has already been told.
   */
  race<T>(promise: Promise<T>, ms: number): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const entry = this.track(ms, reject)
      promise.then(
        (value) => {
          if (this.settle(entry)) resolve(value)
        },
        (error: unknown) => {
          if (this.settle(entry)) reject(error)
        },
      )
    })
  }

  /** Calls in flight with a deadline (for tests). */
  get size(): number {
    return this.#size
  }

  #unlink(entry: Pending): void {
    entry.live = false
    if (entry.prev) entry.prev.next = entry.next
    else this.#head = entry.next
    if (entry.next) entry.next.prev = entry.prev
    else this.#tail = entry.prev
    entry.prev = entry.next = undefined
    this.#size--
  }

  #arm(at: number): void {
    clearTimeout(this.#timer)
    this.#armedFor = at
    // libuv runs timers on its cached loop time, so one can fire a hair early: a call not yet
    // due is then left for the re-armed timer.
    this.#timer = setTimeout(this.#sweep, Math.max(0, Math.ceil(at - performance.now())))
    this.#timer.unref()
  }

  readonly #sweep = (): void => {
    this.#timer = undefined
    this.#armedFor = Number.POSITIVE_INFINITY
    const now = performance.now()
    let next = Number.POSITIVE_INFINITY
    const due: Pending[] = []
    for (let entry = this.#head; entry; entry = entry.next) {
      if (entry.at <= now) due.push(entry)
      else if (entry.at < next) next = entry.at
    }
    for (const entry of due) this.#unlink(entry)
    if (next !== Number.POSITIVE_INFINITY) this.#arm(next)
    for (const entry of due) entry.reject(new DeadlineExceededError(entry.ms))
  }
}

/**
 * Waits for `promise` to settle, or until `until` (performance.now() ms), whichever comes first;
 * never rejects (closing waits for what it sent to be answered, within its bound, and no longer).
 */
export function withinDeadline(promise: Promise<unknown>, until: number): Promise<void> {
  const ms = until - performance.now()
  if (ms <= 0) return Promise.resolve()
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, ms)
    timer.unref()
    promise.then(
      () => {
        clearTimeout(timer)
        resolve()
      },
      () => {
        clearTimeout(timer)
        resolve()
      },
    )
  })
}
