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
 * - GLIDE emits no connection events: while the client is open its state is `ready`, and a
 *   Redis that is down is seen as calls that time out (GLIDE's `requestTimeout`, or the Locker's
 *   `commandTimeoutMs`, whichever comes first), not as a refused connection.
 * - GLIDE returns `CONFIG GET`'s map as `{ key, value }` entries: `call` flattens them to the
 *   `[key, value, ...]` list the other clients return.
 * - Pub/sub needs a client of its own: the adapter creates one from the user's client's
 *   configuration (GLIDE keeps it on the client), with a message callback, and subscribes to
 *   channels as waiters need them (GLIDE 2.5's dynamic `subscribe`).
 */
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
interface GlideConfiguration {
  readonly addresses: readonly object[]
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

/** The static side of a GLIDE client's class: how the adapter creates the subscriber's client. */
interface GlideClientClass {
  createClient(config: object): Promise<GlideClient>
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
export function isGlideClusterClient(value: unknown): boolean {
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
export function glideConfigurationOf(client: GlideClient): GlideConfiguration | undefined {
  const config = (client as unknown as { config?: Partial<GlideConfiguration> }).config
  if (config == null || typeof config !== 'object' || !Array.isArray(config.addresses)) return undefined
  return config as GlideConfiguration
}

const NO_SCRIPT = /NoScriptError/

function strings(args: readonly (string | number)[]): string[] {
  const out = new Array<string>(args.length)
  for (let i = 0; i < args.length; i++) out[i] = String(args[i])
  return out
}

/** `CONFIG GET`'s map, which GLIDE returns as `{ key, value }` entries, as the flat list other clients return. */
function flattened(reply: unknown): unknown {
  if (!Array.isArray(reply) || reply.length === 0) return reply
  const first: unknown = reply[0]
  if (first === null || typeof first !== 'object' || Array.isArray(first) || !('key' in first)) return reply
  return (reply as { key: unknown; value: unknown }[]).flatMap((e) => [e.key, e.value])
}

/** Rejects with an error whose message starts with `NOSCRIPT` (what scripts/define-script.ts looks for). */
function noScriptAsRedisSaysIt(error: unknown): never {
  if (error instanceof Error && NO_SCRIPT.test(error.message))
    throw new Error(`NOSCRIPT ${error.message}`, { cause: error })
  throw error
}

/** How long a subscribe waits for the server's confirmation when the client sets no `requestTimeout`. */
const SUBSCRIBE_TIMEOUT_MS = 5_000
/** How often a listener with an `end` handler checks whether the user closed the client. */
const CLOSED_CHECK_MS = 1_000

/** Adapts a GLIDE standalone client to the client seam. */
export class GlideConnection implements RedisConnection {
  /** GLIDE cluster clients are refused (choose-client.ts): always one Redis. */
  readonly cluster = false
  readonly kind = 'glide'
  readonly client: GlideClient
  readonly #config: GlideConfiguration

  /** @param config what `client` was created with ({@link glideConfigurationOf}). */
  constructor(client: GlideClient, config: GlideConfiguration) {
    this.client = client
    this.#config = config
  }

  /** GLIDE says only whether the client was closed (`ClosingError` on every call after). */
  get state(): ClientState {
    return (this.client as unknown as { isClosed?: unknown }).isClosed === true ? 'down' : 'ready'
  }

  evalsha(sha: string, numKeys: number, ...args: (string | number)[]): Promise<unknown> {
    return this.client.customCommand(['EVALSHA', sha, String(numKeys), ...strings(args)]).catch(noScriptAsRedisSaysIt)
  }

  eval(script: string, numKeys: number, ...args: (string | number)[]): Promise<unknown> {
    return this.client.customCommand(['EVAL', script, String(numKeys), ...strings(args)])
  }

  call(...args: (string | number)[]): Promise<unknown> {
    return this.client.customCommand(strings(args)).then(flattened)
  }

  connectionFor(): CommandTarget {
    return this
  }

  /**
   * GLIDE has no connection events: only `end` is followed, by checking every second whether the
   * user closed the client (an unref'd timer), so that our subscriber's client follows it out.
   */
  listen(events: ClientEvents): () => void {
    if (!events.end) return () => {}
    const end = events.end.bind(events)
    const timer = setInterval(() => {
      if (this.state !== 'down') return
      clearInterval(timer)
      end()
    }, CLOSED_CHECK_MS)
    timer.unref()
    return () => clearInterval(timer)
  }

  /**
   * A GLIDE client of our own, created from the user's client's configuration with a message
   * callback, when the first channel is subscribed. A creation that failed (Redis down) is tried
   * again by the next subscribe: GLIDE does not retry it. GLIDE resubscribes by itself after a
   * reconnection but says nothing of it: `ready` is reported when the client is created; release
   * messages sent while it reconnects are lost, and waiters fall back on their backstops (the
   * holder's TTL, the safety poll).
   */
  subscriber(events: SubscriberEvents): SubscriberConnection {
    const timeoutMs = this.#config.requestTimeout ?? SUBSCRIBE_TIMEOUT_MS
    let closed = false
    let current: Promise<GlideClient> | undefined
    const open = (): Promise<GlideClient> => {
      if (current) return current
      const attempt = this.#createSubscriber(events)
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
      subscribe: (channel) => open().then((sub) => sub.subscribe([channel], timeoutMs)),
      unsubscribe: (channel) =>
        (current ?? Promise.reject(new Error('not subscribed'))).then((sub) => sub.unsubscribe([channel], timeoutMs)),
      close: () => {
        closed = true
        current?.then(
          (sub) => sub.close(),
          () => {},
        )
      },
    }
  }

  async #createSubscriber(events: SubscriberEvents): Promise<GlideClient> {
    const type = this.client.constructor as Partial<GlideClientClass>
    if (typeof type.createClient !== 'function')
      throw new TypeError('the GLIDE client has no createClient to copy it with')
    return type.createClient({
      ...this.#config,
      pubsubSubscriptions: {
        channelsAndPatterns: {},
        callback: (m: GlideMessage) => events.message(String(m.channel), String(m.message)),
      },
    })
  }
}
