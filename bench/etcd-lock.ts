// The etcd rows of `npm run bench:lock` (issue 36): our Locker on etcd (`new Locker(etcd3Client)`)
// against the `etcd3` package's own `Lock` (`client.lock(name)`) as the anchor, on etcd members the
// run spawns itself (1 member, and 3 members), their data directories on tmpfs (/dev/shm): no
// fsync cost, which a real deployment pays on every Raft commit. Benchmarks only.
//
// Each measurement runs in this process (not a child), one contender at a time, in rounds whose
// order rotates, each on a fresh etcd3 client that is closed afterwards. Requests are counted by
// the members themselves: the delta of `grpc_server_msg_received_total` (every unary call and
// every message on a stream: keep-alives, watch requests) on /metrics, summed over the members,
// per acquire+release. On this loaded machine the counts are firm, the times are not.
import { get } from 'node:http'
import { setTimeout as sleep } from 'node:timers/promises'
import { randomUUID } from 'node:crypto'
import { Locker, type Leadership } from '@fencelock/lock'
import { startEtcdCluster, type EtcdCluster } from '@fencelock/devkit/etcd-server'
import { Etcd3, EtcdLockFailedError, type Campaign } from 'etcd3'
import { quantile } from './support/stats.js'

/** The etcd scenarios' names, as `--scenarios` takes them. */
export const ETCD_SCENARIOS = ['etcd-uncontended', 'etcd-contended', 'etcd-election'] as const
export type EtcdScenario = (typeof ETCD_SCENARIOS)[number]

export type EtcdContenderId = 'ours' | 'etcd3-lock'

export interface EtcdPlan {
  /** Member counts, each a cluster spawned for the run. */
  members: number[]
  uncontended: { workers: number[]; warmupMs: number; durationMs: number; rounds: number }
  contended: { workers: number; holdMs: number; warmupMs: number; durationMs: number; rounds: number; anchorRetryMs: number }
  /** Handovers: `candidates` campaign for one election; each leader resigns after `holdMs` and campaigns again. */
  election: { candidates: number; holdMs: number; warmupMs: number; durationMs: number; rounds: number }
  ttlSeconds: number
  /** Where the members' data directories were (the tmpfs). */
  dataDir: string
}

/** Requests the members received during a measurement, per gRPC method, summed over members. */
export type RequestCounts = Record<string, number>

export interface EtcdUncontendedResult {
  scenario: 'etcd-uncontended'
  contender: EtcdContenderId
  members: number
  workers: number
  round: number
  ops: number
  elapsedMs: number
  requests: RequestCounts
}

export interface EtcdContendedResult {
  scenario: 'etcd-contended'
  contender: EtcdContenderId
  members: number
  workers: number
  round: number
  acquisitions: number
  elapsedMs: number
  waitP50Ms: number
  waitP99Ms: number
  /** Grants per worker in the window: fewest and most. */
  fewest: number
  most: number
  /** Two holders at once (the lock's own check; must be 0). */
  overlaps: number
  /** Failed tries (the anchor's EtcdLockFailedError, each a retry). */
  retries: number
  requests: RequestCounts
}

export type EtcdElectionContenderId = 'ours' | 'etcd3-election'

export interface EtcdElectionResult {
  scenario: 'etcd-election'
  contender: EtcdElectionContenderId
  members: number
  candidates: number
  round: number
  /** Terms begun in the counted window. */
  terms: number
  elapsedMs: number
  /** From the leader's resignation (the call) to the next leader's `elected`, ms. */
  handoverP50Ms: number
  handoverP99Ms: number
  /** Terms per candidate in the window: fewest and most. */
  fewest: number
  most: number
  /** An `elected` while another candidate still led (must be 0). */
  overlaps: number
  /** A term not above the one before it (must be 0). */
  termsOutOfOrder: number
  requests: RequestCounts
}

