/**
 * What the dashboard server sends the browser, and what it accepts: the one description of the
 * wire format, imported (types only) by `apps/dashboard`. No imports here, so the dashboard's
 * compiler reads this file alone.
 *
 * Fencing tokens are decimal strings end to end: JSON has no bigint, and a token above 2^53 read
 * as a JS number would lose digits.
 */

/** Modes and chaos a run from the browser may ask for (the same as the CLI's). */
export type WireMode = 'unsafe' | 'lock' | 'fenced'
export type WireChaos = 'none' | 'pause' | 'redis-restart' | 'kill'

/** One sample of the aggregated lock metrics, taken about once a second. */
export interface MetricsPoint {
  /** Time of the sample, epoch ms. */
  readonly atMs: number
  /** Acquires per second over the window, every outcome. */
  readonly acquireRate: number
  /** Acquires that got the lock / all acquires, over the window; null with no acquire. */
  readonly successRatio: number | null
  /** Wait quantiles over the window (granted, timed out and aborted acquires), in ms; null with no wait observed. */
  readonly waitP50Ms: number | null
  readonly waitP99Ms: number | null
  /** (expired + lost) / every lock that ended, over the window; null when none ended. */
  readonly expiryRatio: number | null
  /** Locks found lost in this sample (since the previous one). */
  readonly lostLocks: number
  /** Writes the database refused for an old fencing token, in this sample. */
  readonly fencingRejections: number
  /** Instances whose /metrics answered this sample, and instances watched. */
  readonly instancesUp: number
  readonly instancesWatched: number
  /**
   * The same figures for the sale going on, from its own instances only (the fields above are the
   * live shop's alone); null or absent without a sale.
   */
  readonly sale?: SaleMetricsPoint | null
}

/** A sale's lock metrics in one sample: the figures of {@link MetricsPoint}, from the sale's instances. */
export type SaleMetricsPoint = Omit<MetricsPoint, 'atMs' | 'sale'> & { readonly runId: number }

/**
 * What a sale sold and charged, counted where each effect lands: units and orders in the shop's
 * database, charges in the payment gateway's own ledger. Shared by the live counts and a run's report.
 */
export interface SaleCounts {
  readonly sold: number
  readonly oversold: number
  /** Orders charged more than once at the gateway (its ledger). */
  readonly doubleChargedOrders: number
  /** Charges beyond the first of each order, at the gateway. */
  readonly extraCharges: number
  readonly lostUpdates: number
  /** Charges in the gateway's ledger. */
  readonly gatewayCharges: number
  /** Payments recorded in the shop's database, and orders marked paid there. */
  readonly payments: number
  readonly paidOrders: number
  /** Money, the gateway's ledger against the orders: charged and not paid, paid and not charged, charged another amount, charges of no order. */
  readonly chargedUnpaidOrders: number
  readonly paidUnchargedOrders: number
  readonly amountMismatchOrders: number
  readonly unmatchedCharges: number
  /** What the reconciler settled: payments recorded from the ledger, orders cancelled. */
  readonly reconciledPaid: number
  readonly cancelledOrders: number
  /**
   * Orders left pending with no payment intent past the abandon age (an instance died after the
   * purchase), their unit held, until the reconciler cancels them: a violation meanwhile. Absent
   * from a shop older than issue 34.
   */
  readonly unsettledOrders?: number
  /** Each broken invariant once (the shop's own count). */
  readonly violations: number
}

/**
 * The shop's invariants: stock and orders counted from its database, charges from the payment
 * gateway's own ledger — where the money moves, not the shop's payment rows, which a stale
 * holder may fail to write after its charge went through.
 */
export interface InvariantsView extends SaleCounts {
  /** `live` (the shop left running) or `run-<n>` (a flash sale from the dashboard). */
  readonly source: string
  readonly title: string
  /** `live`: counted now; `final`: counted after the run's instances drained and exited. */
  readonly kind: 'live' | 'final'
  readonly mode: WireMode
  /** Units on sale at the start (summed over the live shop's drops). */
  readonly initialStock: number
  /** Units left in the database. */
  readonly stock: number
  /** When the counts were taken, epoch ms. */
  readonly atMs: number
  /** A run's chaos and what of it landed (absent for the live shop). */
  readonly chaos?: WireChaos
  /** Pauses, Redis restarts or kills so far. */
  readonly chaosEvents?: number
  /** Writes refused for an old fencing token and leases that expired under a holder; null until the run's report. */
  readonly staleWritesRejected?: number | null
  readonly expiredLocks?: number | null
  /**
   * A live count's orders charged at the gateway whose payment the shop is still recording (the
   * holder that charged is working, or frozen, within its lease): not a violation until they
   * settle, and not in `chargedUnpaidOrders`. Absent when the shop does not say — then a live
   * `chargedUnpaidOrders` may include them, and the dashboard does not call it a violation. A
   * final count has none (its instances drained before counting).
   */
  readonly chargesInFlight?: number
}

