/**
 * The adapter of Valkey GLIDE (`@valkey/valkey-glide` 2.x, a standalone `GlideClient`) to the
 * client seam (redis-client.ts). Scripts go out as `EVALSHA`/`EVAL` through `customCommand`, one
 * command each, as with the other clients (not GLIDE's `invokeScript`: the engines compute the
 * SHA themselves and run the `NOSCRIPT` fallback, scripts/define-script.ts). What differs, and
 * what the engines rely on (measured against redis-server 7.0, test/client/glide-faults.test.ts):
 * - GLIDE's `NOSCRIPT` reply reads `... NoScriptError: No matching script ...`: the adapter
 *   rejects with an error whose message starts with `NOSCRIPT`, as the server's own does.
 * - A connection lost with commands in flight fails them at once (`ConnectionError`), and GLIDE
 *   does not send them again; it reconnects by itself.
 * - GLIDE emits no connection events, and with Redis down its calls are not refused: each waits
 *   out its `requestTimeout`. The adapter probes the configured addresses with a plain TCP
 *   connect when calls go unanswered (glide-reachability.ts): a refusal of every address makes its
 *   state `down`, with the `ECONNREFUSED` error as `lastError`, and the engines fail at once, as
 *   on the other clients; a connect that succeeds (a slow or paused Redis) changes nothing.
 * - GLIDE returns `CONFIG GET`'s map as `{ key, value }` entries: `call` flattens them to the
 *   `[key, value, ...]` list the other clients return.
 * - Pub/sub needs a client of its own: the adapter creates one from the user's client's
 *   configuration (GLIDE keeps it on the client), with a message callback, and subscribes to
 *   channels as waiters need them (GLIDE 2.5's dynamic `subscribe`).
 */
import { glideBatchClassFor, glideBatcherOf, type GlideBatchClient, type GlideBatcher } from './glide-batching.js'
import type { GlideClusterClient } from './glide-cluster-client.js'
import { Reachability, type ProbeAddress } from './glide-reachability.js'
import type {
  ClientEvents,
  ClientState,
  CommandTarget,
  RedisConnection,
  SubscriberConnection,
  SubscriberEvents,
} from './redis-client.js'

/** A GLIDE message as the pub/sub callback gets it. */
interface GlideMessage {
  readonly channel: unknown
  readonly message: unknown
}

/** The configuration a GLIDE client was created with, as far as the adapter reads or sets it. */
export interface GlideConfiguration {
  readonly addresses: readonly ProbeAddress[]
  readonly requestTimeout?: number
  readonly pubsubSubscriptions?: unknown
}

/**
 * A Valkey GLIDE standalone client (`GlideClient.createClient()` of `@valkey/valkey-glide` 2.x),
 * by shape: the Locker neither loads GLIDE nor names it in its types.
 */
export interface GlideClient {
  customCommand(args: string[]): Promise<unknown>
  subscribe(channels: Iterable<string>, timeoutMs: number): Promise<void>
  unsubscribe(channels: Iterable<string> | null, timeoutMs: number): Promise<void>
  close(errorMessage?: string): void
  getSubscriptions(): Promise<unknown>
}

/**
 * A GLIDE client for our subscriptions: made by the class of `client` (standalone or cluster)
 * from the configuration `client` was created with, plus a message callback.
 */
export function createSubscriberClient<C>(
  client: object,
  config: GlideConfiguration,
  events: SubscriberEvents,
): Promise<C> {
  const type = client.constructor as { createClient?: unknown } | undefined
  if (typeof type?.createClient !== 'function')
    return Promise.reject(new TypeError('the GLIDE client has no createClient to copy it with'))
  const create = type.createClient as (config: object) => Promise<C>
  return create.call(type, {
    ...config,
    pubsubSubscriptions: {
      channelsAndPatterns: {},
      callback: (m: GlideMessage) => events.message(String(m.channel), String(m.message)),
    },
  })
}

/** Whether `value` has the GLIDE client API (standalone or cluster). */
function hasGlideApi(value: unknown): boolean {
  const v = value as Partial<GlideClient> | null | undefined
  return (
    v != null &&
    typeof v.customCommand === 'function' &&
    typeof v.getSubscriptions === 'function' &&
    typeof v.subscribe === 'function' &&
    typeof v.close === 'function'
  )
}

/**
 * Whether `value` is a GLIDE cluster client (`GlideClusterClient`): its commands take a route,
 * and its class has `createClient` too; it is told apart by its cluster-only `scan` cursor
 * (`ClusterScanCursor`) and its name.
 */
export function isGlideClusterClient(value: unknown): value is GlideClusterClient {
  if (!hasGlideApi(value)) return false
  const v = value as { constructor?: { name?: unknown }; fcallWithRoute?: unknown }
  return typeof v.fcallWithRoute === 'function' || v.constructor?.name === 'GlideClusterClient'
}

/** Whether `value` is a GLIDE standalone client (`GlideClient`). */
export function isGlideClient(value: unknown): value is GlideClient {
  return hasGlideApi(value) && !isGlideClusterClient(value)
}

