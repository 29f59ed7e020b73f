/**
 * Whether the Redis behind a Valkey GLIDE client is down, found out without GLIDE's help. GLIDE
 * emits no connection events, and with Redis down its calls are not refused: each waits out its
 * `requestTimeout` while GLIDE reconnects. An acquire would then fail only at its `waitMs`, where
 * ioredis and node-redis fail it at once with `ECONNREFUSED` as the cause.
 *
 * So the adapter asks the network itself: when a call fails without the server's answer (GLIDE's
 * `ConnectionError`, `TimeoutError`, or an error its core raised itself), or calls have gone
 * unanswered for {@link SILENCE_PROBE_MS} with nothing answered meanwhile, it opens a plain TCP
 * connection to each address it knows (`node:net`, bounded by {@link PROBE_TIMEOUT_MS}) and
 * closes it at once. Only a refusal of every address is "down":
 * - a connect that succeeds means the server's kernel accepts, so Redis is not down, however slow
 *   it is (a SIGSTOPped redis-server still accepts into its backlog): its calls fail at their
 *   deadlines, as before;
 * - a connect that neither succeeds nor is refused in time (a blackhole, a full backlog) says
 *   nothing, and nothing changes;
 * - a call answered while the probe ran overrules it.
 * Probing is bounded: one probe at a time (callers share the one in flight), none sooner than
 * {@link SILENCE_PROBE_MS} after the last, and the silence check runs at most once per
 * {@link SILENCE_PROBE_MS} however many calls are in flight. Once down, the addresses are probed
 * every {@link RECHECK_MS} until one accepts: then the connection is up again (GLIDE reconnects on
 * its own schedule; calls sent before it has fail by their deadlines).
 */
import { connect } from 'node:net'

/** An address to probe, as GLIDE's configuration lists it (`host` defaults to localhost, `port` to 6379). */
export interface ProbeAddress {
  readonly host?: string
  readonly port?: number
}

/** What the adapter hears from its probes. */
export interface ReachabilityEvents {
  /** Every address refused: `error` is the refusal (`connect ECONNREFUSED host:port`). */
  down(error: Error): void
  /** An address accepts again after {@link ReachabilityEvents.down}. */
  up(): void
}

/** How long calls may go unanswered, with no other call answered meanwhile, before the addresses are probed. */
export const SILENCE_PROBE_MS = 200
/** How long a probe's TCP connect may take: one neither made nor refused by then says nothing. */
export const PROBE_TIMEOUT_MS = 1_000
/** How often addresses found down are probed again, to see them come back. */
export const RECHECK_MS = 250

/**
 * A rejection that is the server's error reply: GLIDE's message for one starts with its preamble
 * (`An error was signalled by the server: - ResponseError: ...`) or with the reply's own code (a
 * script's `MYERR: ...`). Every other rejection was not answered: GLIDE's `ConnectionError`,
 * `TimeoutError`, and the `RequestError`s its core raises itself (a cluster client with every
 * node gone fails calls at once with `Connection in recovery- ClientError`).
 */
const SERVER_REPLY = /^(An error was signalled by the server|[A-Z][A-Z_]+[: ])/

type Verdict = { readonly refused: Error } | 'accepted' | 'unknown'

/** One TCP connect to `address`, closed at once. */
function probeOne(address: ProbeAddress): Promise<Verdict> {
  return new Promise((resolve) => {
    const socket = connect({ host: address.host ?? 'localhost', port: address.port ?? 6379 })
    const done = (verdict: Verdict) => {
      clearTimeout(timer)
      socket.destroy()
      resolve(verdict)
    }
    const timer = setTimeout(() => done('unknown'), PROBE_TIMEOUT_MS)
    timer.unref()
    socket.once('connect', () => done('accepted'))
    socket.once('error', (error: NodeJS.ErrnoException) =>
      done(error.code === 'ECONNREFUSED' ? { refused: error } : 'unknown'),
    )
  })
}