/** One lock held now (or believed held by a frozen holder). */
export interface HeldLockView {
  /** The shop it belongs to: `live` or `run-<n>`. */
  readonly source: string
  readonly resource: string
  /** The holder's instance id (`shop-2`) and pid. */
  readonly instance: string
  readonly pid: number
  /** Fencing token, decimal string. */
  readonly token: string
  /** Lease left in Redis when read, ms; 0 when expired or taken over. */
  readonly ttlLeftMs: number
  /** False for a holder that still believes it holds a lock whose lease is gone (a frozen holder). */
  readonly leaseLive: boolean
}

/** A run asked for from the browser (`POST /api/runs`). */
export interface RunRequest {
  readonly mode: WireMode
  readonly chaos: WireChaos
  /** Default and bounds: `RunLimits`. */
  readonly buyers?: number
  readonly stock?: number
  /** Stock segments (`--segments N`): one of `RunLimits.segments`; default 1. */
  readonly segments?: number
}

/** The same sale in the three modes, one after the other (`POST /api/comparisons`): one seed, one chaos, one size. */
export interface ComparisonRequest {
  readonly chaos: WireChaos
  readonly buyers?: number
  readonly stock?: number
  readonly segments?: number
}

/** Bounds of a run from the browser, as the server enforces them. */
export interface RunLimits {
  readonly buyers: { readonly min: number; readonly max: number; readonly default: number }
  readonly stock: { readonly min: number; readonly max: number; readonly default: number }
  readonly instances: number
  /** The stock segments a run may ask for (`--segments N`: the stock split over N rows, each its own lock and fence). */
  readonly segments: readonly number[]
  /** The size of a comparison by default: one that bites (the lock alone fails visibly). */
  readonly compare: { readonly buyers: number; readonly stock: number }
  /** False when the chaos `redis-restart` cannot run here (REDIS_URL is set: no Redis of our own to restart). */
  readonly redisRestart: boolean
}

/** A run, running or finished. */
export interface RunView {
  /** 1, 2, 3... in the order started. */
  readonly id: number
  readonly mode: WireMode
  readonly chaos: WireChaos
  readonly buyers: number
  readonly stock: number
  readonly instances: number
  /** Stock segments of the sale (1: the stock on the product, under one lock). */
  readonly segments: number
  readonly seed: number
  /** The comparison this run belongs to (the same sale in the three modes), or null for a single sale. */
  readonly comparison: number | null
  /** The simulated gateway's latency, `"<min>-<max>"` ms (a Redis restart bites only while a charge is slow). */
  readonly gatewayLatencyMs: string
  readonly status: 'running' | 'done' | 'failed' | 'aborted'
  readonly startedAtMs: number
  /** While running: phase and buyers done. */
  readonly phase: 'starting' | 'selling' | 'draining' | 'counting' | 'finished'
  readonly buyersDone: number
  readonly ordered: number
  readonly soldOut: number
  readonly paid: number
  /** Pauses or Redis restarts so far. */
  readonly chaosEvents: number
  readonly durationMs: number | null
  /** From the report (database counts; charges from the gateway's ledger), once done. */
  readonly result: (SaleCounts & {
    readonly remainingStock: number
    readonly staleWritesRejected: number
    readonly expiredLocks: number
    /** Money charged beyond the first charge of each order, at the gateway, in cents (extra charges × the price). */
    readonly overchargedCents: number
    readonly acquireP99Ms: number | null
  }) | null
  /** Why a run failed. */
  readonly error: string | null
}

/** What the stream sends every second (`event: snapshot`) and `GET /api/dashboard` returns. */
export interface DashboardSnapshot {
  readonly atMs: number
  readonly point: MetricsPoint
  /** The live shop's invariants, and those of the current or last run. */
  readonly invariants: InvariantsView[]
  readonly locks: HeldLockView[]
  /** The run going on, if any. */
  readonly activeRun: RunView | null
  /** Runs, newest first (at most `RUN_HISTORY`, plus the runs of the last comparison). */
  readonly runs: RunView[]
  /** The runs of the last (or current) comparison, in mode order unsafe, lock, fenced; empty before any. */
  readonly comparison: RunView[]
  readonly limits: RunLimits
}

