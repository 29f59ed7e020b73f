/**
 * The command line of `npm run flash-sale`, validated before anything starts. Every error names
 * the flag and says what it must be.
 */
import { CHAOS_KINDS, type ChaosKind } from './chaos.js'
import { FLASH_SALE_DEFAULTS, type FlashSaleOptions } from './flash-sale.js'
import { parseLatency } from './payment-gateway.js'
import { PROTECTION_MODES, type ProtectionMode } from './protection.js'

/** What the command line asks for. */
export interface FlashSaleCommand {
  readonly help: boolean
  readonly json: boolean
  readonly verbose: boolean
  readonly options: FlashSaleOptions
}

/** A bad command line; the CLI prints the message and the usage, and exits 2. */
export class UsageError extends Error {
  constructor(message: string) {
    super(message)
    this.name = 'UsageError'
  }
}

export const USAGE = `Usage: npm run flash-sale -- [options]

  --instances <n>     shop instances (processes), 1-16               default ${FLASH_SALE_DEFAULTS.instances}
  --buyers <n>        buyers, each buys once, 1-100000               default ${FLASH_SALE_DEFAULTS.buyers}
  --stock <n>         units on sale, 0-100000                        default ${FLASH_SALE_DEFAULTS.stock}
  --mode <m>          unsafe | lock | fenced                         default ${FLASH_SALE_DEFAULTS.mode}
  --chaos <c>         none | pause | redis-restart                   default ${FLASH_SALE_DEFAULTS.chaos}
  --seed <n>          seed of the run's random choices, 0-4294967295 default ${FLASH_SALE_DEFAULTS.seed}
  --ttl-ms <n>        lock lease in ms, 100-60000                    default ${FLASH_SALE_DEFAULTS.ttlMs}
  --gateway-latency-ms <min-max>   simulated gateway latency       default ${FLASH_SALE_DEFAULTS.gatewayLatencyMs}
  --concurrency <n>   buyers in flight at once, 1-1000               default ${FLASH_SALE_DEFAULTS.concurrency}
  --json              print the report as JSON on stdout
  --keep-data         keep the run's database schema
  --verbose           show the instances' logs
  --help              this text

Uses REDIS_URL, else 127.0.0.1:6379, else a redis-server it spawns (always its own for
--chaos redis-restart); DATABASE_URL, else an embedded PGlite. Exit code 1 when a violation
happens in fenced mode, 2 on a bad command line.`

function integer(flag: string, raw: string, min: number, max: number): number {
  if (!/^\d+$/.test(raw) || Number(raw) < min || Number(raw) > max) throw new UsageError(`${flag} must be an integer from ${min} to ${max} (got ${JSON.stringify(raw)})`)
  return Number(raw)
}

/**
 * Parses the arguments after `--`.
 * @throws UsageError for an unknown flag, a missing value or a value out of range.
 */
export function parseFlashSaleArgs(argv: readonly string[]): FlashSaleCommand {
  const o: { -readonly [K in keyof FlashSaleOptions]: FlashSaleOptions[K] } = { ...FLASH_SALE_DEFAULTS, keepData: false }
  let help = false
  let json = false
  let verbose = false
  const seen = new Set<string>()
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] as string
    const eq = arg.indexOf('=')
    const flag = arg.startsWith('--') && eq > 0 ? arg.slice(0, eq) : arg
    const booleans: Record<string, () => void> = {
      '--help': () => (help = true),
      '-h': () => (help = true),
      '--json': () => (json = true),
      '--keep-data': () => (o.keepData = true),
      '--verbose': () => (verbose = true),
    }
    if (booleans[flag]) {
      if (eq > 0) throw new UsageError(`${flag} takes no value`)
      booleans[flag]()
      continue
    }
    const valued = ['--instances', '--buyers', '--stock', '--mode', '--chaos', '--seed', '--ttl-ms', '--gateway-latency-ms', '--concurrency']
    if (!valued.includes(flag)) throw new UsageError(`unknown option ${JSON.stringify(arg)}`)
    if (seen.has(flag)) throw new UsageError(`${flag} is given twice`)
    seen.add(flag)
    const value = eq > 0 ? arg.slice(eq + 1) : argv[++i]
    if (value === undefined || value === '' || (eq < 0 && value.startsWith('--'))) throw new UsageError(`${flag} needs a value`)
    switch (flag) {
      case '--instances':
        o.instances = integer(flag, value, 1, 16)
        break
      case '--buyers':
        o.buyers = integer(flag, value, 1, 100_000)
        break
      case '--stock':
        o.stock = integer(flag, value, 0, 100_000)
        break
      case '--seed':
        o.seed = integer(flag, value, 0, 4_294_967_295)
        break
      case '--ttl-ms':
        o.ttlMs = integer(flag, value, 100, 60_000)
        break
      case '--concurrency':
        o.concurrency = integer(flag, value, 1, 1_000)
        break
      case '--mode':
        if (!(PROTECTION_MODES as readonly string[]).includes(value)) throw new UsageError(`--mode must be one of ${PROTECTION_MODES.join(', ')} (got ${JSON.stringify(value)})`)
        o.mode = value as ProtectionMode
        break
      case '--chaos':
        if (!(CHAOS_KINDS as readonly string[]).includes(value)) throw new UsageError(`--chaos must be one of ${CHAOS_KINDS.join(', ')} (got ${JSON.stringify(value)})`)
        o.chaos = value as ChaosKind
        break
      case '--gateway-latency-ms':
        try {
          parseLatency(value)
        } catch (error) {
          throw new UsageError(`--gateway-latency-ms: ${(error as Error).message}`)
        }
        o.gatewayLatencyMs = value
        break
    }
  }
  return { help, json, verbose, options: o }
}
