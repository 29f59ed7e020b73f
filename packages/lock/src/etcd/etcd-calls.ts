/**
 * Deadlines for etcd calls: etcd3 retries a call on another member (or the same one, later) by
 * itself and has no deadline of its own by default, so every call made on a caller's behalf is
 * given up here after its `ms`. Its late outcome goes to `late` (a key created after its try was
 * given up must be deleted again). Calls on the wire are counted for `close()`.
 */
import type { Deadlines } from '../deadline.js'
import { InFlightCalls } from '../backend/in-flight.js'
import { EtcdReachability } from './etcd-reachability.js'

/** An etcd call that did not answer within its deadline. */
export class EtcdTimeoutError extends Error {
  constructor(readonly ms: number) {
    super(`etcd did not answer within ${Math.round(ms)} ms`)
    this.name = 'EtcdTimeoutError'
  }
}

export class EtcdCalls {
  readonly #deadlines: Deadlines
  readonly inFlight = new InFlightCalls()
  /** What the calls' own outcomes (late ones too) say of the connection. */
  readonly reachability: EtcdReachability

  /** @param endpoints how many members the client talks to (etcd-reachability.ts), if known */
  constructor(deadlines: Deadlines, endpoints: number | undefined) {
    this.#deadlines = deadlines
    this.reachability = new EtcdReachability(endpoints)
  }

  /**
   * Settles with the call, or rejects with {@link EtcdTimeoutError} after `ms`; `late` then gets
   * what the call answers, if it answers. A call that fails because etcd is unreachable rejects
   * with an `EtcdDownError` (etcd-reachability.ts). `observe: false` for a promise whose call was
   * observed already (a lease grant that several tries wait for counts once).
   */
  run<T>(call: () => Promise<T>, ms: number, late?: (value: T) => void, observe = true): Promise<T> {
    const inFlight = this.inFlight
    inFlight.begin()
    let sent: Promise<T>
    try {
      sent = observe ? this.observe(call()) : call()
    } catch (error) {
      inFlight.end()
      return Promise.reject(error instanceof Error ? error : new Error(String(error)))
    }
    return new Promise<T>((resolve, reject) => {
      const entry = this.#deadlines.track(ms, () => reject(new EtcdTimeoutError(ms)))
      sent.then(
        (value) => {
          inFlight.end()
          if (this.#deadlines.settle(entry)) resolve(value)
          else late?.(value)
        },
        (error: unknown) => {
          inFlight.end()
          if (this.#deadlines.settle(entry)) reject(error instanceof Error ? error : new Error(String(error)))
        },
      )
    })
  }

  /**
   * What the call `sent` comes to (late too) tells {@link reachability}; it rejects with an
   * `EtcdDownError` when etcd is unreachable now.
   */
  observe<T>(sent: Promise<T>): Promise<T> {
    return sent.then(
      (value) => {
        this.reachability.answered()
        return value
      },
      (error: unknown) => {
        throw this.reachability.failed(error instanceof Error ? error : new Error(String(error)))
      },
    )
  }
}