export interface EtcdReport {
  plan: EtcdPlan
  etcdVersion: string
  uncontended: EtcdUncontendedResult[]
  contended: EtcdContendedResult[]
  election: EtcdElectionResult[]
  failures: string[]
}

export const ETCD_CONTENDERS: ReadonlyArray<{ id: EtcdContenderId; label: string }> = [
  { id: 'ours', label: 'ours: `new Locker(etcd3Client)`' },
  { id: 'etcd3-lock', label: 'anchor: etcd3 `client.lock(name)`' },
]

export const ETCD_ELECTION_CONTENDERS: ReadonlyArray<{ id: EtcdElectionContenderId; label: string }> = [
  { id: 'ours', label: 'ours: `locker.lead(name)`' },
  { id: 'etcd3-election', label: 'anchor: etcd3 `client.election(name).campaign(value)`' },
]

/** A lock taken: its release. */
type Release = () => Promise<unknown>

/** One contender on one client: `take(key)` resolves once `key` is held. */
interface Instance {
  take(key: string): Promise<{ release: Release; retries: number }>
  close(): Promise<void>
}

/**
 * Ours: one Locker per worker in the contended run (each is one process's Locker, with a lease
 * of its own), one Locker shared by the workers uncontended (each worker its own key).
 */
function oursInstance(client: Etcd3, ttlSeconds: number): Instance {
  const locker = new Locker(client, { ttlMs: ttlSeconds * 1000 })
  return {
    take: async (key) => {
      const lock = await locker.acquire(key, { waitMs: 60_000 })
      return { release: () => lock.release(), retries: 0 }
    },
    close: () => locker.close(),
  }
}

/**
 * The anchor: etcd3's Lock grants a lease, then puts the key where none exists (one transaction);
 * its release revokes the lease. It does not wait: on a held key it revokes its lease and throws
 * EtcdLockFailedError, so a contended worker tries again after `retryMs` (a poll; etcd3 has no
 * queue).
 */
function anchorInstance(client: Etcd3, ttlSeconds: number, retryMs: number): Instance {
  return {
    take: async (key) => {
      let retries = 0
      for (;;) {
        const lock = client.lock(key).ttl(ttlSeconds)
        try {
          await lock.acquire()
          return { release: () => lock.release(), retries }
        } catch (error) {
          if (!(error instanceof EtcdLockFailedError)) throw error
          retries++
          if (retryMs > 0) await sleep(retryMs)
        }
      }
    },
    close: async () => {},
  }
}

function instance(id: EtcdContenderId, client: Etcd3, plan: EtcdPlan): Instance {
  return id === 'ours' ? oursInstance(client, plan.ttlSeconds) : anchorInstance(client, plan.ttlSeconds, plan.contended.anchorRetryMs)
}

/** Reads `grpc_server_msg_received_total` per method from one member's /metrics. */
function receivedCounts(port: number): Promise<RequestCounts> {
  return new Promise((resolve, reject) => {
    const request = get({ host: '127.0.0.1', port, path: '/metrics', timeout: 10_000 }, (response) => {
      let body = ''
      response.on('data', (chunk: Buffer) => (body += chunk.toString()))
      response.on('end', () => {
        const counts: RequestCounts = {}
        for (const m of body.matchAll(/^grpc_server_msg_received_total\{([^}]*)\} (\S+)$/gm)) {
          const method = /grpc_method="([^"]+)"/.exec(m[1]!)?.[1] ?? '?'
          counts[method] = (counts[method] ?? 0) + Number(m[2])
        }
        resolve(counts)
      })
    })
    request.on('timeout', () => request.destroy(new Error(`etcd /metrics on port ${port}: no answer in 10 s`)))
    request.on('error', reject)
  })
}

async function clusterCounts(cluster: EtcdCluster): Promise<RequestCounts> {
  const all: RequestCounts = {}
  for (const m of cluster.members) {
    for (const [method, n] of Object.entries(await receivedCounts(m.clientPort))) all[method] = (all[method] ?? 0) + n
  }
  return all
}

