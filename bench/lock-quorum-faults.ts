// The two fault runs of the quorum scenarios (issue 15), inside a child of `npm run bench:lock`
// (bench/lock-child.ts). Servers of the quorum are SIGKILLed by the parent, at the child's
// request, and stay down until the child ends. The connections keep ioredis's defaults (offline
// queue on, 20 retries per request, no command timeout) with an 'error' listener and nothing
// else, so whatever a library does with a dead node is its own doing.
//
// - quorum-degraded: workers loop acquire → release, each on a key of its own. A window with
//   every server up, the kill, then a window with the killed servers down: acquire latency in
//   each, and how the child's memory grows after the kill.
// - quorum-majority-down: a majority killed, then acquires one after another, each on a fresh
//   key: how each ends (the error's class) and after how long.
//
// Both report progress while they run, so a child the parent has to kill on its deadline still
// says how far it got.
import { performance } from 'node:perf_hooks'
import { setTimeout as sleep } from 'node:timers/promises'
import type { Redis } from 'ioredis'
import type { ContenderInstance, Release } from './lock-contenders.js'
import { LatencyHistogram } from './support/latency-histogram.js'

/** What a fault run breaks, and for how long it runs after that. */
export interface FaultPlan {
  /** Indices into the job's servers that the parent SIGKILLs; they stay down until the child ends. */
  kill: number[]
  /** degraded: the window after the kill; majority-down: the time in which tries may start. In ms. */
  windowMs: number
  /** degraded: the window ends early once RSS grew by this much after the kill, MB (spares the machine). */
  rssCapMb: number
  /** majority-down: how many acquires to try, one after another. */
  tries: number
  /** majority-down: a try still unsettled after this long is given up on ("unsettled"), in ms. */
  tryDeadlineMs: number
}

/**
 * A call still waiting this long when a window closes is stuck, not just in flight: an
 * uncontended acquire or release takes a few ms here, and ours gives up a node after 2 s.
 */
export const STUCK_MS = 1_000

/** How long the fault part of a run may take at most, in ms (0 without one). */
export function faultMs(fault: FaultPlan | undefined): number {
  return fault ? fault.windowMs + fault.tryDeadlineMs : 0
}

/** Percentiles in ms (within 0.5 %: a log histogram), the max exact; NaN when there are no samples. */
export interface LatencySummary {
  count: number
  p50: number
  p99: number
  max: number
}

/** One window of the degraded run. */
export interface DegradedWindow {
  elapsedMs: number
  /** Acquire + release cycles completed in the window. */
  ops: number
  /** Acquires granted, failed, and still waiting at the window's end. */
  granted: number
  failed: number
  pending: number
  /** Acquires and releases still waiting at the window's end for longer than {@link STUCK_MS}. */
  stuckAcquires: number
  stuckReleases: number
  /** Releases still waiting for an answer at the window's end. */
  pendingReleases: number
  /**
   * Acquire latency: call to grant, or to failure, or to the window's end for one still waiting
   * (it waited that long at least), over all three.
   */
  acquireMs: LatencySummary
  /** Failed acquires and releases in the window, by error class (`release: <class>` for releases). */
  errors: Record<string, number>
  /** Commands the contender's connections sent in the window, those queued offline included. */
  sentTotal: number
}

export interface DegradedResult {
  contender: string
  scenario: 'quorum-degraded'
  nodes: number
  killed: number
  workers: number
  round: number
  /** False in a progress report. */
  final: boolean
  /** Set by the parent when the child did not finish: this is its last progress report. */
  unfinished?: { afterMs: number; why: string }
  /** Why the degraded window ended before its time (the RSS cap), if it did. */
  stoppedEarly?: string
  allUp: DegradedWindow
  degraded: DegradedWindow
  rssMb: { atKill: number; peak: number; end: number }
  heapUsedMb: { atKill: number; end: number }
  /** RSS at each second after the kill, MB. */
  rssTrailMb: number[]
  /** Commands waiting in the contender's connections' offline queues at the end (ioredis's own count). */
  offlineQueue: number
  /** 'error' events of the contender's connections over the run. */
  clientErrors: number
}

export interface MajorityDownTry {
  outcome: 'rejected' | 'granted' | 'unsettled'
  /** From the call to its outcome (to the try's deadline when unsettled), ms. */
  ms: number
  /** The error's class (its constructor's name), when rejected. */
  error?: string
  /** The start of its message, when rejected. */
  message?: string
}

export interface MajorityDownResult {
  contender: string
  scenario: 'quorum-majority-down'
  nodes: number
  killed: number
  round: number
  /** The wait given to every library where it has one (see each contender's notes), ms. */
  waitMs: number | undefined
  final: boolean
  unfinished?: { afterMs: number; why: string }
  planned: number
  tryDeadlineMs: number
  tries: MajorityDownTry[]
  rssMb: { atKill: number; end: number }
  offlineQueue: number
  clientErrors: number
}

