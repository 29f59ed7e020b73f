/**
 * The command line of `npm run flash-sale`, validated before anything starts. Every error names
 * the flag and says what it must be.
 */
import { choiceFlag, integerFlag, parseCommandLine, stringFlag, usageOf, UsageError, type CliSpec } from '@fencelock/devkit/cli'
import { CHAOS_KINDS } from './chaos.js'
import { FLASH_SALE_DEFAULTS, type FlashSaleOptions } from './flash-sale.js'
import { parseLatency } from './payment-gateway.js'
import { PROTECTION_MODES } from './protection.js'

/** What the command line asks for. */
export interface FlashSaleCommand {
  readonly help: boolean
  readonly json: boolean
  readonly verbose: boolean
  readonly options: FlashSaleOptions
}

export { UsageError }

/** The command line of `npm run flash-sale` (see `@fencelock/devkit/cli` for the parsing rules and exit codes). */
export const FLASH_SALE_CLI: CliSpec = {
  command: 'npm run flash-sale --',
  summary: 'One flash sale on real processes (instances, the payment gateway, Redis, PostgreSQL), then its report counted from the database and the gateway ledger.',
  flags: {
    instances: { type: 'string', value: '<n>', description: 'shop instances (processes), 1-16', default: FLASH_SALE_DEFAULTS.instances },
    buyers: { type: 'string', value: '<n>', description: 'buyers, each buys once, 1-100000', default: FLASH_SALE_DEFAULTS.buyers },
    stock: { type: 'string', value: '<n>', description: 'units on sale, 0-100000', default: FLASH_SALE_DEFAULTS.stock },
    mode: { type: 'string', value: '<m>', description: PROTECTION_MODES.join(' | '), default: FLASH_SALE_DEFAULTS.mode },
    chaos: { type: 'string', value: '<c>', description: CHAOS_KINDS.join(' | '), default: FLASH_SALE_DEFAULTS.chaos },
    seed: { type: 'string', value: '<n>', description: "seed of the run's random choices, 0-4294967295", default: FLASH_SALE_DEFAULTS.seed },
    'ttl-ms': { type: 'string', value: '<n>', description: 'lock lease in ms, 100-60000', default: FLASH_SALE_DEFAULTS.ttlMs },
    'gateway-latency-ms': { type: 'string', value: '<min-max>', description: 'payment gateway latency, ms', default: FLASH_SALE_DEFAULTS.gatewayLatencyMs },
    concurrency: { type: 'string', value: '<n>', description: 'buyers in flight at once, 1-1000', default: FLASH_SALE_DEFAULTS.concurrency },
    segments: { type: 'string', value: '<n>', description: 'stock segments, 1-64: the stock split over n rows, each its own lock and fence', default: FLASH_SALE_DEFAULTS.segments },
    redis: { type: 'string', value: '<r>', description: 'single | sentinel (a spawned primary, 2 replicas and 3 Sentinels; the instances connect through the Sentinels, lock replicas: 1)', default: 'single' },
    backend: { type: 'string', value: '<b>', description: 'redis | etcd (the locks on ETCD_ENDPOINTS, else on an etcd member it spawns; Redis still keeps the views)', default: 'redis' },
    json: { type: 'boolean', description: 'print the report as JSON on stdout (and nothing else there)' },
    'keep-data': { type: 'boolean', description: "keep the run's database schema" },
    verbose: { type: 'boolean', description: "show the instances' and the gateway's logs" },
  },
  notes: `Uses REDIS_URL, else 127.0.0.1:6379, else a redis-server it spawns (always its own for
--chaos redis-restart); DATABASE_URL, else an embedded PGlite; with --backend etcd, ETCD_ENDPOINTS,
else an etcd member it spawns.`,
  failure: 'a violation happened in fenced mode (the one mode that promises none), or the run broke off with an error',
}

/** The usage text (without line cutting), for messages and docs. */
export const USAGE = usageOf(FLASH_SALE_CLI)

/**
 * Parses the arguments after `--`.
 * @throws UsageError for an unknown flag, a missing value or a value out of range.
 */
export function parseFlashSaleArgs(argv: readonly string[]): FlashSaleCommand {
  const values = parseCommandLine(FLASH_SALE_CLI, argv)
  const gatewayLatencyMs = stringFlag(values, 'gateway-latency-ms', FLASH_SALE_DEFAULTS.gatewayLatencyMs)
  try {
    parseLatency(gatewayLatencyMs)
  } catch (error) {
    throw new UsageError(`--gateway-latency-ms: ${(error as Error).message}`)
  }
  const options: FlashSaleOptions = {
    ...FLASH_SALE_DEFAULTS,
    instances: integerFlag(values, 'instances', FLASH_SALE_DEFAULTS.instances, 1, 16),
    buyers: integerFlag(values, 'buyers', FLASH_SALE_DEFAULTS.buyers, 1, 100_000),
    stock: integerFlag(values, 'stock', FLASH_SALE_DEFAULTS.stock, 0, 100_000),
    mode: choiceFlag(values, 'mode', FLASH_SALE_DEFAULTS.mode, PROTECTION_MODES),
    chaos: choiceFlag(values, 'chaos', FLASH_SALE_DEFAULTS.chaos, CHAOS_KINDS),
    seed: integerFlag(values, 'seed', FLASH_SALE_DEFAULTS.seed, 0, 4_294_967_295),
    ttlMs: integerFlag(values, 'ttl-ms', FLASH_SALE_DEFAULTS.ttlMs, 100, 60_000),
    concurrency: integerFlag(values, 'concurrency', FLASH_SALE_DEFAULTS.concurrency, 1, 1_000),
    segments: integerFlag(values, 'segments', FLASH_SALE_DEFAULTS.segments, 1, 64),
    gatewayLatencyMs,
    keepData: values['keep-data'] === true,
    redis: choiceFlag(values, 'redis', 'single', ['single', 'sentinel'] as const),
    backend: choiceFlag(values, 'backend', 'redis', ['redis', 'etcd'] as const),
  }
  return { help: values.help === true, json: values.json === true, verbose: values.verbose === true, options }
}
