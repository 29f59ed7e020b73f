/**
 * Once a second: scrapes `/metrics` of every instance watched (the live shop's, and those of the
 * run going on), reads `/api/state` of one instance of each shop (the database's counts, the
 * charges of the gateway's ledger, the locks held now), and turns it all into one snapshot for
 * every browser connected. The browser never talks to an instance: it sees the aggregate only.
 *
 * An instance frozen by the pause chaos does not answer: each request has a deadline shorter
 * than the interval, and a sample never waits for the one before it (an overlapping tick is
 * skipped), so a frozen instance shows as down instead of stalling the dashboard.
 */
import type { ShopState } from '../app.js'
import type { ProtectionMode } from '../protection.js'
import type { InstanceProcess } from '../supervisor.js'
import type { FlashSaleRuns } from './flash-sale-runs.js'
import { MetricsWindow } from './metrics-window.js'
import { parseLockCounters, type LockCounters } from './prometheus-text.js'
import type { DashboardHistory, DashboardSnapshot, HeldLockView, InvariantsView, MetricsPoint, RunView } from './wire.js'

/** Defaults of a {@link DashboardSampler}. */
export const SAMPLER_DEFAULTS = Object.freeze({
  /** Time between samples, in ms. */
  intervalMs: 1_000,
  /** Samples kept for a browser that connects (5 minutes at one a second). */
  historySamples: 300,
  /** Deadline of one request to an instance, in ms (below the interval). */
  requestTimeoutMs: 800,
})

/** The live shop, as the sampler sees it. */
export interface WatchedLiveShop {
  readonly mode: ProtectionMode
  instances(): readonly InstanceProcess[]
}

/** What a {@link DashboardSampler} needs. */
export interface DashboardSamplerDeps {
  readonly live?: WatchedLiveShop
  readonly runs: FlashSaleRuns
  readonly intervalMs?: number
  readonly historySamples?: number
  readonly requestTimeoutMs?: number
  /** Fetch, for tests. Default: the global one. */
  readonly fetch?: typeof fetch
}

// The locks of a shop whose instances did not answer this sample: the last answer, while it is this recent.
const STALE_LOCKS_MS = 3_000

const emptyPoint = (atMs: number): MetricsPoint => ({
  atMs,
  acquireRate: 0,
  successRatio: null,
  waitP50Ms: null,
  waitP99Ms: null,
  expiryRatio: null,
  lostLocks: 0,
  fencingRejections: 0,
  instancesUp: 0,
  instancesWatched: 0,
})

/**
 * The orders an instance's `/api/state` says are charged and still being recorded —
 * `inFlight.chargedUnpaidOrders`, counted apart from `violations.chargedUnpaidOrders` and left out
 * of `violations.total` — or undefined when the state does not say (a shop that counts them as
 * charged-not-paid).
 */
export function chargesInFlightOf(state: ShopState): number | undefined {
  const n = (state as ShopState & { readonly inFlight?: { readonly chargedUnpaidOrders?: unknown } }).inFlight?.chargedUnpaidOrders
  return typeof n === 'number' && Number.isSafeInteger(n) && n >= 0 ? n : undefined
}

/** The invariants of one shop's `/api/state` (every product summed). */
export function invariantsOf(state: ShopState, source: string, title: string, atMs: number): InvariantsView {
  const chargesInFlight = chargesInFlightOf(state)
  let initialStock = 0
  let stock = 0
  let sold = 0
  for (const p of state.products) {
    initialStock += p.initialStock ?? 0
    stock += p.stock
    sold += p.unitsSold
  }
  return {
    source,
    title,
    kind: 'live',
    mode: state.mode,
    initialStock,
    stock,
    sold,
    oversold: state.violations.oversoldUnits,
    doubleChargedOrders: state.violations.doubleChargedOrders,
    extraCharges: state.violations.extraCharges,
    lostUpdates: state.violations.lostUpdates,
    gatewayCharges: state.gatewayCharges,
    payments: state.payments,
    paidOrders: state.paidOrders,
    chargedUnpaidOrders: state.violations.chargedUnpaidOrders,
    paidUnchargedOrders: state.violations.paidUnchargedOrders,
    amountMismatchOrders: state.violations.amountMismatchOrders,
    unmatchedCharges: state.violations.unmatchedCharges,
    reconciledPaid: state.reconciled.paid,
    cancelledOrders: state.reconciled.cancelled,
    unsettledOrders: state.violations.unsettledOrders,
    violations: state.violations.total,
    atMs,
    ...(chargesInFlight === undefined ? {} : { chargesInFlight }),
  }
}

