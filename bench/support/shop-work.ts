// The work one flash sale costs, per unit sold: what each process sent (SQL statements by first
// keyword, Redis commands by name: counted in the clients by ./count-work.mjs, preloaded into the
// run's processes), the HTTP requests each served, the lock cycles, what Redis itself counted
// (INFO commandstats, on a redis-server of the bench's own), and the CPU each process used over
// the selling phase (/proc): the shop instances, the gateway, the load generator (this process),
// the run's PostgreSQL backends (found by their application_name, the run's schema) and Redis.
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import {
  runFlashSale,
  type FlashSaleOptions,
  type FlashSaleProgress,
  type FlashSaleReport,
  type FlashSaleServices,
} from '@fencelock/demo-shop/flash-sale'
import { Redis } from 'ioredis'
import pg from 'pg'
import { descendantPids, machineCpuSeconds, processCpuSeconds } from './machine.js'

const PRELOAD = join(dirname(fileURLToPath(import.meta.url)), 'count-work.mjs')

/** Counts by name. */
export type Tally = Record<string, number>

/** What one process's counter wrote. */
interface ProcessCounts {
  readonly role: string
  readonly pid: number
  readonly sql: Tally
  readonly redis: Tally
  readonly http: number
}

/** CPU seconds over the selling phase, by process group. */
export interface WorkCpu {
  readonly instances: number
  readonly gateway: number
  readonly load: number
  readonly postgres: number
  readonly redis: number
  readonly machine: number
}

/** What a counted sale must report: the shop's report has it, and so has the floor's (../shop-floor). */
export type SaleOutcome = Pick<
  FlashSaleReport,
  'sold' | 'paidOrders' | 'payments' | 'gatewayCharges' | 'violations' | 'acquires' | 'load' | 'cancelledOrders' | 'oversoldUnits'
>

/** Runs a sale, telling its phases as runFlashSale does (`selling` with the instances and the schema, `draining`). */
export type SaleRunner<R extends SaleOutcome> = (
  options: FlashSaleOptions,
  onProgress: (progress: FlashSaleProgress) => void,
  services: FlashSaleServices,
) => Promise<R>

/** One counted sale. */
export interface WorkSample<R extends SaleOutcome = FlashSaleReport> {
  readonly report: R
  readonly sold: number
  readonly sellingMs: number
  readonly cpu: WorkCpu
  /** Statements sent by the shop instances and by the gateway. */
  readonly sql: { readonly shop: Tally; readonly gateway: Tally }
  /** Redis commands sent by the shop instances (the gateway sends none). */
  readonly redis: Tally
  /** Redis commands the server counted over the run (INFO commandstats). */
  readonly redisServer: Tally
  /** HTTP requests served by the shop instances and by the gateway. */
  readonly http: { readonly shop: number; readonly gateway: number }
}

const add = (into: Tally, from: Tally) => {
  for (const [k, v] of Object.entries(from)) into[k] = (into[k] ?? 0) + v
}
export const total = (t: Tally) => Object.values(t).reduce((a, b) => a + b, 0)

async function commandStats(redis: Redis): Promise<Tally> {
  const info = await redis.info('commandstats')
  const out: Tally = {}
  for (const m of info.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) out[(m[1] as string).toUpperCase()] = Number(m[2])
  return out
}

/**
 * Runs `options` on `services` (its Redis must be the bench's own redis-server, `redisPid`) with
 * every process counted, by `run` (default: the shop's runFlashSale). Not reentrant: it sets
 * NODE_OPTIONS for the processes the sale forks.
 */
