// `npm run bench:shop -- --segments 1,2,4,8 [--rounds R ...]`: the same sale with the stock split
// over 1, 2, 4, 8 segments (issue 23, apps/demo-shop/src/segments.ts), lock and fenced each, all
// in one run, interleaved; units/s and the ratio to 1 segment per mode; plus where the time of one
// purchase goes at the first and the last count (SHOP_SALE_TIMERS=1, apps/demo-shop/src/sale-timings.ts)
// and the CPU each unit sold cost, the instances' and the machine's (/proc, Linux). Writes the
// bench:shop-segments section.
//
// `npm run bench:shop [-- --rounds R --buyers N --instances I --no-docs]`: what the whole protection
// costs the flash-sale shop, end to end on real processes: the same sale (every buyer buys one unit
// and pays, no chaos, the payment gateway answering at once: `--gateway-latency-ms 0-0`) in `lock`
// and `fenced` mode and by the floor (./shop-floor: the same sale written directly on node:http,
// ioredis and pg, with a lease, a token, the fence in the SQL and the idempotency key; issue 34),
// interleaved over rounds in rotating order, and the units sold per second of each. Targets:
// `fenced` at least 0.8x `lock`'s throughput; ours / the floor's CPU per unit (issue 34). And the
// work per unit sold, counted (./support/shop-work.ts): SQL statements, Redis commands, lock
// cycles, HTTP requests, CPU per process. Writes its section of docs/BENCHMARKS.md between the
// bench:shop markers.
//
// Throughput is units sold (counted from the database after the run) over the selling phase: from
// the first buyer to the last answer, purchases and payments included. Startup, drain and counting
// are left out.
import { availableParallelism } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { FLASH_SALE_DEFAULTS, runFlashSale, type FlashSaleOptions, type FlashSaleServices } from '@fencelock/demo-shop/flash-sale'
import { databaseTarget, redact } from '@fencelock/devkit/database-url'
import { integerFlag, runCommand, UsageError, type CliSpec, type CliValues } from '@fencelock/devkit/cli'
import { SALE_PHASES, sumSaleTimings, type SaleTimingTotals } from '@fencelock/demo-shop/sale-timings'
import { sharedRedisUrl } from '@fencelock/devkit/redis-url'
import { startRedisServer } from '@fencelock/devkit/redis-server'
import { writeMarkedSection } from './support/docs-section.js'
import { countedSale, perUnit, tallyPerUnit, total, type SaleOutcome, type WorkSample } from './support/shop-work.js'
import { runFloorSale } from './shop-floor/floor-sale.js'
import { cpuBusyShare, descendantPids, loadAverage, machineCpuSeconds, machineInfo, processCpuSeconds } from './support/machine.js'

const root = join(dirname(fileURLToPath(import.meta.url)), '..')
const TARGET_RATIO = 0.8
const MODES = ['lock', 'fenced'] as const
/** The work run's contenders: the shop in two modes, and the floor. */
const CONTENDERS = ['lock', 'fenced', 'floor'] as const
type Contender = (typeof CONTENDERS)[number]
/** Issue 34's targets, per unit sold (`fenced`, 1 segment, 4 instances). */
const TARGETS = Object.freeze({ cpuVsFloor: 2.5, cpuVsLock: 1.2, ratePerFloor: 0.5, statements: 10, redisCommands: 6 })

const CLI: CliSpec = {
  command: 'npm run bench:shop --',
  summary: "The flash-sale shop's throughput in lock and fenced mode, end to end on real processes, interleaved. Writes its section of docs/BENCHMARKS.md.",
  flags: {
    rounds: { type: 'string', value: '<n>', description: 'rounds (each runs both modes), 1-20', default: 3 },
    buyers: { type: 'string', value: '<n>', description: 'buyers (and units) per sale, 1-100000', default: 600 },
    instances: { type: 'string', value: '<n>', description: 'shop instances, 1-16', default: 4 },
    segments: { type: 'string', value: '<list>', description: 'stock segments to compare, e.g. 1,2,4,8 (each 1-64): the segments sweep instead of lock vs fenced' },
    'gateway-latency-ms': {
      type: 'string',
      value: '<a-b>',
      description: "with --segments: the gateway's answer time, ms, uniform in a-b (0-10000); other than 0-0 the sweep writes a section of its own",
      default: '0-0',
    },
    'no-docs': { type: 'boolean', description: 'leave docs/BENCHMARKS.md untouched' },
  },
  notes: 'REDIS_URL (default redis://127.0.0.1:6379), DATABASE_URL (default postgresql://postgres@127.0.0.1:5432/test). A missed target is reported, and the exit code stays 0.',
  failure: 'it broke off with an error',
}

