import { createHash } from 'node:crypto'
import type { Deadlines } from '../deadline.js'

/**
 * How a script announces a release: `PUBLISH` (classic pub/sub), or `SPUBLISH` (sharded, Redis 7:
 * heard only on the shard that owns the channel's slot, which is the keys' slot, keys.ts).
 */
export type PublishCommand = 'PUBLISH' | 'SPUBLISH'

/** What running a script needs from a client; an ioredis `Redis` or `Cluster` fits. */
export interface ScriptClient {
  evalsha(sha: string, numKeys: number, ...args: (string | number)[]): Promise<unknown>
  eval(script: string, numKeys: number, ...args: (string | number)[]): Promise<unknown>
  /**
   * `evalsha` for a script whose calls may be written with the others of their tick
   * ({@link ScriptSpec.batched}); absent where the client has no such thing (it is `evalsha` then).
   */
  evalshaBatched?(sha: string, numKeys: number, ...args: (string | number)[]): Promise<unknown>
}

/**
 * Counts the calls a backend has on the wire, from send to the last reply (a late one, a
 * NOSCRIPT fallback included), so that closing can wait until nothing of it is left out there.
 */
export interface InFlight {
  begin(): void
  end(): void
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
  /** Counts the call from send to its last reply, whatever its deadline. */
  readonly inFlight?: InFlight
  /** Tags the call's deadline, so that the whole group can be given up at once (`Deadlines.failGroup`). */
  readonly group?: object
  /** Turns the reply into the result (default: the reply as it is), or into a promise of it. */
  map?(reply: unknown): T | PromiseLike<T>
  /** Turns an error (a failed call, a deadline, what `map` threw) into a result instead. */
  mapError?(error: unknown): T
  /** Gets the reply of a call that answered after its deadline (it is otherwise dropped). */
  onLate?(reply: unknown): void
}

/**
 * The contract of a script: the names of its keys and of its arguments, in the order the script
 * gets them, and its Lua, written against those names. The shipped Lua starts by naming them —
 * `local lockKey = KEYS[1]`, `local ownerId = ARGV[1]` — so it reads as its source does, and the
 * positions exist only in that header: a call passes its keys and arguments by name.
 */
export interface ScriptSpec<K extends string, A extends string> {
  readonly keys: readonly K[]
  readonly args: readonly A[]
  /** The Lua body, given the Lua local of each key (`<name>Key`) and argument (`<name>`) by name. */
  readonly lua: (keys: { readonly [k in K]: string }, args: { readonly [a in A]: string }) => string
  /**
   * Its calls may wait until the end of the tick to be written to the socket with the others
   * (client/write-coalescing.ts): the acquires' tries (only their caller waits on them) and the
   * release of a lock nobody waits for. Every other call hands on or renews something others
   * may wait for, and is written at once. Default false.
   */
  readonly batched?: boolean
}

/** A Lua script run by SHA, with a transparent fallback to EVAL on NOSCRIPT. */
export interface Script<K extends string, A extends string> {
  readonly sha: string
  /** The Lua source, as Redis runs it. */
  readonly lua: string
  readonly keys: readonly K[]
  readonly args: readonly A[]
  /** Whether its calls may be written with the others of their tick ({@link ScriptSpec.batched}). */
  readonly batched: boolean
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

const LUA_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/
const LUA_KEYWORDS = new Set(
  'and break do else elseif end false for function goto if in local nil not or repeat return then true until while'.split(
    ' ',
  ),
)

/**
 * Defines a script from its contract: the Lua is built once, its SHA computed up front; each
 * call is one `EVALSHA`, and a `NOSCRIPT` reply (after `SCRIPT FLUSH`, a restart or a failover)
 * is answered by one `EVAL`, which also loads the script for the next call.
 *
 * A call is one promise on top of the client's (its deadline, the fallback and `map` included):
 * on a busy connection each extra promise layer is CPU the Redis round trip has to wait for.
 */
export function defineScript<const K extends string, const A extends string>(spec: ScriptSpec<K, A>): Script<K, A> {
  const keyLocals = Object.fromEntries(spec.keys.map((k) => [k, `${k}Key`])) as { [k in K]: string }
  const argLocals = Object.fromEntries(spec.args.map((a) => [a, String(a)])) as { [a in A]: string }
  const names = [...Object.values<string>(keyLocals), ...Object.values<string>(argLocals)]
  for (const name of names) {
    if (!LUA_NAME.test(name) || LUA_KEYWORDS.has(name))
      throw new TypeError(`script name ${JSON.stringify(name)} is not a Lua name`)
  }
  if (new Set(names).size !== names.length) throw new TypeError(`script names repeat: ${names.join(', ')}`)
  const header = [
    ...spec.keys.map((k, i) => `local ${keyLocals[k]} = KEYS[${i + 1}]`),
    ...spec.args.map((a, i) => `local ${argLocals[a]} = ARGV[${i + 1}]`),
  ].join('\n')
  const lua = `${header}\n${spec.lua(keyLocals, argLocals).trim()}\n`
  const sha = createHash('sha1').update(lua).digest('hex')
  const nk = spec.keys.length
  const na = spec.args.length
  const keyOrder = spec.keys
  const argOrder = spec.args
  const batched = spec.batched === true
  return {
    sha,
    lua,
    keys: spec.keys,
    args: spec.args,
    batched,
    run<T>(
      client: ScriptClient,
      keys: { readonly [k in K]: string },
      args: { readonly [a in A]: string | number },
      h?: Handling<T>,
    ) {
      const argv = new Array<string | number>(nk + na)
      for (let i = 0; i < nk; i++) argv[i] = keys[keyOrder[i]!]
      for (let i = 0; i < na; i++) argv[nk + i] = args[argOrder[i]!]
      const inFlight = h?.inFlight
      inFlight?.begin()
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
        const entry = deadlines && h.ms !== undefined ? deadlines.track(h.ms, fail, h.sentAt, h.group) : undefined
        const answered = (reply: unknown): void => {
          if (entry && !deadlines!.settle(entry)) {
            h!.onLate?.(reply)
          } else {
            try {
              resolve(h?.map ? h.map(reply) : (reply as T))
            } catch (error) {
              fail(error)
            }
          }
          // After the handlers: a clean-up they start is counted before this call stops being.
          inFlight?.end()
        }
        const failed = (error: unknown): void => {
          if (!entry || deadlines!.settle(entry)) fail(error)
          inFlight?.end()
        }
        const sent =
          batched && client.evalshaBatched !== undefined
            ? client.evalshaBatched(sha, nk, ...argv)
            : client.evalsha(sha, nk, ...argv)
        sent.then(answered, (error: unknown) => {
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
