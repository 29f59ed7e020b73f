/**
 * Flash sales started from the browser: the request validated against fixed enumerations and
 * bounds, one run at a time, and the last runs kept for the side-by-side comparison. A run is
 * `runFlashSale` itself — its own schema, instances, chaos and lock names — on the demo's Redis
 * and PostgreSQL, so nothing it does touches the live shop's locks or rows.
 */
import { CHAOS_KINDS, type ChaosKind } from '../chaos.js'
import { FLASH_SALE_DEFAULTS, type FlashSaleOptions, type FlashSaleProgress, type FlashSaleReport, type FlashSaleServices } from '../flash-sale.js'
import { PROTECTION_MODES, type ProtectionMode } from '../protection.js'
import type { RedisEndpoint } from '@fencelock/devkit/redis-endpoint'
import type { InstanceProcess } from '../supervisor.js'
import type { ChargedTwiceAnswer, ComparisonRequest, IncidentAnswer, RunLimits, RunRequest, RunView } from './wire.js'

/** How many finished runs are kept. */
export const RUN_HISTORY = 10

/** Bounds of a run from the browser: small enough that a run cannot swamp the machine. */
export const RUN_LIMITS_DEFAULTS = Object.freeze({
  buyers: Object.freeze({ min: 10, max: 2_000, default: 300 }),
  stock: Object.freeze({ min: 1, max: 500, default: 30 }),
  // As the live shop and `--once`: 4 instances, so a sale from the page is the one the terminal shows.
  instances: 4,
  // 1000 buyers / 100 units on the embedded database: the lock alone oversells and charges twice
  // under a paused holder (issue 27: 37 oversold vs 0 with 6 stale writes rejected); 200 / 20 was noise.
  compare: Object.freeze({ buyers: 1_000, stock: 100 }),
  // `--segments N` of the CLI, the values bench:shop measures.
  segments: Object.freeze([1, 2, 4, 8]),
})

/** The modes of a comparison, in the order they run and are shown. */
export const COMPARISON_MODES: readonly ProtectionMode[] = Object.freeze(['unsafe', 'lock', 'fenced'])

/**
 * The gateway latency of a `redis-restart` run: a restart lets a second holder in only while the
 * first one is inside a slow charge (docs/DEMO.md: 300-600 ms); at 30-80 ms the lock alone shows nothing.
 */
export const REDIS_RESTART_GATEWAY_LATENCY_MS = '300-600'

/** Base class of the errors of this module. */
export class FlashSaleRunError extends Error {
  /** The API's error code. */
  readonly code: string
  constructor(code: string, message: string) {
    super(message)
    this.name = 'FlashSaleRunError'
    this.code = code
  }
}

/** The request is not one the server accepts (400). */
export class InvalidRunRequestError extends FlashSaleRunError {
  /** The field at fault. */
  readonly field: string
  constructor(field: string, message: string) {
    super('invalid_run_request', message)
    this.name = 'InvalidRunRequestError'
    this.field = field
  }
}

/** A run is already going on (409). */
export class RunInProgressError extends FlashSaleRunError {
  readonly activeRunId: number
  constructor(activeRunId: number) {
    super('run_in_progress', `run #${activeRunId} is still going on; one run at a time`)
    this.name = 'RunInProgressError'
    this.activeRunId = activeRunId
  }
}

/** The chaos asked for cannot run here (422), e.g. `redis-restart` with `REDIS_URL` set. */
export class ChaosUnavailableError extends FlashSaleRunError {
  constructor(message: string) {
    super('chaos_unavailable', message)
    this.name = 'ChaosUnavailableError'
  }
}

const RUN_REQUEST_FIELDS = new Set(['mode', 'chaos', 'buyers', 'stock', 'segments'])
const COMPARISON_REQUEST_FIELDS = new Set(['chaos', 'buyers', 'stock', 'segments'])