interface Args {
  rounds: number
  buyers: number
  instances: number
  docs: boolean
  segments: number[] | undefined
  gatewayLatencyMs: string
}

function segmentsList(value: unknown): number[] | undefined {
  if (value === undefined) return undefined
  const list = String(value).split(',').map((part) => part.trim())
  if (list.length === 0 || list.length > 8 || list.some((part) => !/^\d{1,2}$/.test(part) || Number(part) < 1 || Number(part) > 64))
    throw new UsageError(`--segments must be a comma-separated list of 1 to 8 integers, each 1-64 (got ${JSON.stringify(value)})`)
  return [...new Set(list.map(Number))]
}

function parseCli(values: CliValues): Args {
  if (values['gateway-latency-ms'] !== undefined && values.segments === undefined)
    throw new UsageError('--gateway-latency-ms is for the segments sweep: give --segments too')
  return {
    rounds: integerFlag(values, 'rounds', 3, 1, 20),
    buyers: integerFlag(values, 'buyers', 600, 1, 100_000),
    instances: integerFlag(values, 'instances', 4, 1, 16),
    docs: values['no-docs'] !== true,
    segments: segmentsList(values.segments),
    gatewayLatencyMs: latencyRange(values['gateway-latency-ms']),
  }
}

function latencyRange(value: unknown): string {
  if (value === undefined) return '0-0'
  const match = /^(\d{1,5})-(\d{1,5})$/.exec(String(value))
  if (!match || Number(match[1]) > Number(match[2]) || Number(match[2]) > 10_000)
    throw new UsageError(`--gateway-latency-ms must be a-b in ms with 0 <= a <= b <= 10000 (got ${JSON.stringify(value)})`)
  return `${Number(match[1])}-${Number(match[2])}`
}

interface Sample {
  readonly mode: Contender
  readonly round: number
  readonly sold: number
  readonly sellingMs: number
  readonly unitsPerSecond: number
  readonly paidOrders: number
  readonly gatewayCharges: number
  readonly payments: number
  readonly violations: number
  /** Orders the reconciler cancelled (a payer that lost its lease under load: its unit went back to stock). */
  readonly cancelled: number
  readonly oversold: number
  readonly work: WorkSample<SaleOutcome>
}

/** CPU ms per unit sold, every process of the sale (instances, gateway, load generator, PostgreSQL, Redis). */
const cpuPerUnit = (w: WorkSample<SaleOutcome>) => (1000 * (w.cpu.instances + w.cpu.gateway + w.cpu.load + w.cpu.postgres + w.cpu.redis)) / Math.max(1, w.sold)
/** SQL statements per unit sold, shop and gateway. */
const sqlPerUnit = (w: WorkSample<SaleOutcome>) => (total(w.sql.shop) + total(w.sql.gateway)) / Math.max(1, w.sold)
/** Redis commands per unit sold, as the shop's clients sent them. */
const redisPerUnit = (w: WorkSample<SaleOutcome>) => total(w.redis) / Math.max(1, w.sold)
/** Redis commands per unit sold, as the server counted them (those inside scripts too). */
const redisInsidePerUnit = (w: WorkSample<SaleOutcome>) => total(w.redisServer) / Math.max(1, w.sold)

const median = (values: readonly number[]) => {
  const s = [...values].sort((a, b) => a - b)
  const mid = s.length >> 1
  return s.length % 2 === 1 ? (s[mid] as number) : ((s[mid - 1] as number) + (s[mid] as number)) / 2
}

/** The machine's Redis and PostgreSQL, as every sale of the bench uses them. */
function sharedServices(): FlashSaleServices {
  const redisUrl = sharedRedisUrl()
  const { connectionString } = databaseTarget()
  return {
    redis: { url: redisUrl, origin: redisUrl, owned: undefined, stop: async () => {} },
    database: { connectionString, origin: redact(connectionString) },
  }
}