function delta(before: RequestCounts, after: RequestCounts): RequestCounts {
  const out: RequestCounts = {}
  for (const [method, n] of Object.entries(after)) {
    const d = n - (before[method] ?? 0)
    if (d > 0) out[method] = d
  }
  return out
}

/**
 * Workers loop acquire → release until the window ends; the warm-up's operations are not counted,
 * and the request counts cover the counted window only (read after every worker has stopped, so
 * a few operations in flight at the window's start are counted on both sides: small against the
 * thousands a window holds).
 */
async function uncontended(cluster: EtcdCluster, id: EtcdContenderId, workers: number, plan: EtcdPlan, round: number, prefix: string): Promise<EtcdUncontendedResult> {
  const client = new Etcd3({ hosts: [...cluster.endpoints] })
  const inst = instance(id, client, plan)
  try {
    const p = plan.uncontended
    let counting = false
    let stop = false
    let ops = 0
    const loop = async (w: number) => {
      const key = `${prefix}-${w}`
      while (!stop) {
        const { release } = await inst.take(key)
        await release()
        if (counting) ops++
      }
    }
    const { elapsedMs, requests } = await countedWindow(cluster, p, Array.from({ length: workers }, (_, w) => loop(w)), {
      count: (on) => (counting = on),
      stop: () => (stop = true),
    })
    return { scenario: 'etcd-uncontended', contender: id, members: cluster.members.length, workers, round, ops, elapsedMs, requests }
  } finally {
    await inst.close()
    client.close()
  }
}

/** 20 workers on one key, each holding it `holdMs`; each worker its own instance on a shared client. */
async function contended(cluster: EtcdCluster, id: EtcdContenderId, plan: EtcdPlan, round: number, key: string): Promise<EtcdContendedResult> {
  const client = new Etcd3({ hosts: [...cluster.endpoints] })
  const p = plan.contended
  const instances = Array.from({ length: p.workers }, () => instance(id, client, plan))
  try {
    let counting = false
    let stop = false
    let holders = 0
    let overlaps = 0
    let retries = 0
    const waits: number[] = []
    const grants = new Array<number>(p.workers).fill(0)
    let acquisitions = 0
    const loop = async (w: number) => {
      while (!stop) {
        const t0 = performance.now()
        const taken = await instances[w]!.take(key)
        const waited = performance.now() - t0
        if (++holders > 1) overlaps++
        if (counting) {
          waits.push(waited)
          grants[w]!++
          acquisitions++
          retries += taken.retries
        }
        await sleep(p.holdMs)
        holders--
        await taken.release()
      }
    }
    const { elapsedMs, requests } = await countedWindow(cluster, p, Array.from({ length: p.workers }, (_, w) => loop(w)), {
      count: (on) => (counting = on),
      stop: () => (stop = true),
    })
    return {
      scenario: 'etcd-contended',
      contender: id,
      members: cluster.members.length,
      workers: p.workers,
      round,
      acquisitions,
      elapsedMs,
      waitP50Ms: waits.length > 0 ? quantile(waits, 0.5) : NaN,
      waitP99Ms: waits.length > 0 ? quantile(waits, 0.99) : NaN,
      fewest: Math.min(...grants),
      most: Math.max(...grants),
      overlaps,
      retries,
      requests,
    }
  } finally {
    await Promise.allSettled(instances.map((i) => i.close()))
    client.close()
  }
}

/**
 * One candidate of the election rows: `campaignOnce()` campaigns and resolves with the term once
 * elected (undefined if `resign()` came first); `resign()` ends the campaign (giving up the term
 * if leading) and resolves once the library says it has.
 */
interface Candidate {
  campaignOnce(): Promise<bigint | undefined>
  resign(): Promise<void>
  close(): Promise<void>
}

