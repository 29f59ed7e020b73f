import { createHash } from 'node:crypto'
import type { Deadlines } from './deadline.js'

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

/**
 * The contract of a script: the names of its keys and of its arguments, in the order the script
 * gets them (`KEYS[1]`, `KEYS[2]`, ...; `ARGV[1]`, ...), and its Lua, written against those
 * names. The positions exist only here: the Lua is given each name's `KEYS[i]` or `ARGV[i]`, and
 * a call passes its keys and arguments by name.
 */
export interface ScriptSpec<K extends string, A extends string> {
  readonly keys: readonly K[]
  readonly args: readonly A[]
  /** The Lua source, given the Lua expression of each key and argument by name. */
  readonly lua: (keys: { readonly [k in K]: string }, args: { readonly [a in A]: string }) => string
}

/** A Lua script run by SHA, with a transparent fallback to EVAL on NOSCRIPT. */
export interface Script<K extends string, A extends string> {
  readonly sha: string
  /** The Lua source. */
  readonly lua: string
  readonly keys: readonly K[]
  readonly args: readonly A[]
  /**
   * One call; see {@link Handling}. What `map` or `mapError` throws rejects the call. `keys` may
   * carry more names than the script uses (e.g. a whole `ResourceKeys`); only its own are sent.
   */
  run<T = unknown>(
    client: ScriptClient,
    keys: { readonly [k in K]: string },
    args: { readonly [a in A]: string | number },
    handling?: Handling<T>,
  ): Promise<T>
}

/**
 * Defines a script from its contract: the Lua is built once, its SHA computed up front; each
 * call is one `EVALSHA`, and a `NOSCRIPT` reply (after `SCRIPT FLUSH`, a restart or a failover)
 * is answered by one `EVAL`, which also loads the script for the next call.
 *
 * A call is one promise on top of the client's (its deadline, the fallback and `map` included):
 * on a busy connection each extra promise layer is CPU the Redis round trip has to wait for.
 */
export function defineScript<const K extends string, const A extends string>(spec: ScriptSpec<K, A>): Script<K, A> {
  const keyNames = Object.fromEntries(spec.keys.map((k, i) => [k, `KEYS[${i + 1}]`])) as { [k in K]: string }
  const argNames = Object.fromEntries(spec.args.map((a, i) => [a, `ARGV[${i + 1}]`])) as { [a in A]: string }
  const lua = spec.lua(keyNames, argNames)
  const sha = createHash('sha1').update(lua).digest('hex')
  const nk = spec.keys.length
  const na = spec.args.length
  const keyOrder = spec.keys
  const argOrder = spec.args
  return {
    sha,
    lua,
    keys: spec.keys,
    args: spec.args,
    run<T>(client: ScriptClient, keys: { readonly [k in K]: string }, args: { readonly [a in A]: string | number }, h?: Handling<T>) {
      const argv = new Array<string | number>(nk + na)
      for (let i = 0; i < nk; i++) argv[i] = keys[keyOrder[i]!]
      for (let i = 0; i < na; i++) argv[nk + i] = args[argOrder[i]!]
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
        client.evalsha(sha, nk, ...argv).then(answered, (error: unknown) => {
          if (isNoScript(error)) client.eval(lua, nk, ...argv).then(answered, failed)
          else failed(error)
        })
      })
    },
  }
}

function isNoScript(error: unknown): boolean {
  return error instanceof Error && error.message.startsWith('NOSCRIPT')
}