/** One sale of the bench: `buyers` units for as many buyers, no chaos, the round as its seed. */
function saleOptions(
  args: Args,
  mode: (typeof MODES)[number],
  round: number,
  more: Partial<FlashSaleOptions>,
): FlashSaleOptions {
  return {
    ...FLASH_SALE_DEFAULTS,
    instances: args.instances,
    buyers: args.buyers,
    stock: args.buyers,
    mode,
    chaos: 'none',
    seed: round,
    ...more,
  }
}

async function main(values: CliValues): Promise<number> {
  const args = parseCli(values)
  if (args.segments !== undefined) return segmentsSweep(args, args.segments)
  // A redis-server of the bench's own, so INFO commandstats and its CPU are the sale's alone.
  const redisServer = await startRedisServer()
  try {
    return await workRun(args, redisServer)
  } finally {
    await redisServer.dispose()
  }
}

async function workRun(args: Args, redisServer: { url: string; pid: number }): Promise<number> {
  const shared = sharedServices()
  const services: FlashSaleServices = { ...shared, redis: { url: redisServer.url, origin: `redis-server of the bench (${redisServer.url})`, owned: undefined, stop: async () => {} } }
  const busyBefore = await cpuBusyShare(2_000)
  const loadBefore = loadAverage()
  const samples: Sample[] = []
  for (let round = 1; round <= args.rounds; round++) {
    // Rotate which contender goes first, so a drift of the machine's load spreads over all.
    const order = CONTENDERS.map((_, i) => CONTENDERS[(i + round - 1) % CONTENDERS.length] as Contender)
    for (const mode of order) {
      const options = saleOptions(args, mode === 'floor' ? 'fenced' : mode, round, { gatewayLatencyMs: '0-0' })
      const work: WorkSample<SaleOutcome> =
        mode === 'floor' ? await countedSale(options, services, redisServer.pid, runFloorSale) : await countedSale(options, services, redisServer.pid)
      const { report, sellingMs } = work
      const sample: Sample = {
        work,
        mode,
        round,
        sold: report.sold,
        sellingMs,
        unitsPerSecond: report.sold / (sellingMs / 1000),
        paidOrders: report.paidOrders,
        gatewayCharges: report.gatewayCharges,
        payments: report.payments,
        violations: report.violations,
        cancelled: report.cancelledOrders,
        oversold: report.oversoldUnits,
      }
      samples.push(sample)
      console.error(
        `[bench:shop] round ${round} ${mode}: ${sample.sold} units in ${(sellingMs / 1000).toFixed(2)} s = ${sample.unitsPerSecond.toFixed(1)} units/s, CPU ${cpuPerUnit(work).toFixed(1)} ms/unit, SQL ${sqlPerUnit(work).toFixed(1)}/unit, Redis ${redisPerUnit(work).toFixed(1)}/unit, violations ${sample.violations}`,
      )
    }
  }
  const loadAfter = loadAverage()
  const of = (mode: Contender) => samples.filter((s) => s.mode === mode)
  const lockRate = median(of('lock').map((s) => s.unitsPerSecond))
  const fencedRate = median(of('fenced').map((s) => s.unitsPerSecond))
  // Judged on the ratio within each round (both modes back to back), whose median a drift of the
  // machine's load between rounds cannot move; the ratio of the medians is shown too.
  const ratios = Array.from({ length: args.rounds }, (_, i) => {
    const round = samples.filter((s) => s.round === i + 1)
    const fenced = round.find((s) => s.mode === 'fenced')!.unitsPerSecond
    return fenced / round.find((s) => s.mode === 'lock')!.unitsPerSecond
  })
  const ratio = median(ratios)
  // Ours / the floor's, within each round, then the median over the rounds.
  const roundRatio = (a: Contender, b: Contender, f: (s: Sample) => number) =>
    median(
      Array.from({ length: args.rounds }, (_, i) => {
        const round = samples.filter((s) => s.round === i + 1)
        return f(round.find((s) => s.mode === a)!) / f(round.find((s) => s.mode === b)!)
      }),
    )
  const cpuOf = (s: Sample) => cpuPerUnit(s.work)
  const cpuVsFloor = roundRatio('fenced', 'floor', cpuOf)
  const cpuVsLock = roundRatio('fenced', 'lock', cpuOf)
  const rateVsFloor = roundRatio('fenced', 'floor', (s) => s.unitsPerSecond)
  const fencedSql = median(of('fenced').map((s) => sqlPerUnit(s.work)))
  const fencedRedis = median(of('fenced').map((s) => redisPerUnit(s.work)))
  const verdict = (met: boolean) => (met ? 'met' : '**missed**')
  const summaryRows = CONTENDERS.map((mode) => {
    const list = of(mode)
    const med = (f: (s: Sample) => number) => median(list.map(f))
    const vsFloor = (f: (s: Sample) => number) => (mode === 'floor' ? '' : ` (×${roundRatio(mode, 'floor', f).toFixed(2)})`)
    const w = (f: (w: WorkSample<SaleOutcome>) => number) => (s: Sample) => f(s.work)
    const cpu = (part: keyof WorkSample['cpu']) => (s: Sample) => (1000 * s.work.cpu[part]) / Math.max(1, s.sold)
    return `| \`${mode}\` | ${med((s) => s.unitsPerSecond).toFixed(1)}${vsFloor((s) => s.unitsPerSecond)} | ${med(cpuOf).toFixed(1)}${vsFloor(cpuOf)} | ${med(cpu('instances')).toFixed(1)} | ${med(cpu('gateway')).toFixed(1)} | ${med(cpu('load')).toFixed(1)} | ${med(cpu('postgres')).toFixed(1)} | ${med(cpu('redis')).toFixed(1)} | ${med(w(sqlPerUnit)).toFixed(1)}${vsFloor(w(sqlPerUnit))} | ${med(w(redisPerUnit)).toFixed(1)}${vsFloor(w(redisPerUnit))} | ${med(w(redisInsidePerUnit)).toFixed(1)} | ${med((s) => s.work.report.acquires / Math.max(1, s.sold)).toFixed(2)} |`
  })
  const m = machineInfo()
  const rows = samples.map(
    (s) =>
      `| ${s.round} | \`${s.mode}\` | ${s.sold} | ${s.cancelled} | ${s.oversold} | ${(s.sellingMs / 1000).toFixed(2)} | ${s.unitsPerSecond.toFixed(1)} | ${s.paidOrders} | ${s.payments} | ${s.gatewayCharges} | ${s.violations} |`,
  )
  const workRows = samples.map((s) => {
    const w = s.work
    const u = w.sold
    const ms = (x: number) => perUnit(1000 * x, u)
    const c = w.cpu
    return `| ${s.round} | \`${s.mode}\` | ${perUnit(total(w.sql.shop), u)} | ${perUnit(total(w.sql.gateway), u)} | ${perUnit(total(w.redis), u)} | ${perUnit(total(w.redisServer), u)} | ${perUnit(w.report.acquires, u)} | ${perUnit(w.http.shop, u)}, ${perUnit(w.http.gateway, u)} | ${ms(c.instances)} | ${ms(c.gateway)} | ${ms(c.load)} | ${ms(c.postgres)} | ${ms(c.redis)} | ${ms(c.instances + c.gateway + c.load + c.postgres + c.redis)} |`
  })
  const markdown = `## Flash-sale shop

\`npm run bench:shop -- --rounds ${args.rounds} --buyers ${args.buyers} --instances ${args.instances}\` — ${new Date().toISOString().slice(0, 10)}. The same
sale in \`lock\` and \`fenced\` mode and by **the floor** (\`bench/shop-floor\`: the same sale written directly —
node:http, ioredis, pg, no framework, no ORM — with a lease that has a TTL and a token minted in the
grant's script, the fence in the SQL, the intent and the idempotency key; the same crowd and seed,
the same tables and database guard, counted by the same \`countShop\`), interleaved in rotating order:
${args.instances} instance processes, ${args.buyers} buyers (${FLASH_SALE_DEFAULTS.concurrency} at once), each buying one of ${args.buyers} units and paying it
(the queue's duplicate delivery and retries included), no chaos, the payment gateway process answering
at once (\`--gateway-latency-ms 0-0\`). Throughput: units sold (counted from the database) per second of
the selling phase, payments included. Redis (a redis-server of the bench's own) and PostgreSQL on loopback.

Machine: ${m.nproc} × ${m.cpuModel}, ${m.totalMemGiB} GiB, ${m.os}, Node ${m.node}, ${availableParallelism()} CPUs; load average ${loadBefore}
before and ${loadAfter} after; other processes kept ${(busyBefore * 100).toFixed(0)} % of the CPUs busy just before (the machine is shared).

**Ours / the floor**, medians of the rounds (in brackets: the median of the rounds' ratios to the
floor). CPU: ms per unit sold over the selling phase, every process of the sale (/proc); SQL:
statements per unit, shop and gateway; Redis: commands per unit as the clients sent them, and as
the server counted them (\`INFO commandstats\`: the commands inside scripts too):

| contender | units/s | CPU ms/unit | instances | gateway | load | PostgreSQL | Redis | SQL/unit | Redis cmds/unit | inside Redis/unit | lock cycles/unit |
| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |
${summaryRows.join('\n')}

Targets (issue 34; \`fenced\`, 1 segment, ${args.instances} instances):
- CPU per unit, \`fenced\` / floor ≤ ×${TARGETS.cpuVsFloor}: ${verdict(cpuVsFloor <= TARGETS.cpuVsFloor)} (×${cpuVsFloor.toFixed(2)}).
- CPU per unit, \`fenced\` / \`lock\` ≤ ×${TARGETS.cpuVsLock}: ${verdict(cpuVsLock <= TARGETS.cpuVsLock)} (×${cpuVsLock.toFixed(2)}).
- Units/s, \`fenced\` / floor ≥ ×${TARGETS.ratePerFloor}: ${verdict(rateVsFloor >= TARGETS.ratePerFloor)} (×${rateVsFloor.toFixed(2)}).
- SQL statements per unit, shop + gateway, ≤ ${TARGETS.statements}: ${verdict(fencedSql <= TARGETS.statements)} (${fencedSql.toFixed(1)}; the floor ${median(of('floor').map((s) => sqlPerUnit(s.work))).toFixed(1)}).
- Redis commands per unit ≤ ${TARGETS.redisCommands}: ${verdict(fencedRedis <= TARGETS.redisCommands)} (${fencedRedis.toFixed(1)}; the floor ${median(of('floor').map((s) => redisPerUnit(s.work))).toFixed(1)}).
- \`fenced\` at least ×${TARGET_RATIO} \`lock\`'s throughput, median of the rounds' ratios: ${verdict(ratio >= TARGET_RATIO)} (×${ratio.toFixed(3)}; ${ratios.map((r) => `×${r.toFixed(3)}`).join(', ')}; medians \`lock\` ${lockRate.toFixed(1)}, \`fenced\` ${fencedRate.toFixed(1)} units/s).

| round | contender | units sold | orders cancelled (units back in stock) | oversold | selling s | units/s | paid orders | payments | charges (gateway) | violations |
| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |
${rows.join('\n')}

Work per unit sold, counted (\`bench/support/shop-work.ts\`: every process of the sale runs with
\`bench/support/count-work.mjs\` preloaded, which counts the SQL statements its \`pg\` clients send by first
keyword, the Redis commands its ioredis clients send, and the HTTP requests it serves; Redis is a
redis-server of the bench's own, whose \`INFO commandstats\` also counts the commands run inside the
scripts). Counts do not drift with the machine's load; the CPU columns do (over the selling phase, /proc:
the shop instances, the gateway, the load generator, the run's PostgreSQL backends found by their
\`application_name\`, the bench's redis-server):

| round | contender | SQL/unit shop | SQL/unit gateway | Redis cmds/unit (sent) | inside Redis/unit | lock cycles/unit | HTTP/unit shop, gateway | CPU ms/unit instances | gateway | load | PostgreSQL | Redis | sum |
| ---: | --- | ---: | ---: | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |
${workRows.join('\n')}

By kind, per unit (last round of each contender):

${CONTENDERS.map((mode) => {
  const w = [...samples].reverse().find((s) => s.mode === mode)!.work
  return `- \`${mode}\`: shop ${tallyPerUnit(w.sql.shop, w.sold)}; gateway ${tallyPerUnit(w.sql.gateway, w.sold)}; Redis ${tallyPerUnit(w.redis, w.sold)}.`
}).join('\n')}