/** Ours: one Locker per candidate (its own lease, as one process has), a new `lead()` per campaign. */
function oursCandidate(client: Etcd3, name: string, ttlSeconds: number): Candidate {
  const locker = new Locker(client, { ttlMs: ttlSeconds * 1000 })
  let current: Leadership | undefined
  let pending: ((term: bigint | undefined) => void) | undefined
  const resign = async () => {
    pending?.(undefined)
    pending = undefined
    await current?.stop()
  }
  return {
    campaignOnce: () =>
      new Promise((resolve, reject) => {
        pending = resolve
        current = locker.lead(name, {
          onElected: (term) => {
            pending = undefined
            resolve(term)
          },
          onDemoted: (reason) => {
            if (reason !== 'stopped') reject(new Error(`ours: a leader demoted (${reason}) without resigning`))
          },
        })
      }),
    resign,
    close: async () => {
      await resign()
      await locker.close()
    },
  }
}

/**
 * The anchor: etcd3's Election. A campaign grants a lease of its own, creates its key and waits for
 * every earlier key's deletion; `resign()` revokes the lease. The term checked is the campaign's
 * key revision, which etcd3 keeps in a field it does not declare (read for the order check only).
 */
function anchorCandidate(client: Etcd3, name: string, ttlSeconds: number, fail: (error: unknown) => void): Candidate {
  const election = client.election(name, ttlSeconds)
  let current: Campaign | undefined
  let pending: ((term: bigint | undefined) => void) | undefined
  const resign = async () => {
    pending?.(undefined)
    pending = undefined
    await current?.resign()
  }
  return {
    campaignOnce: () =>
      new Promise((resolve) => {
        pending = resolve
        const campaign = election.campaign(randomUUID())
        current = campaign
        campaign.on('error', fail)
        campaign.on('elected', () => {
          pending = undefined
          const revision = (campaign as unknown as { keyRevision?: unknown }).keyRevision
          resolve(typeof revision === 'string' || typeof revision === 'number' ? BigInt(revision) : -1n)
        })
      }),
    resign,
    close: resign,
  }
}

/**
 * Handovers: every candidate campaigns for one election; the leader holds its term `holdMs`, then
 * resigns and campaigns again at the back of the line. A handover is the time from the leader's
 * resignation (the call) to the next leader's `elected`.
 */
async function election(cluster: EtcdCluster, id: EtcdElectionContenderId, plan: EtcdPlan, round: number, name: string): Promise<EtcdElectionResult> {
  const client = new Etcd3({ hosts: [...cluster.endpoints] })
  const p = plan.election
  let failure: unknown
  let stopping = false
  // A campaign resigned by the run's own stop while it was still starting (etcd3 grants its lease,
  // then puts its key under it) fails with the lease revoked: that is the teardown, not a result.
  const fail = (error: unknown) => {
    if (!stopping) failure ??= error
  }
  const candidates = Array.from({ length: p.candidates }, () =>
    id === 'ours' ? oursCandidate(client, name, plan.ttlSeconds) : anchorCandidate(client, name, plan.ttlSeconds, fail),
  )
  try {
    let counting = false
    let stop = false
    let leader: number | undefined
    let resignedAt: number | undefined
    let lastTerm: bigint | undefined
    let overlaps = 0
    let termsOutOfOrder = 0
    let terms = 0
    const handovers: number[] = []
    const perCandidate = new Array<number>(p.candidates).fill(0)
    const loop = async (i: number) => {
      const c = candidates[i]!
      while (!stop) {
        if (failure !== undefined) throw failure
        const term = await c.campaignOnce()
        if (term === undefined) continue
        const now = performance.now()
        if (leader !== undefined) overlaps++
        leader = i
        if (lastTerm !== undefined && term <= lastTerm) termsOutOfOrder++
        lastTerm = term
        if (counting) {
          terms++
          perCandidate[i]!++
          if (resignedAt !== undefined) handovers.push(now - resignedAt)
        }
        await sleep(p.holdMs)
        leader = undefined
        resignedAt = performance.now()
        await c.resign()
      }
    }
    const { elapsedMs, requests } = await countedWindow(cluster, p, Array.from({ length: p.candidates }, (_, i) => loop(i)), {
      count: (on) => (counting = on),
      stop: () => {
        stop = true
        stopping = true
        // Candidates still waiting are woken by their resignation (the leader resigns by itself).
        for (const c of candidates) void c.resign().catch(fail)
      },
    })
    if (failure !== undefined) throw failure
    return {
      scenario: 'etcd-election',
      contender: id,
      members: cluster.members.length,
      candidates: p.candidates,
      round,
      terms,
      elapsedMs,
      handoverP50Ms: handovers.length > 0 ? quantile(handovers, 0.5) : NaN,
      handoverP99Ms: handovers.length > 0 ? quantile(handovers, 0.99) : NaN,
      fewest: Math.min(...perCandidate),
      most: Math.max(...perCandidate),
      overlaps,
      termsOutOfOrder,
      requests,
    }
  } finally {
    await Promise.allSettled(candidates.map((c) => c.close()))
    client.close()
  }
}