export async function countedSale<R extends SaleOutcome = FlashSaleReport>(
  options: FlashSaleOptions,
  services: FlashSaleServices,
  redisPid: number,
  run: SaleRunner<R> = runFlashSale as unknown as SaleRunner<R>,
): Promise<WorkSample<R>> {
  const dir = mkdtempSync(join(tmpdir(), 'shop-work-'))
  const saved = { NODE_OPTIONS: process.env.NODE_OPTIONS, SHOP_WORK_COUNT_DIR: process.env.SHOP_WORK_COUNT_DIR }
  process.env.NODE_OPTIONS = `${saved.NODE_OPTIONS ?? ''} --import ${PRELOAD}`.trim()
  process.env.SHOP_WORK_COUNT_DIR = dir
  const redisUrl = services.redis?.url as string
  const admin = new Redis(redisUrl, { lazyConnect: true })
  const database = new pg.Client({ connectionString: services.database?.connectionString })
  await database.connect()
  await admin.connect()
  const statsBefore = await commandStats(admin)
  const readCounts = (): ProcessCounts[] =>
    readdirSync(dir).flatMap((f) => {
      try {
        return [JSON.parse(readFileSync(join(dir, f), 'utf8')) as ProcessCounts]
      } catch {
        return []
      }
    })
  let startCounts: ProcessCounts[] = []
  let sellingFrom: number | undefined
  let sellingTo: number | undefined
  let instancePids: number[] = []
  let schema: string | undefined
  const backends = new Map<number, number>()
  let polling: NodeJS.Timeout | undefined
  let polls = 0
  const poll = async () => {
    if (schema === undefined || sellingTo !== undefined) return
    const { rows } = await database.query<{ pid: number }>('SELECT pid FROM pg_stat_activity WHERE application_name = $1', [schema])
    // A backend seen at the first poll counts from its CPU then; a later one started during the sale.
    for (const { pid } of rows) if (!backends.has(pid)) backends.set(pid, polls === 0 ? processCpuSeconds(pid) : 0)
    polls++
  }
  const cpuOf = (list: readonly number[]) => list.reduce((sum, pid) => sum + (processCpuSeconds(pid) || 0), 0)
  let from = { instances: 0, gateway: 0, load: 0, redis: 0, machine: machineCpuSeconds() }
  let gatewayPids: number[] = []
  let cpu: WorkCpu = { instances: NaN, gateway: NaN, load: NaN, postgres: NaN, redis: NaN, machine: NaN }
  let report: R
  try {
    report = await run(
      options,
      (p) => {
        if (p.phase === 'selling' && sellingFrom === undefined) {
          sellingFrom = performance.now()
          schema = p.schema
          startCounts = readCounts()
          instancePids = (p.instances ?? []).map((i) => i.pid)
          gatewayPids = descendantPids(process.pid).filter((pid) => !instancePids.includes(pid) && pid !== redisPid)
          from = { instances: cpuOf(instancePids), gateway: cpuOf(gatewayPids), load: cpuOf([process.pid]), redis: cpuOf([redisPid]), machine: machineCpuSeconds() }
          void poll()
          polling = setInterval(() => void poll().catch(() => {}), 200)
        }
        if (p.phase === 'draining' && sellingTo === undefined) {
          sellingTo = performance.now()
          clearInterval(polling)
          const machine = machineCpuSeconds()
          let postgres = 0
          for (const [pid, base] of backends) postgres += (processCpuSeconds(pid) || base) - base
          cpu = {
            instances: cpuOf(instancePids) - from.instances,
            gateway: cpuOf(gatewayPids) - from.gateway,
            load: cpuOf([process.pid]) - from.load,
            postgres,
            redis: cpuOf([redisPid]) - from.redis,
            machine: machine && from.machine ? machine.busy - from.machine.busy : NaN,
          }
        }
      },
      services,
    )
  } finally {
    clearInterval(polling)
    process.env.NODE_OPTIONS = saved.NODE_OPTIONS
    if (saved.NODE_OPTIONS === undefined) delete process.env.NODE_OPTIONS
    process.env.SHOP_WORK_COUNT_DIR = saved.SHOP_WORK_COUNT_DIR
    if (saved.SHOP_WORK_COUNT_DIR === undefined) delete process.env.SHOP_WORK_COUNT_DIR
    await database.end().catch(() => {})
  }
  const statsAfter = await commandStats(admin)
  admin.disconnect()
  const endCounts = readCounts()
  rmSync(dir, { recursive: true, force: true })
  const sql = { shop: {} as Tally, gateway: {} as Tally }
  const redis: Tally = {}
  const http = { shop: 0, gateway: 0 }
  const startOf = new Map(startCounts.map((c) => [c.pid, c]))
  for (const c of endCounts) {
    const before = startOf.get(c.pid)
    const gateway = c.role.startsWith('gateway')
    const minus = (a: Tally, b: Tally | undefined): Tally => Object.fromEntries(Object.entries(a).map(([k, v]) => [k, v - (b?.[k] ?? 0)]))
    add(gateway ? sql.gateway : sql.shop, minus(c.sql, before?.sql))
    if (!gateway) add(redis, minus(c.redis, before?.redis))
    if (gateway) http.gateway += c.http - (before?.http ?? 0)
    else http.shop += c.http - (before?.http ?? 0)
  }
  const redisServer: Tally = {}
  for (const [k, v] of Object.entries(statsAfter)) if (k !== 'INFO' && v - (statsBefore[k] ?? 0) > 0) redisServer[k] = v - (statsBefore[k] ?? 0)
  return { report, sold: report.sold, sellingMs: (sellingTo ?? performance.now()) - (sellingFrom ?? 0), cpu, sql, redis, redisServer, http }
}

/** `n` per unit, one decimal (two below 1). */
export const perUnit = (n: number, sold: number) => {
  const v = n / Math.max(1, sold)
  return v < 1 && v > 0 ? v.toFixed(2) : v.toFixed(1)
}

/** A tally per unit, largest first: `BEGIN 2.0, COMMIT 2.0, ...`. */
export const tallyPerUnit = (t: Tally, sold: number) =>
  Object.entries(t)
    .filter(([, v]) => v > 0)
    .sort((a, b) => b[1] - a[1])
    .map(([k, v]) => `${k} ${perUnit(v, sold)}`)
    .join(', ')