/**
 * The configuration `client` was created with, if GLIDE kept it where 2.x does (a field of the
 * client, `config`); undefined otherwise.
 */
export function glideConfigurationOf(client: GlideClient | GlideClusterClient): GlideConfiguration | undefined {
  const config = (client as unknown as { config?: Partial<GlideConfiguration> }).config
  if (config == null || typeof config !== 'object' || !Array.isArray(config.addresses)) return undefined
  return config as GlideConfiguration
}

const NO_SCRIPT = /NoScriptError/

/** `args` as GLIDE's `customCommand` takes them. */
export function strings(args: readonly (string | number)[]): string[] {
  const out = new Array<string>(args.length)
  for (let i = 0; i < args.length; i++) out[i] = String(args[i])
  return out
}

/** `CONFIG GET`'s map, which GLIDE returns as `{ key, value }` entries, as the flat list other clients return. */
export function flattened(reply: unknown): unknown {
  if (!Array.isArray(reply) || reply.length === 0) return reply
  const first: unknown = reply[0]
  if (first === null || typeof first !== 'object' || Array.isArray(first) || !('key' in first)) return reply
  return (reply as { key: unknown; value: unknown }[]).flatMap((e) => [e.key, e.value])
}

/** Rejects with an error whose message starts with `NOSCRIPT` (what scripts/define-script.ts looks for). */
export function noScriptAsRedisSaysIt(error: unknown): never {
  if (error instanceof Error && NO_SCRIPT.test(error.message))
    throw new Error(`NOSCRIPT ${error.message}`, { cause: error })
  throw error
}

/** How long a subscribe waits for the server's confirmation when the client sets no `requestTimeout`. */
export const SUBSCRIBE_TIMEOUT_MS = 5_000
/** How often a listener with an `end` handler checks whether the user closed the client. */
const CLOSED_CHECK_MS = 1_000

/** What both GLIDE adapters share: the state as the probes find it (glide-reachability.ts), and the listeners. */
export abstract class GlideAdapter {
  readonly kind = 'glide'
  readonly #listeners = new Set<ClientEvents>()
  readonly #closedCheck: { timer: NodeJS.Timeout | undefined } = { timer: undefined }
  /** Undefined when probing is off (`probe: false`): a Redis that is down is then seen only as calls that time out. */
  protected readonly reachability: Reachability | undefined

  readonly #glide: { readonly isClosed?: unknown }