/**
 * The measured window of a run: the workers (already looping) warm up for `warmupMs`, then count for
 * `durationMs` between two snapshots of the cluster's request counters, then stop; resolves once
 * every worker has ended.
 */
async function countedWindow(
  cluster: EtcdCluster,
  p: { readonly warmupMs: number; readonly durationMs: number },
  loops: Promise<void>[],
  workers: { count(on: boolean): void; stop(): void },
): Promise<{ elapsedMs: number; requests: RequestCounts }> {
  const running = settle(loops)
  await sleep(p.warmupMs)
  const before = await clusterCounts(cluster)
  workers.count(true)
  const started = performance.now()
  await sleep(p.durationMs)
  workers.count(false)
  const elapsedMs = performance.now() - started
  workers.stop()
  await running.done()
  return { elapsedMs, requests: delta(before, await clusterCounts(cluster)) }
}

/**
 * Worker loops that may fail: a failure is kept (never an unhandled rejection) and stops the
 * others; `done()` waits for all of them and rethrows the first failure.
 */
function settle(loops: Promise<void>[]): { done(): Promise<void> } {
  const all = Promise.allSettled(loops)
  void all
  return {
    done: async () => {
      const failed = (await all).find((r) => r.status === 'rejected')
      if (failed) throw failed.reason
    },
  }
}

/** Round r starts at contender r (mod n), so no contender always runs first. */
function rotated<T>(list: readonly T[], r: number): T[] {
  const k = r % list.length
  return [...list.slice(k), ...list.slice(0, k)]
}

export interface EtcdRunHooks {
  /** Called before each measurement (the harness's quiet wait and load sample). */
  before(): Promise<void>
  interrupted(): boolean
  log(line: string): void
}

/**
 * Runs the etcd scenarios named in `scenarios`, on a cluster of each size in `plan.members`
 * (spawned with their data on `plan.dataDir`, stopped by PID before it returns).
 */