A sale's steps in the shop (\`apps/demo-shop/src/shop-service.ts\`, counted by \`apps/demo-shop/test/work-per-unit.test.ts\`):
the purchase reads the product with the \`UPDATE ... WHERE stock > 0 RETURNING\` that raises its fence,
then writes the stock and the order in one transaction (Prisma's array form); the payment reads the
order before any lock (a paid order's repeat ends there), records its intent in one conditional
\`UPDATE\` outside a transaction, calls the gateway, and writes the payment in one transaction (array
form). \`fenced\` sends as many statements as \`lock\` in the shop (\`protection-statements.test.ts\`); the
gateway's charge is one statement outside any transaction in both modes (\`fenced\`: the resource's
fence upserted under \`fence <= token\`, the key claimed with its answer, the ledger row, one \`WITH\`),
pinned with the shop's by \`apps/demo-shop/test/sale-work.test.ts\`. The floor's
(\`bench/shop-floor/floor-instance.ts\`, \`floor-gateway.ts\`): the purchase is one statement under the
lease (fence raised, unit taken, order inserted), the payment a read before any lock, the intent,
and one statement (order paid under the fence, payment inserted); the gateway's charge one statement
(fence, key with its answer, ledger row). A grant is one script (\`SET NX PX\` and \`INCR\`), a release one
(compare-and-delete and a release message); a waiter waits for the message or the holder's lease.
`
  console.log(markdown)
  if (args.docs) {
    writeMarkedSection(join(root, 'docs', 'BENCHMARKS.md'), 'bench:shop', markdown)
    console.error('[bench:shop] written to docs/BENCHMARKS.md')
  }
  return 0
}