function boundedInteger(body: Record<string, unknown>, field: 'buyers' | 'stock', bounds: { min: number; max: number; default: number }): number {
  const value = body[field]
  if (value === undefined) return bounds.default
  if (typeof value !== 'number' || !Number.isInteger(value) || value < bounds.min || value > bounds.max) {
    throw new InvalidRunRequestError(field, `${field} must be an integer from ${bounds.min} to ${bounds.max}`)
  }
  return value
}

/**
 * Validates a request body: `mode` and `chaos` from their enumerations, `buyers` and `stock`
 * integers within `limits`, no other field.
 * @throws InvalidRunRequestError naming the field at fault.
 */
export function parseRunRequest(body: unknown, limits: Pick<RunLimits, 'buyers' | 'stock'> & Partial<Pick<RunLimits, 'segments'>>): Required<RunRequest> {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) throw new InvalidRunRequestError('body', 'the body must be a JSON object {mode, chaos, buyers?, stock?}')
  const record = body as Record<string, unknown>
  for (const key of Object.keys(record)) {
    if (!RUN_REQUEST_FIELDS.has(key)) throw new InvalidRunRequestError(key.slice(0, 40), `unknown field ${JSON.stringify(key.slice(0, 40))} (fields: mode, chaos, buyers, stock, segments)`)
  }
  const { mode, chaos } = record
  if (typeof mode !== 'string' || !(PROTECTION_MODES as readonly string[]).includes(mode)) {
    throw new InvalidRunRequestError('mode', `mode must be one of ${PROTECTION_MODES.join(', ')}`)
  }
  if (typeof chaos !== 'string' || !(CHAOS_KINDS as readonly string[]).includes(chaos)) {
    throw new InvalidRunRequestError('chaos', `chaos must be one of ${CHAOS_KINDS.join(', ')}`)
  }
  return {
    mode: mode as ProtectionMode,
    chaos: chaos as ChaosKind,
    buyers: boundedInteger(record, 'buyers', limits.buyers),
    stock: boundedInteger(record, 'stock', limits.stock),
    segments: segmentsOf(record, limits.segments ?? RUN_LIMITS_DEFAULTS.segments),
  }
}

function segmentsOf(body: Record<string, unknown>, allowed: readonly number[]): number {
  const value = body.segments
  if (value === undefined) return 1
  if (typeof value !== 'number' || !allowed.includes(value)) throw new InvalidRunRequestError('segments', `segments must be one of ${allowed.join(', ')}`)
  return value
}

/**
 * Validates a comparison's body: `chaos` from its enumeration, `buyers` and `stock` integers within
 * `limits` (default: `limits.compare`), no other field.
 * @throws InvalidRunRequestError naming the field at fault.
 */
export function parseComparisonRequest(body: unknown, limits: Pick<RunLimits, 'buyers' | 'stock' | 'compare'> & Partial<Pick<RunLimits, 'segments'>>): Required<ComparisonRequest> {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) throw new InvalidRunRequestError('body', 'the body must be a JSON object {chaos, buyers?, stock?}')
  const record = body as Record<string, unknown>
  for (const key of Object.keys(record)) {
    if (!COMPARISON_REQUEST_FIELDS.has(key)) throw new InvalidRunRequestError(key.slice(0, 40), `unknown field ${JSON.stringify(key.slice(0, 40))} (fields: chaos, buyers, stock, segments)`)
  }
  const { mode: _mode, ...run } = parseRunRequest({ ...record, mode: 'fenced' }, {
    buyers: { ...limits.buyers, default: limits.compare.buyers },
    stock: { ...limits.stock, default: limits.compare.stock },
    ...(limits.segments === undefined ? {} : { segments: limits.segments }),
  })
  return run
}

/** Runs one flash sale (`runFlashSale`, or a stand-in in tests of the HTTP layer). */
export type FlashSaleRunner = (
  options: FlashSaleOptions,
  onProgress: (progress: FlashSaleProgress) => void,
  services: FlashSaleServices,
  signal: AbortSignal,
) => Promise<FlashSaleReport>