/** Follows a GLIDE client's calls and probes its addresses: see the top of this file. */
export class Reachability {
  readonly #addresses: () => readonly ProbeAddress[]
  readonly #events: ReachabilityEvents
  /** Calls sent and not settled. */
  #pending = 0
  /** Calls answered so far (a reply, or an error the server sent). */
  #answers = 0
  #silence: NodeJS.Timeout | undefined
  #answersAtSilence = 0
  #probing: Promise<void> | undefined
  #down: Error | undefined
  #recheck: NodeJS.Timeout | undefined
  #stopped = false
  /** When the last probe ended (performance.now()). */
  #probedAt = Number.NEGATIVE_INFINITY

  /** @param addresses the addresses to probe, read at each probe (a cluster's nodes change). */
  constructor(addresses: () => readonly ProbeAddress[], events: ReachabilityEvents) {
    this.#addresses = addresses
    this.#events = events
  }

  /** The refusal that made the connection down, while it is; undefined otherwise. */
  get down(): Error | undefined {
    return this.#down
  }

  /** Counts `call` in until it settles; a call GLIDE gave up unanswered starts a probe. */
  track<T>(call: Promise<T>): Promise<T> {
    this.#pending++
    if (this.#silence === undefined) this.#armSilence()
    call.then(this.#answered, this.#failed)
    return call
  }

  // Bound once: no closure per call.
  readonly #answered = (): void => {
    this.#pending--
    this.#answers++
  }

  readonly #failed = (error: unknown): void => {
    this.#pending--
    const message = (error as { message?: unknown } | null)?.message
    if (typeof message === 'string' && SERVER_REPLY.test(message)) this.#answers++
    else void this.probe()
  }

  #armSilence(): void {
    this.#answersAtSilence = this.#answers
    this.#silence = setTimeout(() => {
      this.#silence = undefined
      if (this.#pending === 0) return
      if (this.#answers === this.#answersAtSilence) void this.probe()
      this.#armSilence()
    }, SILENCE_PROBE_MS)
    this.#silence.unref()
  }

  /**
   * Probes every address: the probe in flight, if any; none if the last one ended less than
   * {@link SILENCE_PROBE_MS} ago (calls failing fast, a shard down, do not probe back to back).
   */
  probe(): Promise<void> {
    if (this.#probing) return this.#probing
    if (performance.now() - this.#probedAt < SILENCE_PROBE_MS) return Promise.resolve()
    this.#probing = this.#probe().finally(() => {
      this.#probing = undefined
      this.#probedAt = performance.now()
    })
    return this.#probing
  }

  async #probe(): Promise<void> {
    const answers = this.#answers
    const addresses = this.#addresses()
    if (addresses.length === 0) return
    const verdicts = await Promise.all(addresses.map(probeOne))
    if (verdicts.some((v) => v === 'accepted')) {
      if (this.#down !== undefined) this.#setUp()
      return
    }
    const first = verdicts[0]
    const allRefused = verdicts.every((v) => typeof v === 'object')
    if (!allRefused || typeof first !== 'object' || this.#down !== undefined) return
    // A call answered meanwhile: whatever the probe met, Redis answers.
    if (this.#answers !== answers) return
    this.#down = first.refused
    this.#startRecheck()
    this.#events.down(first.refused)
  }

  #startRecheck(): void {
    if (this.#stopped || this.#recheck !== undefined) return
    this.#recheck = setInterval(() => void this.probe(), RECHECK_MS)
    this.#recheck.unref()
  }

  #setUp(): void {
    this.#down = undefined
    clearInterval(this.#recheck)
    this.#recheck = undefined
    this.#events.up()
  }

  /**
   * Stops probing again to see the addresses come back (nobody listens any more: the Locker was
   * closed, or the user closed the client). Calls still tracked still probe once each, bounded as
   * before.
   */
  stop(): void {
    this.#stopped = true
    clearInterval(this.#recheck)
    this.#recheck = undefined
  }

  /** Probes again, after {@link stop}, to see the addresses come back while they are down (someone listens again). */
  resume(): void {
    this.#stopped = false
    if (this.#down !== undefined) this.#startRecheck()
  }
}
