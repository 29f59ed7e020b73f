/**
 * An instance's configuration, read from the environment once and validated before any I/O.
 * Every variable, its default and its unit:
 *
 * | variable | default | meaning |
 * | --- | --- | --- |
 * | `REDIS_URL` | required unless `REDIS_SENTINELS` | the Redis of the locks |
 * | `REDIS_SENTINELS` | none | `host:port,host:port,...` of Redis Sentinels: the locks' Redis is the primary they name (ioredis follows a failover); takes precedence over `REDIS_URL` |
 * | `REDIS_SENTINEL_NAME` | `fencelock` | the master name the Sentinels monitor |
 * | `SHOP_LOCK_REPLICAS` | `0` | the lock's `replicas` option: replicas that must acknowledge a grant (0-16) |
 * | `ETCD_ENDPOINTS` | none | `host:port,host:port,...` of etcd members: the locks are on etcd (`new Locker(etcd3Client)`) instead of Redis; Redis still keeps the views (held locks). Not with `SHOP_LOCK_REPLICAS` |
 * | `DATABASE_URL` | required | PostgreSQL; `?schema=<name>` picks the schema (default `public`) |
 * | `SHOP_INSTANCE_ID` | `shop-<pid>` | the instance's name in answers, payments and lock views |
 * | `SHOP_MODE` | `fenced` | `unsafe` (no lock), `lock` (lock only), `fenced` (lock + fencing) |
 * | `HOST` / `PORT` | `127.0.0.1` / `3000` | where to listen; `PORT=0` picks a free port |
 * | `SHOP_RUN_ID` | `demo` | namespace of the run's lock and view keys in Redis |
 * | `SHOP_LOCK_TTL_MS` | `1000` | lease of each lock (short, so a pause outlives it) |
 * | `SHOP_LOCK_WAIT_MS` | `30000` | how long a request waits for a held lock |
 * | `SHOP_GATEWAY_URL` | required | the payment gateway (a process of its own, gateway/gateway-main.ts) |
 * | `SHOP_DB_POOL_SIZE` | `5` | PostgreSQL connections of this instance |
 * | `SHOP_RECONCILE_INTERVAL_MS` | `2000` | the reconciler's period (a pass at start-up, then this often); `0` turns it off |
 * | `SHOP_SALE_TIMERS` | unset | `1`: time each purchase's phases (sale-timings.ts), reported in the instance's stats |
 * | `SHOP_ABANDONED_ORDER_MS` | 10 × `SHOP_LOCK_TTL_MS` | an order still pending with no payment intent this long after it was made is abandoned (its instance died after the purchase, or its buyer never paid): a violation until the reconciler cancels it and returns its unit. At least the lease |
 * | `SHOP_CANCEL_INTENT_AFTER_MS` | 10 × `SHOP_LOCK_TTL_MS` | a payment intent with no charge at the gateway is cancelled by the reconciler (its unit returned) only once this old; younger, it is left to the payment's own deliveries (the queue's duplicate, a retry), which pay it when its payer stalled past its lease. The window in which a payment is delivered again; at least the lease |
 * | `FENCELOCK_DIE_AFTER_CHARGE` | unset | test hook: the process kills itself (SIGKILL) right after the gateway answered its n-th charge, before the payment row |
 * | `FENCELOCK_DIE_AFTER_PURCHASE` | unset | test hook: the process kills itself (SIGKILL) right after its n-th purchase committed, before the buyer is answered (so before any payment intent) |
 */
import { databaseTarget } from './database.js'
import { PROTECTION_MODES, type ProtectionMode } from './protection.js'
import { RUN_ID_PATTERN } from './shop-keys.js'

/** Defaults of the instance, in one frozen object. */
export const INSTANCE_DEFAULTS = Object.freeze({
  mode: 'fenced' as ProtectionMode,
  host: '127.0.0.1',
  port: 3000,
  runId: 'demo',
  lockTtlMs: 1_000,
  lockWaitMs: 30_000,
  dbPoolSize: 5,
  reconcileIntervalMs: 2_000,
})