/** What a {@link FlashSaleRuns} needs. */
export interface FlashSaleRunsDeps {
  readonly runner: FlashSaleRunner
  /** The demo's Redis; a `redis-restart` run gets a redis-server of its own instead (unless `redisRestart` is false). */
  readonly redis: RedisEndpoint
  readonly database: { readonly connectionString: string; readonly origin: string }
  /** Options of every run, before the request's mode, chaos, buyers and stock. Default: FLASH_SALE_DEFAULTS. */
  readonly baseOptions?: Partial<FlashSaleOptions>
  readonly limits?: Partial<RunLimits>
  /** Told when a run starts (true) and ends (false): the live shop's crowd steps aside meanwhile. */
  readonly onActiveChange?: (active: boolean) => void
  /** Told when a run fails, for the server's log. */
  readonly onRunError?: (run: RunView, error: unknown) => void
  /** Clock, epoch ms. Default Date.now. */
  readonly now?: () => number
}

/** The seed of a comparison: one per comparison, apart from the single runs' seeds (their ids). */
const comparisonSeed = (comparison: number) => 1_000 + comparison

interface RunRecord {
  view: RunView
  instances: readonly InstanceProcess[]
  done: Promise<void>
}

/** What a finished run's report holds beyond its view: its incident and its charged-twice orders. */
interface RunDetails {
  readonly incident: IncidentAnswer
  readonly chargedTwice: ChargedTwiceAnswer
}

/**
 * The runs of the dashboard.
 * @example
 * ```ts
 * const runs = new FlashSaleRuns({ runner: runFlashSale, redis, database })
 * const run = runs.start(parseRunRequest(req.body, runs.limits))   // throws RunInProgressError (409)
 * ```
 */
export class FlashSaleRuns {
  readonly limits: RunLimits
  readonly #deps: FlashSaleRunsDeps
  readonly #now: () => number
  readonly #history: RunView[] = []
  /** Details of the finished runs still listed ({@link FlashSaleRuns.runs}), by run id. */
  readonly #details = new Map<number, RunDetails>()
  readonly #abort = new AbortController()
  #active: RunRecord | undefined
  #nextId = 1
  #nextComparison = 1
  /** The runs of the last comparison, kept whatever the history drops; and the ones still to run. */
  #comparison: { id: number; runs: RunView[]; queued: Array<Required<RunRequest>>; seed: number; open: boolean } | undefined

  constructor(deps: FlashSaleRunsDeps) {
    this.#deps = deps
    this.#now = deps.now ?? Date.now
    this.limits = {
      buyers: deps.limits?.buyers ?? RUN_LIMITS_DEFAULTS.buyers,
      stock: deps.limits?.stock ?? RUN_LIMITS_DEFAULTS.stock,
      instances: deps.limits?.instances ?? RUN_LIMITS_DEFAULTS.instances,
      compare: deps.limits?.compare ?? RUN_LIMITS_DEFAULTS.compare,
      segments: deps.limits?.segments ?? RUN_LIMITS_DEFAULTS.segments,
      redisRestart: deps.limits?.redisRestart ?? !process.env.REDIS_URL,
    }
  }

  /** The run going on, if any. */
  get active(): RunView | undefined {
    return this.#active?.view
  }

  /** The instances of the run going on (empty before they listen and after the run). */
  get activeInstances(): readonly InstanceProcess[] {
    return this.#active?.instances ?? []
  }

  /**
   * Finished runs, newest first, and the one going on first of all; the last comparison's runs are
   * kept (after the others) when the history has dropped them, so its baseline never goes away.
   */
  get runs(): RunView[] {
    const runs = this.#active ? [this.#active.view, ...this.#history] : [...this.#history]
    const kept = new Set(runs.map((r) => r.id))
    for (const r of this.comparison) if (!kept.has(r.id)) runs.push(r)
    return runs
  }

