import { createHash } from 'node:crypto'
import type { DeadlineExceededError, Deadlines } from './deadline.js'

/** What running a script needs from a client; an ioredis `Redis` or `Cluster` fits. */
export interface ScriptClient {
  evalsha(sha: string, numKeys: number, ...args: (string | number)[]): Promise<unknown>
  eval(script: string, numKeys: number, ...args: (string | number)[]): Promise<unknown>
}

/**
 * How one script call is handled; every part is optional. Methods are called on this object, so
 * a class can carry a call's context without a closure per call.
 */
export interface Handling<T> {
  /** With `ms`: give up after that long (`DeadlineExceededError`), measured from `sentAt`. */
  readonly deadlines?: Deadlines
  readonly ms?: number
  /** performance.now() when the call is sent, if the caller has it already (default: now). */
  readonly sentAt?: number
  /** Turns the reply into the result (default: the reply as it is), or into a promise of it. */
  map?(reply: unknown): T | PromiseLike<T>
  /** Turns an error (a failed call, a deadline, what `map` threw) into a result instead. */
  mapError?(error: unknown): T
  /** Gets the reply of a call that answered after its deadline (it is otherwise dropped). */
  onLate?(reply: unknown): void
}

/** A Lua script run by SHA, with a transparent fallback to EVAL on NOSCRIPT. */
export interface Script {
  readonly sha: string
  /** One call; see {@link Handling}. What `map` or `mapError` throws rejects the call. */
  run<T = unknown>(client: ScriptClient, keys: readonly string[], args: readonly (string | number)[], handling?: Handling<T>): Promise<T>
}

/**
 * Wraps a Lua script: the SHA is computed up front, each call is one `EVALSHA`, and a `NOSCRIPT`
 * reply (after `SCRIPT FLUSH`, a restart or a failover) is answered by one `EVAL`, which also
 * loads the script for the next call.
 *
 * A call is one promise on top of the client's (its deadline, the fallback and `map` included):
 * on a busy connection each extra promise layer is CPU the Redis round trip has to wait for.
 */
export function defineScript(lua: string): Script {
  const sha = createHash('sha1').update(lua).digest('hex')
  return {
    sha,
    run<T>(client: ScriptClient, keys: readonly string[], args: readonly (string | number)[], h?: Handling<T>) {
      return new Promise<T>((resolve, reject) => {
        const fail = (error: unknown): void => {
          if (!h?.mapError) return reject(error)
          try {
            resolve(h.mapError(error))
          } catch (mapped) {
            reject(mapped)
          }
        }
        const deadlines = h?.deadlines
        const entry = deadlines && h.ms !== undefined ? deadlines.track(h.ms, fail, h.sentAt) : undefined
        const answered = (reply: unknown): void => {
          if (entry && !deadlines!.settle(entry)) {
            h!.onLate?.(reply)
            return
          }
          try {
            resolve(h?.map ? h.map(reply) : (reply as T))
          } catch (error) {
            fail(error)
          }
        }
        const failed = (error: unknown): void => {
          if (!entry || deadlines!.settle(entry)) fail(error)
        }
        client.evalsha(sha, keys.length, ...keys, ...args).then(answered, (error: unknown) => {
          if (isNoScript(error)) client.eval(lua, keys.length, ...keys, ...args).then(answered, failed)
          else failed(error)
        })
      })
    },
  }
}

function isNoScript(error: unknown): boolean {
  return error instanceof Error && error.message.startsWith('NOSCRIPT')
}
