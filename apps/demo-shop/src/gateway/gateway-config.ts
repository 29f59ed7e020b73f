/**
 * The gateway process's configuration, read from the environment once and validated before any
 * I/O. Every variable, its default and its unit:
 *
 * | variable | default | meaning |
 * | --- | --- | --- |
 * | `DATABASE_URL` | required | PostgreSQL of the gateway's ledger; `?schema=<name>` picks the schema |
 * | `HOST` / `PORT` | `127.0.0.1` / `4000` | where to listen; `PORT=0` picks a free port |
 * | `GATEWAY_LATENCY_MS` | `30-80` | latency of every answer, `<ms>` or `<min>-<max>` |
 * | `GATEWAY_DB_POOL_SIZE` | `10` | PostgreSQL connections (a charge holds one for its latency) |
 */
import { databaseTarget } from '../database.js'
import { integerVariable, InvalidConfigError } from '../instance-config.js'
import { parseLatency, type GatewayLatency } from '../payment-gateway.js'

/** Defaults of the gateway, in one frozen object. */
export const GATEWAY_DEFAULTS = Object.freeze({
  host: '127.0.0.1',
  port: 4000,
  latency: '30-80',
  dbPoolSize: 10,
})

/** The validated configuration of the gateway. */
export interface GatewayConfig {
  readonly host: string
  readonly port: number
  readonly database: { readonly connectionString: string; readonly schema: string }
  readonly latency: GatewayLatency
  readonly dbPoolSize: number
}

/**
 * Reads and validates the gateway's configuration.
 * @throws InvalidConfigError naming the first bad variable.
 * @example
 * ```ts
 * const config = readGatewayConfig(process.env)
 * ```
 */
export function readGatewayConfig(env: NodeJS.ProcessEnv): GatewayConfig {
  if (!env.DATABASE_URL) throw new InvalidConfigError('DATABASE_URL', 'must be a postgresql:// URL', env.DATABASE_URL)
  let database: GatewayConfig['database']
  try {
    database = databaseTarget(env.DATABASE_URL)
  } catch {
    throw new InvalidConfigError('DATABASE_URL', 'must be a postgresql:// URL', env.DATABASE_URL)
  }
  let latency: GatewayLatency
  try {
    latency = parseLatency(env.GATEWAY_LATENCY_MS || GATEWAY_DEFAULTS.latency)
  } catch {
    throw new InvalidConfigError('GATEWAY_LATENCY_MS', 'must be "<ms>" or "<min>-<max>", at most 60000', env.GATEWAY_LATENCY_MS)
  }
  return {
    host: env.HOST || GATEWAY_DEFAULTS.host,
    port: integerVariable(env, 'PORT', GATEWAY_DEFAULTS.port, 0, 65_535),
    database,
    latency,
    dbPoolSize: integerVariable(env, 'GATEWAY_DB_POOL_SIZE', GATEWAY_DEFAULTS.dbPoolSize, 1, 100),
  }
}