  /** The runs of the last (or current) comparison, in mode order (no lock, lock only, lock + fencing). */
  get comparison(): RunView[] {
    const c = this.#comparison
    if (c === undefined) return []
    const current = (r: RunView) => (this.#active?.view.id === r.id ? this.#active.view : (this.#history.find((h) => h.id === r.id) ?? r))
    return c.runs.map(current)
  }

  /**
   * Starts a comparison: the same sale (one seed, one chaos, one size) with no lock, the lock
   * alone, and lock + fencing, one after the other. Returns the first run's view.
   * @throws RunInProgressError while a run goes on; ChaosUnavailableError as {@link start}.
   */
  compare(request: Required<ComparisonRequest>): RunView {
    if (this.#active) throw new RunInProgressError(this.#active.view.id)
    const id = this.#nextComparison++
    const [first, ...rest] = COMPARISON_MODES.map((mode) => ({ ...request, mode }))
    const previous = this.#comparison
    this.#comparison = { id, runs: [], queued: rest, seed: comparisonSeed(id), open: true }
    try {
      return this.#startRun(first as Required<RunRequest>)
    } catch (error) {
      this.#comparison = previous
      this.#nextComparison--
      throw error
    }
  }

  /**
   * Starts a run in the background and returns its view.
   * @throws RunInProgressError while another run goes on; ChaosUnavailableError for `redis-restart` when it cannot run here.
   */
  start(request: Required<RunRequest>): RunView {
    if (this.#active) throw new RunInProgressError(this.#active.view.id)
    return this.#startRun(request)
  }

  #startRun(request: Required<RunRequest>): RunView {
    if (this.#abort.signal.aborted) throw new FlashSaleRunError('shutting_down', 'the demo is stopping')
    if (request.chaos === 'redis-restart' && !this.limits.redisRestart) {
      throw new ChaosUnavailableError('redis-restart restarts a redis-server the demo starts itself; REDIS_URL is set, so there is none to restart')
    }
    const id = this.#nextId++
    const comparison = this.#comparison?.open ? this.#comparison : undefined
    const base = { ...FLASH_SALE_DEFAULTS, ...this.#deps.baseOptions }
    const options: FlashSaleOptions = {
      ...base,
      instances: this.limits.instances,
      mode: request.mode,
      chaos: request.chaos,
      buyers: request.buyers,
      stock: request.stock,
      segments: request.segments,
      seed: comparison?.seed ?? id,
      gatewayLatencyMs: request.chaos === 'redis-restart' ? REDIS_RESTART_GATEWAY_LATENCY_MS : base.gatewayLatencyMs,
    }
    const startedAtMs = this.#now()
    const record: RunRecord = {
      view: {
        id,
        mode: options.mode,
        chaos: options.chaos,
        buyers: options.buyers,
        stock: options.stock,
        instances: options.instances,
        segments: options.segments ?? 1,
        seed: options.seed,
        comparison: comparison?.id ?? null,
        gatewayLatencyMs: options.gatewayLatencyMs,
        status: 'running',
        startedAtMs,
        phase: 'starting',
        buyersDone: 0,
        ordered: 0,
        soldOut: 0,
        paid: 0,
        chaosEvents: 0,
        durationMs: null,
        result: null,
        error: null,
      },
      instances: [],
      done: Promise.resolve(),
    }
    this.#active = record
    comparison?.runs.push(record.view)
    this.#deps.onActiveChange?.(true)
    // redis-restart restarts a Redis of the run's own (runFlashSale spawns it); the others share the demo's.
    const services: FlashSaleServices =
      options.chaos === 'redis-restart' ? { database: this.#deps.database } : { redis: this.#deps.redis, database: this.#deps.database }
    const onProgress = (p: FlashSaleProgress) => {
      if (p.instances !== undefined) record.instances = p.instances
      record.view = {
        ...record.view,
        phase: p.phase,
        buyersDone: p.done,
        ordered: p.totals?.ordered ?? record.view.ordered,
        soldOut: p.totals?.soldOut ?? record.view.soldOut,
        paid: p.totals?.paid ?? record.view.paid,
        chaosEvents: p.chaosCount,
      }
      if (p.phase !== 'selling') record.instances = []
    }
    record.done = this.#deps
      .runner(options, onProgress, services, this.#abort.signal)
      .then(
        (report) => {
          record.view = {
            ...record.view,
            status: 'done',
            phase: 'finished',
            chaosEvents: report.chaosEvents,
            durationMs: report.durationMs,
            result: {
              remainingStock: report.remainingStock,
              sold: report.sold,
              oversold: report.oversoldUnits,
              doubleChargedOrders: report.doubleChargedOrders,
              extraCharges: report.extraCharges,
              lostUpdates: report.lostUpdates,
              gatewayCharges: report.gatewayCharges,
              payments: report.payments,
              paidOrders: report.paidOrders,
              chargedUnpaidOrders: report.chargedUnpaidOrders,
              paidUnchargedOrders: report.paidUnchargedOrders,
              amountMismatchOrders: report.amountMismatchOrders,
              unmatchedCharges: report.unmatchedCharges,
              reconciledPaid: report.reconciledPaid,
              cancelledOrders: report.cancelledOrders,
              unsettledOrders: report.unsettledOrders,
              violations: report.violations,
              staleWritesRejected: report.staleWritesRejected,
              expiredLocks: report.expiredLocks,
              overchargedCents: report.extraCharges * FLASH_SALE_DEFAULTS.priceCents,
              acquireP99Ms: report.acquireP99Ms,
            },
          }
          this.#details.set(id, {
            incident: { incident: report.incident.incident === null ? null : { ...report.incident.incident, runId: id }, reason: report.incident.reason },
            chargedTwice: { runId: id, orders: report.chargedTwice.orders, total: report.chargedTwice.total },
          })
        },
        (error: unknown) => {
          const aborted = this.#abort.signal.aborted
          record.view = {
            ...record.view,
            status: aborted ? 'aborted' : 'failed',
            phase: 'finished',
            durationMs: this.#now() - startedAtMs,
            error: error instanceof Error ? error.message : String(error),
          }
          if (!aborted) this.#deps.onRunError?.(record.view, error)
        },
      )
      .finally(() => {
        record.instances = []
        this.#history.unshift(record.view)
        this.#history.length = Math.min(this.#history.length, RUN_HISTORY)
        const listed = new Set(this.runs.map((r) => r.id))
        for (const kept of this.#details.keys()) if (!listed.has(kept)) this.#details.delete(kept)
        this.#active = undefined
        if (comparison !== undefined) comparison.runs = comparison.runs.map((r) => (r.id === record.view.id ? record.view : r))
        const next = comparison?.queued.shift()
        if (next !== undefined && record.view.status === 'done' && !this.#abort.signal.aborted) {
          try {
            this.#startRun(next)
            return
          } catch (error) {
            this.#deps.onRunError?.(record.view, error)
          }
        }
        if (comparison !== undefined) {
          comparison.queued.length = 0
          comparison.open = false
        }
        this.#deps.onActiveChange?.(false)
      })
    return record.view
  }

  /**
   * The incident of run `id` (incident.ts), or why there is none; undefined for a run not listed.
   */
  incident(id: number): IncidentAnswer | undefined {
    const run = this.runs.find((r) => r.id === id)
    if (run === undefined) return undefined
    return this.#details.get(id)?.incident ?? { incident: null, reason: run.status === 'running' ? 'The sale is still running: its incident is drawn from its report.' : `The sale ended ${run.status}: there is no report to draw from.` }
  }

  /** The orders run `id` charged more than once (charged-twice.ts); undefined for a run not listed. */
  chargedTwice(id: number): ChargedTwiceAnswer | undefined {
    const run = this.runs.find((r) => r.id === id)
    if (run === undefined) return undefined
    return this.#details.get(id)?.chargedTwice ?? { runId: id, orders: [], total: 0 }
  }

  /** Resolves when the run going on (if any) has ended. */
  async settled(): Promise<void> {
    await this.#active?.done
  }

  /** Stops the run going on (its instances, chaos and schema are cleaned up by the run) and refuses new ones. */
  async close(): Promise<void> {
    this.#abort.abort()
    await this.settled()
  }
}