interface SegmentSample {
  readonly segments: number
  readonly mode: (typeof MODES)[number]
  readonly round: number
  readonly sold: number
  readonly sellingMs: number
  readonly unitsPerSecond: number
  readonly violations: number
  readonly timings: SaleTimingTotals | undefined
  readonly cpu: SellingCpu
}

/**
 * CPU seconds used over a sale's selling phase (/proc times): by the shop instances; by the rest of
 * the run's own processes (the payment gateway and this process, the load generator); and by the
 * whole machine (those, PostgreSQL, Redis, and whatever else runs on the shared machine), of
 * `capacity` (CPUs × seconds).
 */
interface SellingCpu {
  readonly instances: number
  readonly gatewayAndLoad: number
  readonly machine: number
  readonly capacity: number
}

/** One sale, timed over its selling phase, with the CPU its processes used meanwhile. */
async function timedSale(options: FlashSaleOptions, services: FlashSaleServices) {
  let sellingFrom: number | undefined
  let sellingTo: number | undefined
  let pids: number[] = []
  let others: number[] = []
  let from = { instances: 0, others: 0, machine: machineCpuSeconds() }
  let cpu: SellingCpu = { instances: Number.NaN, gatewayAndLoad: Number.NaN, machine: Number.NaN, capacity: Number.NaN }
  const cpuOf = (list: readonly number[]) => list.reduce((sum, pid) => sum + processCpuSeconds(pid), 0)
  const report = await runFlashSale(
    options,
    (p) => {
      if (p.phase === 'selling' && sellingFrom === undefined) {
        sellingFrom = performance.now()
        pids = (p.instances ?? []).map((i) => i.pid)
        // This process and its other descendants: the gateway (its supervisor's child), helpers.
        others = [process.pid, ...descendantPids(process.pid).filter((pid) => !pids.includes(pid))]
        from = { instances: cpuOf(pids), others: cpuOf(others), machine: machineCpuSeconds() }
      }
      if (p.phase === 'draining' && sellingTo === undefined) {
        sellingTo = performance.now()
        const machine = machineCpuSeconds()
        cpu = {
          instances: cpuOf(pids) - from.instances,
          gatewayAndLoad: cpuOf(others) - from.others,
          machine: machine && from.machine ? machine.busy - from.machine.busy : Number.NaN,
          capacity: machine && from.machine ? machine.total - from.machine.total : Number.NaN,
        }
      }
    },
    services,
  )
  return { report, sellingMs: (sellingTo ?? performance.now()) - (sellingFrom ?? 0), cpu }
}