/** The final invariants of a finished run (from its report, counted after its instances and its gateway exited). */
export function finalInvariantsOf(run: RunView): InvariantsView | undefined {
  if (run.result === null) return undefined
  return {
    source: `run-${run.id}`,
    title: runTitle(run),
    kind: 'final',
    mode: run.mode,
    initialStock: run.stock,
    stock: run.result.remainingStock,
    sold: run.result.sold,
    oversold: run.result.oversold,
    doubleChargedOrders: run.result.doubleChargedOrders,
    extraCharges: run.result.extraCharges,
    lostUpdates: run.result.lostUpdates,
    gatewayCharges: run.result.gatewayCharges,
    payments: run.result.payments,
    paidOrders: run.result.paidOrders,
    chargedUnpaidOrders: run.result.chargedUnpaidOrders,
    paidUnchargedOrders: run.result.paidUnchargedOrders,
    amountMismatchOrders: run.result.amountMismatchOrders,
    unmatchedCharges: run.result.unmatchedCharges,
    reconciledPaid: run.result.reconciledPaid,
    cancelledOrders: run.result.cancelledOrders,
    ...(run.result.unsettledOrders === undefined ? {} : { unsettledOrders: run.result.unsettledOrders }),
    violations: run.result.violations,
    atMs: run.startedAtMs + (run.durationMs ?? 0),
    ...chaosOf(run),
  }
}

/** The chaos of a run and what of it landed, for its invariants card. */
export function chaosOf(run: RunView): Pick<InvariantsView, 'chaos' | 'chaosEvents' | 'staleWritesRejected' | 'expiredLocks'> {
  return {
    chaos: run.chaos,
    chaosEvents: run.chaosEvents,
    staleWritesRejected: run.result?.staleWritesRejected ?? null,
    expiredLocks: run.result?.expiredLocks ?? null,
  }
}

/** The card's title; the dashboard adds the mode and chaos in the words it uses everywhere. */
const runTitle = (run: RunView) => `Flash sale #${run.id}`

/**
 * The sampling loop and the latest snapshot.
 * @example
 * ```ts
 * const sampler = new DashboardSampler({ live: { mode: 'fenced', instances: () => shop.supervisor.instances }, runs })
 * sampler.start()
 * const unsubscribe = sampler.subscribe((json) => res.write(`event: snapshot\ndata: ${json}\n\n`))
 * ```
 */
export class DashboardSampler {
  readonly #deps: DashboardSamplerDeps
  readonly #intervalMs: number
  readonly #historySamples: number
  readonly #timeoutMs: number
  readonly #fetch: typeof fetch
  /** The live shop's window; a sale's has its own, made when the sale starts. */
  readonly #window = new MetricsWindow()
  #saleWindow: { runId: number; window: MetricsWindow } | undefined
  readonly #points: MetricsPoint[] = []
  readonly #listeners = new Set<(json: string) => void>()
  // Which instance of a shop answered /api/state last: asked first next time.
  readonly #stateCursor = new Map<string, number>()
  readonly #lastState = new Map<string, { state: ShopState; atMs: number }>()
  #snapshot: DashboardSnapshot
  #snapshotJson: string
  #timer: NodeJS.Timeout | undefined
  #busy = false

  constructor(deps: DashboardSamplerDeps) {
    this.#deps = deps
    this.#intervalMs = deps.intervalMs ?? SAMPLER_DEFAULTS.intervalMs
    this.#historySamples = deps.historySamples ?? SAMPLER_DEFAULTS.historySamples
    this.#timeoutMs = deps.requestTimeoutMs ?? SAMPLER_DEFAULTS.requestTimeoutMs
    this.#fetch = deps.fetch ?? fetch
    this.#snapshot = this.#compose(emptyPoint(Date.now()), [], [])
    this.#snapshotJson = JSON.stringify(this.#snapshot)
  }