export async function runEtcdScenarios(scenarios: readonly EtcdScenario[], plan: EtcdPlan, runId: string, hooks: EtcdRunHooks): Promise<EtcdReport> {
  const report: EtcdReport = { plan, etcdVersion: '', uncontended: [], contended: [], election: [], failures: [] }
  // The devkit spawner puts each member's directory in os.tmpdir(): point it at the tmpfs.
  const savedTmp = process.env.TMPDIR
  process.env.TMPDIR = plan.dataDir
  let n = 0
  try {
    for (const size of plan.members) {
      if (hooks.interrupted()) break
      const cluster = await startEtcdCluster(size)
      try {
        report.etcdVersion ||= await etcdVersion(cluster.members[0]!.clientPort)
        hooks.log(`etcd ${report.etcdVersion}: ${size} member(s) on ${cluster.endpoints.join(', ')}, data in ${plan.dataDir}`)
        const measure = async <T>(what: string, run: () => Promise<T>): Promise<T | undefined> => {
          await hooks.before()
          try {
            return await run()
          } catch (error) {
            const message = `${what}: ${error instanceof Error ? error.message : String(error)}`
            hooks.log(`FAILED: ${message}`)
            report.failures.push(message)
            return undefined
          }
        }
        if (scenarios.includes('etcd-uncontended')) {
          const p = plan.uncontended
          for (let r = 0; r < p.rounds; r++) {
            for (const workers of p.workers) {
              for (const c of rotated(ETCD_CONTENDERS, r)) {
                if (hooks.interrupted()) break
                const res = await measure(`etcd-uncontended N=${size} ${workers}w ${c.id}`, () => uncontended(cluster, c.id, workers, plan, r, `bench:${runId}:${n++}`))
                if (!res) continue
                hooks.log(`etcd-uncontended N=${size} ${workers}w ${c.id}: ${Math.round((res.ops / res.elapsedMs) * 1000)} ops/s, ${(total(res.requests) / Math.max(1, res.ops)).toFixed(2)} requests/op`)
                report.uncontended.push(res)
              }
            }
          }
        }
        if (scenarios.includes('etcd-contended')) {
          for (let r = 0; r < plan.contended.rounds; r++) {
            for (const c of rotated(ETCD_CONTENDERS, r)) {
              if (hooks.interrupted()) break
              const res = await measure(`etcd-contended N=${size} ${c.id}`, () => contended(cluster, c.id, plan, r, `bench:${runId}:${n++}`))
              if (!res) continue
              hooks.log(`etcd-contended N=${size} ${c.id}: ${Math.round((res.acquisitions / res.elapsedMs) * 1000)} acq/s, wait p99 ${res.waitP99Ms.toFixed(1)} ms, grants ${res.fewest}-${res.most}, overlaps ${res.overlaps}, ${(total(res.requests) / Math.max(1, res.acquisitions)).toFixed(2)} requests/grant`)
              report.contended.push(res)
            }
          }
        }
        if (scenarios.includes('etcd-election')) {
          for (let r = 0; r < plan.election.rounds; r++) {
            for (const c of rotated(ETCD_ELECTION_CONTENDERS, r)) {
              if (hooks.interrupted()) break
              const res = await measure(`etcd-election N=${size} ${c.id}`, () => election(cluster, c.id, plan, r, `bench-${runId}-${n++}`))
              if (!res) continue
              hooks.log(`etcd-election N=${size} ${c.id}: ${Math.round((res.terms / res.elapsedMs) * 1000)} terms/s, handover p50 ${res.handoverP50Ms.toFixed(1)} ms p99 ${res.handoverP99Ms.toFixed(1)} ms, terms ${res.fewest}-${res.most} per candidate, overlaps ${res.overlaps}, out of order ${res.termsOutOfOrder}, ${(total(res.requests) / Math.max(1, res.terms)).toFixed(2)} requests/term`)
              report.election.push(res)
            }
          }
        }
      } finally {
        await cluster.dispose()
      }
    }
  } finally {
    if (savedTmp === undefined) delete process.env.TMPDIR
    else process.env.TMPDIR = savedTmp
  }
  return report
}

export const total = (counts: RequestCounts): number => Object.values(counts).reduce((a, b) => a + b, 0)

/** The member's version from /version (`etcdserver`). */
function etcdVersion(port: number): Promise<string> {
  return new Promise((resolve) => {
    const request = get({ host: '127.0.0.1', port, path: '/version', timeout: 5_000 }, (response) => {
      let body = ''
      response.on('data', (chunk: Buffer) => (body += chunk.toString()))
      response.on('end', () => resolve(/"etcdserver"\s*:\s*"([^"]+)"/.exec(body)?.[1] ?? 'unknown'))
    })
    request.on('timeout', () => request.destroy())
    request.on('error', () => resolve('unknown'))
  })
}