/** A run's CPU seconds over its selling phase: the instances', the machine's. */
const cpuCells = (s: SegmentSample) => [s.cpu.instances.toFixed(1), s.cpu.gatewayAndLoad.toFixed(1), s.cpu.machine.toFixed(1)]

/** The segments sweep (see the file's comment). */
async function segmentsSweep(args: Args, counts: readonly number[]): Promise<number> {
  const services = sharedServices()
  const busyBefore = await cpuBusyShare(2_000)
  const loadBefore = loadAverage()
  const samples: SegmentSample[] = []
  for (let round = 1; round <= args.rounds; round++) {
    // Alternate the order, so a drift of the machine's load spreads over every row.
    const order = counts.flatMap((segments) => MODES.map((mode) => ({ segments, mode })))
    if (round % 2 === 0) order.reverse()
    for (const { segments, mode } of order) {
      const options = saleOptions(args, mode, round, { segments, gatewayLatencyMs: args.gatewayLatencyMs, saleTimers: true })
      const { report, sellingMs, cpu } = await timedSale(options, services)
      const sample: SegmentSample = {
        segments,
        mode,
        round,
        sold: report.sold,
        sellingMs,
        unitsPerSecond: report.sold / (sellingMs / 1000),
        violations: report.violations,
        timings: report.saleTimings,
        cpu,
      }
      samples.push(sample)
      console.error(`[bench:shop] round ${round} segments ${segments} ${mode}: ${sample.sold} units in ${(sellingMs / 1000).toFixed(2)} s = ${sample.unitsPerSecond.toFixed(1)} units/s, violations ${sample.violations}, CPU ${cpuCells(sample).join(' / ')}; answers ${JSON.stringify(report.load.byStatus)}, stale writes rejected ${report.staleWritesRejected}, lock timeouts ${report.acquireTimeouts}, orders cancelled ${report.cancelledOrders}`)
    }
  }
  const loadAfter = loadAverage()
  const m = machineInfo()
  const base = counts[0] as number
  const rateOf = (round: number, segments: number, mode: string) =>
    samples.find((s) => s.round === round && s.segments === segments && s.mode === mode)?.unitsPerSecond ?? Number.NaN
  const rounds = Array.from({ length: args.rounds }, (_, i) => i + 1)
  const summary = counts.flatMap((segments) =>
    MODES.map((mode) => {
      const rate = median(rounds.map((r) => rateOf(r, segments, mode)))
      const ratios = rounds.map((r) => rateOf(r, segments, mode) / rateOf(r, base, mode))
      return `| ${segments} | \`${mode}\` | ${rate.toFixed(1)} | ×${median(ratios).toFixed(2)} (${ratios.map((x) => x.toFixed(2)).join(', ')}) |`
    }),
  )
  const rows = samples.map(
    (s) =>
      `| ${s.round} | ${s.segments} | \`${s.mode}\` | ${s.sold} | ${(s.sellingMs / 1000).toFixed(2)} | ${s.unitsPerSecond.toFixed(1)} | ${s.violations} | ${cpuCells(s).join(' | ')} |`,
  )
  const top = counts[counts.length - 1] as number
  const fencedRatio = median(rounds.map((r) => rateOf(r, top, 'fenced') / rateOf(r, base, 'fenced')))
  const timingRows = [...new Set([base, top])].flatMap((segments) =>
    MODES.map((mode) => {
      const of = samples.filter((s) => s.segments === segments && s.mode === mode && s.timings !== undefined)
      const t = sumSaleTimings(of.map((s) => s.timings as SaleTimingTotals))
      const total = SALE_PHASES.reduce((a, p) => a + t[p], 0)
      const held = t.read + t.gateway + t.write
      return `| ${segments} | \`${mode}\` | ${t.sales} | ${SALE_PHASES.map((p) => `${(t[p] / Math.max(1, t.sales)).toFixed(1)} (${((100 * t[p]) / Math.max(1e-9, total)).toFixed(0)} %)`).join(' | ')} | ${(held / Math.max(1, t.sales)).toFixed(1)} |`
    }),
  )
  // CPU per unit sold over the selling phase, summed over a row's rounds (see SellingCpu).
  const cpuRows = counts.flatMap((segments) =>
    MODES.map((mode) => {
      const of = samples.filter((s) => s.segments === segments && s.mode === mode)
      const sum = (f: (s: SegmentSample) => number) => of.reduce((a, s) => a + f(s), 0)
      const sold = Math.max(1, sum((s) => s.sold))
      const seconds = sum((s) => s.sellingMs) / 1000
      const perUnit = (f: (s: SegmentSample) => number) => ((1000 * sum(f)) / sold).toFixed(1)
      return `| ${segments} | \`${mode}\` | ${perUnit((s) => s.cpu.instances)} | ${perUnit((s) => s.cpu.gatewayAndLoad)} | ${perUnit((s) => s.cpu.machine)} | ${(sum((s) => s.cpu.instances + s.cpu.gatewayAndLoad) / seconds).toFixed(2)} | ${(sum((s) => s.cpu.machine) / seconds).toFixed(2)} of ${(sum((s) => s.cpu.capacity) / seconds).toFixed(2)} |`
    }),
  )
  const instant = args.gatewayLatencyMs === '0-0'
  const markdown = `## Flash-sale shop: segmented stock${instant ? '' : `, the gateway answering in ${args.gatewayLatencyMs} ms`}

\`npm run bench:shop -- --segments ${counts.join(',')} --rounds ${args.rounds} --buyers ${args.buyers} --instances ${args.instances}${instant ? '' : ` --gateway-latency-ms ${args.gatewayLatencyMs}`}\` — ${new Date().toISOString().slice(0, 10)}.
The same sale with the product's stock split over ${counts.join(', ')} segments (\`apps/demo-shop/src/segments.ts\`: each
segment its own row, lock and fence; a buyer tries one at random, then the next, one try each, and when
all are busy waits on all of them at once, the first free one winning), in \`lock\` and \`fenced\`
mode, every combination in each round, interleaved: ${args.instances} instance processes, ${args.buyers} buyers
(${FLASH_SALE_DEFAULTS.concurrency} at once), ${args.buyers} units, each bought and paid, no chaos, ${instant ? 'the gateway answering at once' : `the gateway answering each call in ${args.gatewayLatencyMs} ms (so a purchase holds its lock mostly waiting, not computing)`}
(\`--gateway-latency-ms ${args.gatewayLatencyMs}\`). Throughput: units sold (counted from the database) per second of the selling
phase, payments included. Redis and PostgreSQL on loopback.

Machine: ${m.nproc} × ${m.cpuModel}, ${m.totalMemGiB} GiB, ${m.os}, Node ${m.node}, ${availableParallelism()} CPUs; load average ${loadBefore}
before and ${loadAfter} after; other processes kept ${(busyBefore * 100).toFixed(0)} % of the CPUs busy just before. **The machine
is shared and was loaded: absolute units/s are not comparable with other sections; the ratios
within a round are the figure.**

| segments | mode | units/s (median) | ×${base} segment${base === 1 ? '' : 's'}, median of the rounds (each round) |
| ---: | --- | ---: | --- |
${summary.join('\n')}

${
  instant
    ? `**Target: \`fenced\` at ${top} segments ≥ ×3 the units/s at ${base} — ${fencedRatio >= 3 ? 'met' : '**missed**'} (×${fencedRatio.toFixed(2)}).**`
    : `**Target (issue 34): \`fenced\` at ${top} segments ≥ ×5 the units/s at ${base} — ${fencedRatio >= 5 ? 'met' : '**missed**'} (×${fencedRatio.toFixed(2)}).**`
}