  /** Starts sampling every `intervalMs`. The timer is unref()'d: it never keeps the process up. */
  start(): void {
    if (this.#timer) return
    void this.sample()
    this.#timer = setInterval(() => void this.sample(), this.#intervalMs)
    this.#timer.unref()
  }

  stop(): void {
    clearInterval(this.#timer)
    this.#timer = undefined
    this.#listeners.clear()
  }

  /** The latest snapshot. */
  get snapshot(): DashboardSnapshot {
    return this.#snapshot
  }

  /** The latest snapshot as JSON (serialized once per sample, whatever the number of browsers). */
  get snapshotJson(): string {
    return this.#snapshotJson
  }

  /** The points of the last minutes, oldest first. */
  history(): DashboardHistory {
    return { points: [...this.#points], intervalMs: this.#intervalMs }
  }

  /** Calls `fn` with each new snapshot's JSON. Returns the unsubscribe function. */
  subscribe(fn: (json: string) => void): () => void {
    this.#listeners.add(fn)
    return () => this.#listeners.delete(fn)
  }

  /** Subscribers now (one per open stream). */
  get subscribers(): number {
    return this.#listeners.size
  }

  /** Takes one sample now (the timer calls it; tests may too). Skipped while the previous one runs. */
  async sample(): Promise<void> {
    if (this.#busy) return
    this.#busy = true
    try {
      const atMs = Date.now()
      const liveInstances = this.#deps.live?.instances() ?? []
      const run = this.#deps.runs.active
      const runInstances = run ? this.#deps.runs.activeInstances : []
      const runSource = run ? `run-${run.id}` : undefined
      const scrape = (instances: readonly InstanceProcess[]) => Promise.all(instances.map(async (i) => [`${i.url}#${i.pid}`, await this.#scrape(i)] as const))
      const [liveScrapes, runScrapes, liveState, runState] = await Promise.all([
        scrape(liveInstances),
        scrape(runInstances),
        this.#state('live', liveInstances),
        runSource === undefined ? Promise.resolve(undefined) : this.#state(runSource, runInstances),
      ])
      // The live shop and the sale apart: a chart of their sum showed the sale's rejections as the live shop's.
      if (run !== undefined && this.#saleWindow?.runId !== run.id) this.#saleWindow = { runId: run.id, window: new MetricsWindow() }
      const live = this.#window.add(atMs, new Map(liveScrapes))
      let sale: MetricsPoint['sale'] = null
      if (run !== undefined && this.#saleWindow !== undefined) {
        const { atMs: _at, sale: _none, ...figures } = this.#saleWindow.window.add(atMs, new Map(runScrapes))
        sale = { runId: run.id, ...figures }
      }
      const point: MetricsPoint = { ...live, sale }
      this.#points.push(point)
      if (this.#points.length > this.#historySamples) this.#points.shift()

      const invariants: InvariantsView[] = []
      const locks: HeldLockView[] = []
      const liveNow = liveState ?? this.#lastState.get('live')
      if (liveNow !== undefined && this.#deps.live !== undefined) {
        invariants.push(invariantsOf(liveNow.state, 'live', 'Live shop · drop after drop', liveNow.atMs))
        if (atMs - liveNow.atMs <= STALE_LOCKS_MS) locks.push(...locksOf(liveNow.state, 'live'))
      }
      if (run !== undefined && runSource !== undefined) {
        const current = runState ?? this.#lastState.get(runSource)
        if (current !== undefined) invariants.push({ ...invariantsOf(current.state, runSource, `${runTitle(run)} (running)`, current.atMs), ...chaosOf(run) })
        if (current !== undefined && atMs - current.atMs <= STALE_LOCKS_MS) locks.push(...locksOf(current.state, runSource))
      } else {
        const last = this.#deps.runs.runs.find((r) => r.result !== null)
        const final = last === undefined ? undefined : finalInvariantsOf(last)
        if (final !== undefined) invariants.push(final)
      }
      // States of runs that are over are not needed any more.
      for (const key of this.#lastState.keys()) if (key !== 'live' && key !== runSource) this.#lastState.delete(key)

      this.#snapshot = this.#compose(point, invariants, locks)
      this.#snapshotJson = JSON.stringify(this.#snapshot)
      for (const listener of this.#listeners) {
        try {
          listener(this.#snapshotJson)
        } catch {
          // A broken stream must not stop the others.
        }
      }
    } finally {
      this.#busy = false
    }
  }

  #compose(point: MetricsPoint, invariants: InvariantsView[], locks: HeldLockView[]): DashboardSnapshot {
    return {
      atMs: point.atMs,
      point,
      invariants,
      locks,
      activeRun: this.#deps.runs.active ?? null,
      runs: this.#deps.runs.runs,
      comparison: this.#deps.runs.comparison,
      limits: this.#deps.runs.limits,
    }
  }

  async #get(url: string): Promise<Response | undefined> {
    try {
      const res = await this.#fetch(url, { signal: AbortSignal.timeout(this.#timeoutMs) })
      if (res.ok) return res
      await res.body?.cancel()
    } catch {
      // Down, frozen or too slow: this sample goes without it.
    }
    return undefined
  }

  async #scrape(instance: InstanceProcess): Promise<LockCounters | undefined> {
    const res = await this.#get(`${instance.url}/metrics`)
    if (res === undefined) return undefined
    try {
      return parseLockCounters(await res.text())
    } catch {
      return undefined
    }
  }

  /**
   * `/api/state` of one instance of a shop: the one that answered last. One try per sample, so a
   * sample stays within its interval; when it fails, the next sample asks the next instance.
   */
  async #state(source: string, instances: readonly InstanceProcess[]): Promise<{ state: ShopState; atMs: number } | undefined> {
    if (instances.length === 0) return undefined
    const index = (this.#stateCursor.get(source) ?? 0) % instances.length
    const res = await this.#get(`${(instances[index] as InstanceProcess).url}/api/state`)
    try {
      if (res !== undefined) {
        const entry = { state: (await res.json()) as ShopState, atMs: Date.now() }
        this.#lastState.set(source, entry)
        return entry
      }
    } catch {
      // Not JSON: as if it had not answered.
    }
    this.#stateCursor.set(source, (index + 1) % instances.length)
    return undefined
  }
}

function locksOf(state: ShopState, source: string): HeldLockView[] {
  return state.locks.map((l) => ({
    source,
    resource: l.resource,
    instance: l.instance,
    pid: l.pid,
    token: String(l.token),
    ttlLeftMs: l.ttlLeftMs,
    leaseLive: l.leaseLive,
  }))
}