/** The validated configuration of one instance. */
export interface InstanceConfig {
  readonly instanceId: string
  readonly mode: ProtectionMode
  readonly host: string
  readonly port: number
  readonly redisUrl: string
  /** Sentinels to ask for the primary (REDIS_SENTINELS), when set: they take precedence over `redisUrl`. */
  readonly sentinels?: { readonly addresses: readonly { host: string; port: number }[]; readonly name: string }
  /** The lock's `replicas` option. */
  readonly lockReplicas: number
  /** etcd members (ETCD_ENDPOINTS), when set: the locks are on etcd, not Redis. */
  readonly etcdEndpoints?: readonly string[]
  readonly database: { readonly connectionString: string; readonly schema: string }
  readonly runId: string
  readonly lockTtlMs: number
  readonly lockWaitMs: number
  readonly gatewayUrl: string
  readonly dbPoolSize: number
  readonly reconcileIntervalMs: number
  /** Test hook: die (SIGKILL) right after the gateway answered the n-th charge; undefined: never. */
  readonly dieAfterCharge: number | undefined
  /** Test hook: die (SIGKILL) right after the n-th purchase committed; undefined: never. */
  readonly dieAfterPurchase: number | undefined
  /** An order pending with no payment intent this long (ms) is abandoned (see SHOP_ABANDONED_ORDER_MS). */
  readonly abandonedOrderMs: number
  /** A payment intent with no charge is cancelled only this long (ms) after it was recorded (see SHOP_CANCEL_INTENT_AFTER_MS). */
  readonly cancelIntentAfterMs: number
  /** SHOP_SALE_TIMERS=1: purchases timed by phase. */
  readonly saleTimers: boolean
}

/** A bad environment variable; `variable` names it. Thrown before any I/O. */
export class InvalidConfigError extends Error {
  readonly variable: string
  constructor(variable: string, rule: string, value: string | undefined) {
    super(
      `${variable} ${rule} (got ${value === undefined ? 'nothing' : JSON.stringify(value.length > 80 ? `${value.slice(0, 80)}…` : value)})`,
    )
    this.name = 'InvalidConfigError'
    this.variable = variable
  }
}

/** Reads an integer variable: `fallback` when unset or empty, else it must be from `min` to `max` (InvalidConfigError). */
export function integerVariable(
  env: NodeJS.ProcessEnv,
  name: string,
  fallback: number,
  min: number,
  max: number,
): number {
  const raw = env[name]
  if (raw === undefined || raw === '') return fallback
  if (!/^\d+$/.test(raw) || Number(raw) < min || Number(raw) > max)
    throw new InvalidConfigError(name, `must be an integer from ${min} to ${max}`, raw)
  return Number(raw)
}

/**
 * Reads and validates the configuration.
 * @throws InvalidConfigError naming the first bad variable.
 * @example
 * ```ts
 * const config = readInstanceConfig(process.env)
 * ```
 */