  /** @param probe whether to probe {@link probeAddresses} when calls go unanswered. */
  constructor(glide: object, probe: boolean) {
    this.#glide = glide
    this.reachability = probe
      ? new Reachability(() => this.probeAddresses(), {
          down: (error) => {
            for (const l of [...this.#listeners]) {
              l.error?.(error)
              l.down?.()
            }
          },
          up: () => {
            for (const l of [...this.#listeners]) l.ready?.()
          },
        })
      : undefined
  }

  /**
   * `down` once the user closed the client (`ClosingError` on every call after), or while the
   * probes find every address refusing; `ready` otherwise.
   */
  get state(): ClientState {
    if (this.#glide.isClosed === true) return 'down'
    return this.reachability?.down === undefined ? 'ready' : 'down'
  }

  /** The refusal that made the state `down` (`connect ECONNREFUSED host:port`). */
  get lastError(): Error | undefined {
    return this.reachability?.down
  }

  /** The addresses the probes connect to. */
  protected abstract probeAddresses(): readonly ProbeAddress[]

  /** Counts `call` in for the probes. */
  protected tracked<T>(call: Promise<T>): Promise<T> {
    return this.reachability ? this.reachability.track(call) : call
  }

  /**
   * A subscriber on a GLIDE client of our own, created (by `create`) when the first channel is
   * subscribed. A creation that failed (Redis down) is tried again by the next subscribe: GLIDE
   * does not retry it. `ready` is reported when the client is created: GLIDE resubscribes by
   * itself after a reconnection (or, on a cluster, a slot's move) but says nothing of it, so release
   * messages sent meanwhile are lost, and waiters fall back on their backstops (the holder's TTL,
   * the safety poll).
   */
  protected lazySubscriber<C extends { close(): void }>(
    events: SubscriberEvents,
    create: () => Promise<C>,
    channels: {
      subscribe(sub: C, channel: string): Promise<void>
      unsubscribe(sub: C, channel: string): Promise<void>
    },
  ): SubscriberConnection {
    let closed = false
    let current: Promise<C> | undefined
    const open = (): Promise<C> => {
      if (current) return current
      const attempt = create()
      current = attempt
      attempt.then(
        (sub) => {
          if (closed) sub.close()
          else events.ready()
        },
        () => {
          if (current === attempt) current = undefined
        },
      )
      return attempt
    }
    return {
      subscribe: (channel) => open().then((sub) => channels.subscribe(sub, channel)),
      unsubscribe: (channel) =>
        (current ?? Promise.reject(new Error('not subscribed'))).then((sub) => channels.unsubscribe(sub, channel)),
      close: () => {
        closed = true
        current?.then(
          (sub) => sub.close(),
          () => {},
        )
      },
    }
  }

  /**
   * GLIDE has no connection events: `down` (with `error` first) and `ready` come from the probes;
   * `end` from checking every second whether the user closed the client (an unref'd timer, one per
   * adapter), so that our subscriber's client follows it out.
   */
  listen(events: ClientEvents): () => void {
    this.#listeners.add(events)
    this.reachability?.resume()
    if (events.end && this.#closedCheck.timer === undefined) {
      const timer = setInterval(() => {
        if (this.#glide.isClosed !== true) return
        clearInterval(timer)
        this.reachability?.stop()
        for (const l of [...this.#listeners]) l.end?.()
      }, CLOSED_CHECK_MS)
      timer.unref()
      this.#closedCheck.timer = timer
    }
    return () => {
      this.#listeners.delete(events)
      if (this.#listeners.size === 0) this.reachability?.stop()
      if (![...this.#listeners].some((l) => l.end) && this.#closedCheck.timer !== undefined) {
        clearInterval(this.#closedCheck.timer)
        this.#closedCheck.timer = undefined
      }
    }
  }
}

/** Adapts a GLIDE standalone client to the client seam. */
export class GlideConnection extends GlideAdapter implements RedisConnection {
  /** Always one Redis (a `GlideClusterClient` has its own adapter, glide-cluster-client.ts). */
  readonly cluster = false
  readonly client: GlideClient
  readonly #config: GlideConfiguration
  /**
   * Gathers the acquires and releases of a tick into one GLIDE `Batch` (glide-batching.ts);
   * undefined where GLIDE's `Batch` is not the client's own.
   */
  readonly #batcher: GlideBatcher | undefined
  /** Whether the acquires' tries and the releases are batched (`coalesceWrites`; on by default where it can be). */
  #coalesce: boolean

  /**
   * @param config what `client` was created with ({@link glideConfigurationOf}).
   * @param options `probe` (default true): probe the configured addresses when calls go unanswered.
   */
  constructor(client: GlideClient, config: GlideConfiguration, options: { probe?: boolean } = {}) {
    super(client, options.probe ?? true)
    this.client = client
    this.#config = config
    const Batch = glideBatchClassFor(client)
    this.#batcher = Batch && glideBatcherOf(client as unknown as GlideBatchClient, Batch)
    this.#coalesce = this.#batcher !== undefined
  }

  /** Why `coalesceWrites` cannot be on for this client; undefined when it can. */
  get noCoalescing(): string | undefined {
    return this.#batcher === undefined
      ? "GLIDE's Batch class could not be loaded as the client's own (@valkey/valkey-glide, as this package resolves it, is another copy or none)"
      : undefined
  }

  get coalesce(): boolean {
    return this.#coalesce
  }

  set coalesce(on: boolean) {
    this.#coalesce = on && this.#batcher !== undefined
  }

  protected probeAddresses(): readonly ProbeAddress[] {
    return this.#config.addresses
  }

  evalsha(sha: string, numKeys: number, ...args: (string | number)[]): Promise<unknown> {
    this.#batcher?.flush()
    return this.tracked(this.client.customCommand(['EVALSHA', sha, String(numKeys), ...strings(args)])).catch(
      noScriptAsRedisSaysIt,
    )
  }

  /** An acquire's try or a release: with the tick's others where `coalesce` is on (glide-batching.ts). */
  evalshaBatched(sha: string, numKeys: number, ...args: (string | number)[]): Promise<unknown> {
    if (!this.#coalesce || this.#batcher === undefined) return this.evalsha(sha, numKeys, ...args)
    return this.tracked(this.#batcher.send(['EVALSHA', sha, String(numKeys), ...strings(args)])).catch(
      noScriptAsRedisSaysIt,
    )
  }

  eval(script: string, numKeys: number, ...args: (string | number)[]): Promise<unknown> {
    this.#batcher?.flush()
    return this.tracked(this.client.customCommand(['EVAL', script, String(numKeys), ...strings(args)]))
  }

  call(...args: (string | number)[]): Promise<unknown> {
    this.#batcher?.flush()
    return this.tracked(this.client.customCommand(strings(args))).then(flattened)
  }

  connectionFor(): CommandTarget {
    return this
  }

  /** Subscribes on a GLIDE client of our own, a copy of the user's with a message callback (see `lazySubscriber`). */
  subscriber(events: SubscriberEvents): SubscriberConnection {
    const timeoutMs = this.#config.requestTimeout ?? SUBSCRIBE_TIMEOUT_MS
    const create = () => createSubscriberClient<GlideClient>(this.client, this.#config, events)
    return this.lazySubscriber(events, create, {
      subscribe: (sub, channel) => sub.subscribe([channel], timeoutMs),
      unsubscribe: (sub, channel) => sub.unsubscribe([channel], timeoutMs),
    })
  }
}