export type FaultResult = DegradedResult | MajorityDownResult

/** What a fault run needs from its child process. */
export interface FaultHarness {
  readonly job: {
    readonly contender: string
    readonly workers: number
    readonly round: number
    readonly servers: readonly unknown[]
    readonly warmupMs: number
    readonly durationMs: number
    readonly waitMs?: number | undefined
    readonly keyPrefix: string
    readonly fault: FaultPlan
  }
  instanceOf(worker: number): ContenderInstance
  /** The contender's connections (not the harness's INFO ones). */
  readonly connections: readonly Redis[]
  sentTotal(): number
  clientErrors(): number
  /** Has the parent SIGKILL these servers; resolves once they are gone. */
  killServers(servers: number[]): Promise<void>
  progress(result: FaultResult): void
}

const MB = 1024 * 1024
const rssMb = () => process.memoryUsage.rss() / MB

/** An error's class as its library names it (redis-semaphore's errors keep `name` "Error"). */
function errorClass(error: unknown): string {
  if (!(error instanceof Error)) return typeof error
  const ctor = (error as { constructor?: { name?: unknown } }).constructor?.name
  return typeof ctor === 'string' && ctor !== '' && ctor !== 'Error' ? ctor : error.name
}

/** Commands waiting in the connections' offline queues (ioredis keeps them while reconnecting). */
function offlineQueued(connections: readonly Redis[]): number {
  return connections.reduce((sum, c) => sum + ((c as unknown as { offlineQueue?: { length: number } }).offlineQueue?.length ?? 0), 0)
}

function summarize(h: LatencyHistogram): LatencySummary {
  return { count: h.count, p50: h.quantile(0.5), p99: h.quantile(0.99), max: h.max }
}

class Window {
  start = Number.POSITIVE_INFINITY
  end = Number.POSITIVE_INFINITY
  ops = 0
  granted = 0
  failed = 0
  /** Acquire latency of the granted and the failed ones. */
  readonly latency = new LatencyHistogram()
  pending: number[] = []
  pendingReleases: number[] = []
  readonly errors = new Map<string, number>()
  sentAtStart = 0
  sentAtEnd = Number.NaN

  has(t: number): boolean {
    return t >= this.start && t < this.end
  }

  error(name: string): void {
    this.errors.set(name, (this.errors.get(name) ?? 0) + 1)
  }

  result(now: number, sentNow: number): DegradedWindow {
    const ended = Number.isFinite(this.end)
    return {
      elapsedMs: Number.isFinite(this.start) ? (ended ? this.end : now) - this.start : 0,
      ops: this.ops,
      granted: this.granted,
      failed: this.failed,
      pending: this.pending.length,
      stuckAcquires: this.pending.filter((ms) => ms > STUCK_MS).length,
      stuckReleases: this.pendingReleases.filter((ms) => ms > STUCK_MS).length,
      pendingReleases: this.pendingReleases.length,
      acquireMs: summarize(this.latency.with(this.pending)),
      errors: Object.fromEntries(this.errors),
      sentTotal: (ended ? this.sentAtEnd : sentNow) - this.sentAtStart,
    }
  }
}