/** The first message of the stream (`event: history`): the points of the last minutes, oldest first. */
export interface DashboardHistory {
  readonly points: MetricsPoint[]
  /** Seconds between samples. */
  readonly intervalMs: number
}

/**
 * One step of a sale's incident, drawn from what the sale recorded: the chaos (pause, resume),
 * the instances' lock events, the gateway's answers to their charges and the database's answers
 * to their writes. `atMs` is ms from the sale's start (its first buyer).
 */
export interface IncidentStep {
  readonly atMs: number
  /** `A`: the holder that is frozen; `B`: the holder that takes over; `chaos`: the fault injector. */
  readonly actor: 'A' | 'B' | 'chaos'
  readonly instance: string | null
  /** The fencing token the actor held (decimal string), null without one. */
  readonly token: string | null
  readonly kind: 'acquired' | 'frozen' | 'lease-expired' | 'charge' | 'write' | 'resumed' | 'lost'
  /**
   * `ok`: it happened and was right; `refused`: the database or the gateway refused a stale
   * holder; `replayed`: the gateway answered from the key's idempotency record (no new charge);
   * `stale-accepted`: a holder whose lease was gone changed something (the lock alone).
   */
  readonly outcome: 'ok' | 'refused' | 'replayed' | 'stale-accepted'
  /** What happened, in one sentence. */
  readonly text: string
}

/** One incident of a sale (`GET /api/runs/:id/incident`): holder A frozen, B takes over, A wakes. */
export interface IncidentView {
  readonly runId: number
  readonly mode: WireMode
  /** The lock resource both held, e.g. `order:41` or `product:flash-1`. */
  readonly resource: string
  /** What A was doing when frozen. */
  readonly operation: 'authorize' | 'charge'
  readonly holderA: { readonly instance: string; readonly token: string }
  readonly holderB: { readonly instance: string; readonly token: string } | null
  /** Lease of the run's locks, ms. */
  readonly ttlMs: number
  readonly steps: readonly IncidentStep[]
  /** How it ended: A's write refused (fenced), or what A's stale write did (lock only). */
  readonly ending: 'refused' | 'stale-write-accepted' | 'second-charge' | 'incomplete'
  /** One sentence: what the incident proves. */
  readonly summary: string
  /** Pauses that landed on a lock holder in this sale; this incident is one of them. */
  readonly pausesOnHolders: number
}

/** `GET /api/runs/:id/incident`: the incident, or why there is none. */
export interface IncidentAnswer {
  readonly incident: IncidentView | null
  /** Why there is no incident (no lock in this mode, no pause landed, the run is not finished). */
  readonly reason: string | null
}

/** One charge of an order in the gateway's ledger, with who made it. */
export interface LedgerChargeView {
  readonly chargeId: string
  /** When the ledger row was written, ms from the sale's start. */
  readonly atMs: number
  readonly amountCents: number
  readonly idempotencyKey: string | null
  /** The instance that sent the charge and the token it held (decimal string); null when unknown. */
  readonly instance: string | null
  readonly token: string | null
  /** The shop recorded a payment for this charge (its `gatewayChargeId`). */
  readonly paymentRecorded: boolean
}

/** An order the gateway charged more than once (`GET /api/runs/:id/charged-twice`). */
export interface ChargedTwiceOrder {
  readonly orderId: number
  readonly status: string
  readonly amountCents: number | null
  /** The order row's fence (decimal string): "0" when nothing fenced wrote it. */
  readonly fenceToken: string
  readonly charges: readonly LedgerChargeView[]
  /** Payments the shop recorded for the order: instance and the charge each names. */
  readonly payments: readonly { readonly instance: string; readonly chargeId: string | null; readonly atMs: number }[]
}

/** `GET /api/runs/:id/charged-twice`. */
export interface ChargedTwiceAnswer {
  readonly runId: number
  readonly orders: readonly ChargedTwiceOrder[]
  /** Orders charged twice in all (the list stops at 50). */
  readonly total: number
}

/** Error answers of the dashboard API: `{error, message}`. */
export interface ApiError {
  readonly error: string
  readonly message: string
}