export function readInstanceConfig(env: NodeJS.ProcessEnv): InstanceConfig {
  const sentinels = env.REDIS_SENTINELS ? sentinelsOf(env.REDIS_SENTINELS, env.REDIS_SENTINEL_NAME || 'fencelock') : undefined
  const redisUrl = env.REDIS_URL || (sentinels ? '' : undefined)
  if (redisUrl === undefined || (redisUrl !== '' && !/^rediss?:\/\//.test(redisUrl))) throw new InvalidConfigError('REDIS_URL', 'must be a redis:// or rediss:// URL (or set REDIS_SENTINELS)', redisUrl)
  if (!env.DATABASE_URL) throw new InvalidConfigError('DATABASE_URL', 'must be a postgresql:// URL', env.DATABASE_URL)
  let database: InstanceConfig['database']
  try {
    database = databaseTarget(env.DATABASE_URL)
  } catch {
    throw new InvalidConfigError('DATABASE_URL', 'must be a postgresql:// URL', env.DATABASE_URL)
  }
  const mode = env.SHOP_MODE || INSTANCE_DEFAULTS.mode
  if (!(PROTECTION_MODES as readonly string[]).includes(mode))
    throw new InvalidConfigError('SHOP_MODE', `must be one of ${PROTECTION_MODES.join(', ')}`, mode)
  const instanceId = env.SHOP_INSTANCE_ID || `shop-${process.pid}`
  if (!/^[A-Za-z0-9_.-]{1,40}$/.test(instanceId))
    throw new InvalidConfigError('SHOP_INSTANCE_ID', 'must be 1 to 40 of A-Z a-z 0-9 _ . -', instanceId)
  const runId = env.SHOP_RUN_ID || INSTANCE_DEFAULTS.runId
  if (!RUN_ID_PATTERN.test(runId))
    throw new InvalidConfigError('SHOP_RUN_ID', 'must be 1 to 40 of A-Z a-z 0-9 _ -', runId)
  const etcdEndpoints = env.ETCD_ENDPOINTS ? etcdEndpointsOf(env.ETCD_ENDPOINTS) : undefined
  const lockReplicas = integerVariable(env, 'SHOP_LOCK_REPLICAS', 0, 0, 16)
  if (etcdEndpoints && lockReplicas > 0)
    throw new InvalidConfigError('SHOP_LOCK_REPLICAS', 'must be 0 with ETCD_ENDPOINTS: etcd commits every grant on a majority of its members', String(lockReplicas))
  const gatewayUrl = env.SHOP_GATEWAY_URL
  if (!gatewayUrl || !/^https?:\/\/[^\s]+$/.test(gatewayUrl))
    throw new InvalidConfigError('SHOP_GATEWAY_URL', 'must be an http:// or https:// URL', gatewayUrl)
  return {
    instanceId,
    mode: mode as ProtectionMode,
    host: env.HOST || INSTANCE_DEFAULTS.host,
    port: integerVariable(env, 'PORT', INSTANCE_DEFAULTS.port, 0, 65_535),
    redisUrl,
    ...(sentinels ? { sentinels } : {}),
    lockReplicas,
    ...(etcdEndpoints ? { etcdEndpoints } : {}),
    database,
    runId,
    lockTtlMs: integerVariable(env, 'SHOP_LOCK_TTL_MS', INSTANCE_DEFAULTS.lockTtlMs, 10, 600_000),
    lockWaitMs: integerVariable(env, 'SHOP_LOCK_WAIT_MS', INSTANCE_DEFAULTS.lockWaitMs, 0, 600_000),
    gatewayUrl,
    dbPoolSize: integerVariable(env, 'SHOP_DB_POOL_SIZE', INSTANCE_DEFAULTS.dbPoolSize, 1, 100),
    reconcileIntervalMs: integerVariable(
      env,
      'SHOP_RECONCILE_INTERVAL_MS',
      INSTANCE_DEFAULTS.reconcileIntervalMs,
      0,
      600_000,
    ),
    dieAfterCharge: env.FENCELOCK_DIE_AFTER_CHARGE
      ? integerVariable(env, 'FENCELOCK_DIE_AFTER_CHARGE', 0, 1, 1_000_000)
      : undefined,
    dieAfterPurchase: env.FENCELOCK_DIE_AFTER_PURCHASE
      ? integerVariable(env, 'FENCELOCK_DIE_AFTER_PURCHASE', 0, 1, 1_000_000)
      : undefined,
    abandonedOrderMs: atLeastTheLease(env, 'SHOP_ABANDONED_ORDER_MS'),
    cancelIntentAfterMs: atLeastTheLease(env, 'SHOP_CANCEL_INTENT_AFTER_MS'),
    saleTimers: booleanFlag(env, 'SHOP_SALE_TIMERS'),
  }
}

/** An on/off variable: unset, `0` or `1`. */
function booleanFlag(env: NodeJS.ProcessEnv, variable: string): boolean {
  const value = env[variable]
  if (value === undefined || value === '' || value === '0') return false
  if (value === '1') return true
  throw new InvalidConfigError(variable, 'must be 0 or 1', value)
}

/** `host:port,host:port` (REDIS_SENTINELS) and the master name (REDIS_SENTINEL_NAME), checked. */
function sentinelsOf(list: string, name: string): NonNullable<InstanceConfig['sentinels']> {
  const addresses = list.split(',').map((item) => {
    const match = /^([A-Za-z0-9_.-]+|\[[0-9a-fA-F:]+\]):(\d{1,5})$/.exec(item.trim())
    const port = Number(match?.[2])
    if (!match || port < 1 || port > 65_535) throw new InvalidConfigError('REDIS_SENTINELS', 'must be host:port[,host:port...]', list)
    return { host: (match[1] as string).replace(/^\[|\]$/g, ''), port }
  })
  if (!/^[A-Za-z0-9_.-]{1,64}$/.test(name)) throw new InvalidConfigError('REDIS_SENTINEL_NAME', 'must be 1 to 64 of A-Z a-z 0-9 _ . -', name)
  return { addresses, name }
}

/** `host:port,host:port` (ETCD_ENDPOINTS), checked; etcd3's `hosts`. */
function etcdEndpointsOf(list: string): readonly string[] {
  return list.split(',').map((item) => {
    const match = /^(?:https?:\/\/)?([A-Za-z0-9_.-]+|\[[0-9a-fA-F:]+\]):(\d{1,5})$/.exec(item.trim())
    const port = Number(match?.[2])
    if (!match || port < 1 || port > 65_535) throw new InvalidConfigError('ETCD_ENDPOINTS', 'must be host:port[,host:port...]', list)
    return item.trim()
  })
}

/** SHOP_ABANDONED_ORDER_MS or SHOP_CANCEL_INTENT_AFTER_MS, at least the lease (default ten leases): a live payer may hold the order that long. */
function atLeastTheLease(env: NodeJS.ProcessEnv, variable: 'SHOP_ABANDONED_ORDER_MS' | 'SHOP_CANCEL_INTENT_AFTER_MS'): number {
  const ttl = integerVariable(env, 'SHOP_LOCK_TTL_MS', INSTANCE_DEFAULTS.lockTtlMs, 10, 600_000)
  const value = integerVariable(env, variable, 10 * ttl, 0, 3_600_000)
  if (value < ttl) throw new InvalidConfigError(variable, `must be at least SHOP_LOCK_TTL_MS (${ttl})`, String(value))
  return value
}
