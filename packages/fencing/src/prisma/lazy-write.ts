/**
 * A fenced write as Prisma's own calls are: lazy. Nothing runs until it is awaited (`then`,
 * `catch`, `finally`), so a fenced write that is never awaited does nothing and cannot reject
 * unhandled; and it can be an element of the array form of `$transaction`.
 *
 * The array form runs every element in one database transaction, and starts only when every
 * element has joined it (each one waits on the batch's lock before it sends anything). A write
 * that is one statement joins as that statement. A write that needs more than one (a check
 * after the write, a retry, the fence raised before a delete) cannot be one element of such a
 * batch: it refuses instead, without joining, so the batch never starts and nothing of it is
 * written. (Joining as two requests would break Prisma's batch: its lock counts one request per
 * element, and its errors name the failed element by request index.)
 */

/** What `$transaction([...])` hands to each element: Prisma's batch transaction (opaque here). */
export type BatchTransaction = object

/** The part of Prisma's lazy promise that `$transaction([...])` uses. */
export interface PrismaPromiseLike<T> extends Promise<T> {
  requestTransaction(transaction: BatchTransaction): PromiseLike<unknown>
}

/** How one fenced write runs: alone (awaited), or as one element of a batch. */
export interface WritePlan<T> {
  /** Runs the write when it is awaited. */
  run(): Promise<T>
  /** Joins a batch as one statement, or rejects without joining (the batch then never starts). */
  joinBatch(transaction: BatchTransaction): PromiseLike<unknown>
}

/**
 * The lazy promise of one write (a class, not a closure per method: one object per call on the
 * hot path of every fenced write). Prisma's `$transaction([...])` accepts it as an element.
 */
class LazyWrite<T> {
  readonly #plan: WritePlan<T>
  #started: Promise<T> | undefined

  constructor(plan: WritePlan<T>) {
    this.#plan = plan
  }

  #start(): Promise<T> {
    if (this.#started === undefined) {
      try {
        this.#started = this.#plan.run()
      } catch (error) {
        this.#started = Promise.reject(error)
      }
    }
    return this.#started
  }

  then<A = T, B = never>(onFulfilled?: ((value: T) => A | PromiseLike<A>) | null, onRejected?: ((reason: unknown) => B | PromiseLike<B>) | null): Promise<A | B> {
    return this.#start().then(onFulfilled, onRejected)
  }

  catch<B = never>(onRejected?: ((reason: unknown) => B | PromiseLike<B>) | null): Promise<T | B> {
    return this.#start().catch(onRejected)
  }

  finally(onFinally?: (() => void) | null): Promise<T> {
    return this.#start().finally(onFinally)
  }

  requestTransaction(transaction: BatchTransaction): PromiseLike<unknown> {
    try {
      return this.#plan.joinBatch(transaction)
    } catch (error) {
      return Promise.reject(error)
    }
  }

  // `$transaction([...])` accepts only elements that say they are Prisma's promises.
  get [Symbol.toStringTag](): string {
    return 'PrismaPromise'
  }
}

/** A lazy promise for `plan`, which Prisma's `$transaction([...])` accepts as an element. */
export function lazyWrite<T>(plan: WritePlan<T>): PrismaPromiseLike<T> {
  return new LazyWrite(plan) as unknown as PrismaPromiseLike<T>
}
