/**
 * Write coalescing on Valkey GLIDE (a standalone `GlideClient`): the Locker's acquires and
 * releases sent on one client in one tick of the event loop go to GLIDE as one non-atomic `Batch`
 * (a pipeline) instead of one `customCommand` each.
 *
 * GLIDE already pipelines on its connection, but every call crosses into its Rust core as a
 * request of its own, and that crossing, not the socket, is most of a lock operation's CPU on
 * GLIDE: measured here (`scratch` sweep, 50 callers, one redis-server, EVALSHA of a one-line
 * script): 23-34 µs of client CPU per command one by one, 12-14 µs in batches of 5, 9-12 µs in
 * batches of 10. So, as on ioredis (write-coalescing.ts), for the scripts marked `batched`: the
 * first of a tick is sent at once (a lone acquire or release waits for nothing); further ones in
 * the same tick are gathered and sent together every {@link COALESCE_BATCH} commands and at the
 * end of the tick (on `process.nextTick`). Every other command of the Locker sends what is
 * gathered first, then itself ({@link GlideBatcher.flush}), so the Locker's commands reach Redis
 * in the order it made them. A command the user sends on the client directly in the same tick may
 * reach Redis before the Locker's gathered ones (GLIDE's calls cannot be held back as a socket's
 * writes can); nothing of the Locker depends on that order.
 *
 * Each command keeps its own outcome: the batch runs with `raiseOnError: false`, so a command
 * that failed (`NOSCRIPT`, a script's error) fails alone; a batch that failed as a whole (the
 * connection lost, GLIDE's request timeout) fails each of its commands with that error, as GLIDE
 * fails every command in flight.
 *
 * The `Batch` class is GLIDE's own, taken from `@valkey/valkey-glide` as this package resolves it,
 * and used only when the user's client is an instance of that module's `GlideClient` (the same
 * copy of GLIDE): a batch's commands are GLIDE's internal requests, which only its own class
 * makes.
 */
import { createRequire } from 'node:module'
import { COALESCE_BATCH } from './write-coalescing.js'

/** GLIDE's `Batch` (`new Batch(false)`: a pipeline), as far as it is used here. */
export interface GlideBatch {
  customCommand(args: string[]): unknown
}

/** The client side of a batch: GLIDE's `exec(batch, raiseOnError)`. */
export interface GlideBatchClient {
  customCommand(args: string[]): Promise<unknown>
  exec(batch: GlideBatch, raiseOnError: boolean): Promise<readonly unknown[] | null>
}

type BatchClass = new (isAtomic: boolean) => GlideBatch

/** GLIDE's module as `require` finds it from this package; null when it cannot be loaded. */
let glideModule: { readonly Batch?: unknown; readonly GlideClient?: unknown } | null | undefined

/**
 * GLIDE's `Batch` class, when `client` is a `GlideClient` of the GLIDE this package resolves
 * (`@valkey/valkey-glide`); undefined otherwise (another copy of GLIDE, or none to load).
 */
export function glideBatchClassFor(client: object): BatchClass | undefined {
  if (glideModule === undefined) {
    try {
      glideModule = createRequire(import.meta.url)('@valkey/valkey-glide') as NonNullable<typeof glideModule>
    } catch {
      glideModule = null
    }
  }
  const { Batch, GlideClient } = glideModule ?? {}
  if (typeof Batch !== 'function' || typeof GlideClient !== 'function') return undefined
  if (!(client instanceof (GlideClient as abstract new (...args: never[]) => unknown))) return undefined
  if (typeof (client as Partial<GlideBatchClient>).exec !== 'function') return undefined
  return Batch as BatchClass
}

/** A command gathered for the next batch. */
interface Held {
  readonly args: string[]
  resolve(value: unknown): void
  reject(error: unknown): void
}

/** The batcher of each client, shared by every Locker on it, so that theirs are batched together. */
const batchers = new WeakMap<object, GlideBatcher>()

/** The batcher of `client` (made on first use). */
export function glideBatcherOf(client: GlideBatchClient, Batch: BatchClass): GlideBatcher {
  let b = batchers.get(client)
  if (b === undefined) {
    b = new GlideBatcher(client, Batch)
    batchers.set(client, b)
  }
  return b
}

/** Gathers a client's batched commands of one tick (see the module comment). */
export class GlideBatcher {
  readonly #client: GlideBatchClient
  readonly #Batch: BatchClass
  /** The commands gathered since the last send; undefined: none sent in this tick yet. */
  #held: Held[] | undefined

  constructor(client: GlideBatchClient, Batch: BatchClass) {
    this.#client = client
    this.#Batch = Batch
  }

  /** A batched command: sent at once if it is the tick's first, else with the tick's others. */
  send(args: string[]): Promise<unknown> {
    const held = this.#held
    if (held === undefined) {
      // The tick's first: sent now; the tick's end sends what was gathered after it.
      this.#held = []
      process.nextTick(() => {
        this.flush()
        this.#held = undefined
      })
      return this.#client.customCommand(args)
    }
    return new Promise((resolve, reject) => {
      if (held.push({ args, resolve, reject }) >= COALESCE_BATCH) this.flush()
    })
  }

  /** Sends what is gathered now (before any other command of the Locker's). */
  flush(): void {
    const held = this.#held
    if (held === undefined || held.length === 0) return
    this.#held = []
    if (held.length === 1) {
      const [only] = held as [Held]
      this.#client.customCommand(only.args).then(only.resolve, only.reject)
      return
    }
    const batch = new this.#Batch(false)
    for (const h of held) batch.customCommand(h.args)
    this.#client.exec(batch, false).then(
      (replies) => {
        if (!Array.isArray(replies) || replies.length !== held.length) {
          const error = new Error(`GLIDE answered a batch of ${held.length} commands with ${describe(replies)}`)
          for (const h of held) h.reject(error)
          return
        }
        for (let i = 0; i < held.length; i++) {
          const reply: unknown = replies[i]
          if (reply instanceof Error) held[i]!.reject(reply)
          else held[i]!.resolve(reply)
        }
      },
      (error: unknown) => {
        for (const h of held) h.reject(error)
      },
    )
  }
}

function describe(replies: unknown): string {
  return Array.isArray(replies) ? `${replies.length} replies` : String(replies)
}