Where the time of one purchase goes at ${base} and ${top} segments (\`SHOP_SALE_TIMERS=1\`, \`apps/demo-shop/src/sale-timings.ts\`;
mean ms per purchase that ordered a unit, share of the purchase): \`lock\` is the wait for the lock
and the acquire's round trips (with segments: the one-try probes of busy segments, the race's wait
and the reads of segments found empty), \`release\` the release's round trip; \`read\`, \`gateway\`
(the authorization call) and \`write\` (stock and order transaction) run while the lock is held.

| segments | mode | purchases timed | ${SALE_PHASES.join(' ms | ')} ms | held ms |
| ---: | --- | ---: | ${SALE_PHASES.map(() => '---:').join(' | ')} | ---: |
${timingRows.join('\n')}

CPU over the selling phase (all rounds of a row; /proc times): per unit sold, by the ${args.instances} shop
instances, by the gateway and the load generator (the bench's own process), and by the whole machine
(those, PostgreSQL, Redis, and other users of the shared machine); and the CPUs busy on average,
by the instances, gateway and load generator, and by the machine (it has ${availableParallelism()}).

| segments | mode | instances CPU ms/unit | gateway + load CPU ms/unit | machine CPU ms/unit | run's CPUs busy | machine CPUs busy |
| ---: | --- | ---: | ---: | ---: | ---: | ---: |
${cpuRows.join('\n')}

All runs:

| round | segments | mode | units sold | selling s | units/s | violations | instances CPU s | gateway + load CPU s | machine CPU s |
| ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |
${rows.join('\n')}
`
  console.log(markdown)
  if (args.docs) {
    writeMarkedSection(join(root, 'docs', 'BENCHMARKS.md'), instant ? 'bench:shop-segments' : 'bench:shop-segments-latency', markdown)
    console.error('[bench:shop] written to docs/BENCHMARKS.md')
  }
  return 0
}

await runCommand(CLI, process.argv.slice(2), main)