/** quorum-degraded: see the top of this file. */
export async function runDegraded(h: FaultHarness): Promise<DegradedResult> {
  const { job } = h
  const plan = job.fault
  const allUp = new Window()
  const degraded = new Window()
  const windows = [allUp, degraded]
  const at = (t: number) => windows.find((w) => w.has(t))
  const waitingSince = new Array<number | undefined>(job.workers).fill(undefined)
  const releasingSince = new Array<number | undefined>(job.workers).fill(undefined)
  let stop = false

  const worker = async (w: number) => {
    const instance = h.instanceOf(w)
    const key = `${job.keyPrefix}:d:${w}`
    while (!stop) {
      const t0 = performance.now()
      waitingSince[w] = t0
      let release: Release
      try {
        release = await instance.acquire(key)
      } catch (error) {
        const t = performance.now()
        waitingSince[w] = undefined
        const win = at(t)
        if (win) {
          win.failed++
          win.latency.record(t - t0)
          win.error(errorClass(error))
        }
        // Never spin on a failing Redis: the failure is what gets reported.
        await sleep(1)
        continue
      }
      const t1 = performance.now()
      waitingSince[w] = undefined
      const won = at(t1)
      if (won) {
        won.granted++
        won.latency.record(t1 - t0)
      }
      releasingSince[w] = t1
      try {
        await release()
      } catch (error) {
        at(performance.now())?.error(`release: ${errorClass(error)}`)
        await sleep(1)
      }
      releasingSince[w] = undefined
      const win = at(performance.now())
      if (win) win.ops++
    }
  }
  const close = (win: Window) => {
    win.end = performance.now()
    win.sentAtEnd = h.sentTotal()
    win.pending = waitingSince.flatMap((t0) => (t0 === undefined ? [] : [win.end - t0]))
    win.pendingReleases = releasingSince.flatMap((t) => (t === undefined ? [] : [win.end - t]))
  }

  let rssAtKill = Number.NaN
  let heapAtKill = Number.NaN
  let peak = Number.NaN
  const trail: number[] = []
  let stoppedEarly: string | undefined
  const result = (final: boolean): DegradedResult => {
    const now = performance.now()
    const sentNow = h.sentTotal()
    const rss = rssMb()
    return {
      contender: job.contender,
      scenario: 'quorum-degraded',
      nodes: job.servers.length,
      killed: plan.kill.length,
      workers: job.workers,
      round: job.round,
      final,
      ...(stoppedEarly ? { stoppedEarly } : {}),
      allUp: allUp.result(now, sentNow),
      degraded: degraded.result(now, sentNow),
      rssMb: { atKill: rssAtKill, peak: Math.max(peak, rss), end: rss },
      heapUsedMb: { atKill: heapAtKill, end: process.memoryUsage().heapUsed / MB },
      rssTrailMb: [...trail],
      offlineQueue: offlineQueued(h.connections),
      clientErrors: h.clientErrors(),
    }
  }

  for (let w = 0; w < job.workers; w++) void worker(w)
  await sleep(job.warmupMs)
  allUp.start = performance.now()
  allUp.sentAtStart = h.sentTotal()
  await sleep(job.durationMs)
  close(allUp)

  rssAtKill = rssMb()
  heapAtKill = process.memoryUsage().heapUsed / MB
  peak = rssAtKill
  await h.killServers(plan.kill)
  degraded.start = performance.now()
  degraded.sentAtStart = h.sentTotal()
  const endAt = degraded.start + plan.windowMs
  let nextSecond = degraded.start + 1000
  while (performance.now() < endAt) {
    await sleep(Math.min(250, Math.max(1, endAt - performance.now())))
    const rss = rssMb()
    if (rss > peak) peak = rss
    if (performance.now() >= nextSecond) {
      nextSecond += 1000
      trail.push(rss)
      h.progress(result(false))
    }
    if (rss - rssAtKill > plan.rssCapMb) {
      stoppedEarly = `RSS grew by more than ${plan.rssCapMb} MB ${((performance.now() - degraded.start) / 1000).toFixed(1)} s after the kill`
      break
    }
  }
  close(degraded)
  stop = true
  return result(true)
}

/** quorum-majority-down: see the top of this file. */
export async function runMajorityDown(h: FaultHarness): Promise<MajorityDownResult> {
  const { job } = h
  const plan = job.fault
  const instance = h.instanceOf(0)
  // Warm up with every server up (scripts loaded, connections used), like every other run.
  const warmEnd = performance.now() + job.warmupMs
  while (performance.now() < warmEnd) {
    const release = await instance.acquire(`${job.keyPrefix}:warm`)
    await release()
  }
  const tries: MajorityDownTry[] = []
  let rssAtKill = Number.NaN
  const result = (final: boolean): MajorityDownResult => ({
    contender: job.contender,
    scenario: 'quorum-majority-down',
    nodes: job.servers.length,
    killed: plan.kill.length,
    round: job.round,
    waitMs: job.waitMs,
    final,
    planned: plan.tries,
    tryDeadlineMs: plan.tryDeadlineMs,
    tries: [...tries],
    rssMb: { atKill: rssAtKill, end: rssMb() },
    offlineQueue: offlineQueued(h.connections),
    clientErrors: h.clientErrors(),
  })

  rssAtKill = rssMb()
  await h.killServers(plan.kill)
  const start = performance.now()
  for (let i = 0; i < plan.tries && performance.now() - start < plan.windowMs; i++) {
    const t0 = performance.now()
    const acquire = instance.acquire(`${job.keyPrefix}:down:${i}`)
    let timer: NodeJS.Timeout | undefined
    const deadline = new Promise<'unsettled'>((resolve) => (timer = setTimeout(() => resolve('unsettled'), plan.tryDeadlineMs)))
    const outcome = await Promise.race([acquire.then((release) => ({ release }), (error: unknown) => ({ error })), deadline])
    clearTimeout(timer)
    const ms = performance.now() - t0
    if (outcome === 'unsettled') {
      // Given up on, not cancelled (none of the libraries can be): keep it from crashing us later.
      acquire.then((release) => release().catch(() => {}), () => {})
      tries.push({ outcome, ms })
    } else if ('release' in outcome) {
      tries.push({ outcome: 'granted', ms })
      // A grant with a majority down would be a bug; give it back, but never wait long for that.
      await Promise.race([outcome.release().catch(() => {}), sleep(1000)])
    } else {
      const error = outcome.error
      tries.push({ outcome: 'rejected', ms, error: errorClass(error), message: (error instanceof Error ? error.message : String(error)).slice(0, 200) })
    }
    h.progress(result(false))
  }
  return result(true)
}
