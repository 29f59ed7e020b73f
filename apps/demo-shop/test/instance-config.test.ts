// An instance reads its environment once and refuses a bad one before any I/O, naming the variable.
import { describe, expect, it } from 'vitest'
import { INSTANCE_DEFAULTS, InvalidConfigError, readInstanceConfig } from '../src/instance-config.js'

const base = {
  REDIS_URL: 'redis://127.0.0.1:6379',
  DATABASE_URL: 'postgresql://postgres@127.0.0.1:5432/test?schema=shop_x',
  SHOP_GATEWAY_URL: 'http://127.0.0.1:4000',
}

describe('readInstanceConfig', () => {
  it('applies the defaults and splits the schema off DATABASE_URL', () => {
    const config = readInstanceConfig(base)
    expect(config).toMatchObject({
      mode: INSTANCE_DEFAULTS.mode,
      port: INSTANCE_DEFAULTS.port,
      lockTtlMs: INSTANCE_DEFAULTS.lockTtlMs,
      gatewayUrl: 'http://127.0.0.1:4000',
      database: { schema: 'shop_x' },
    })
    expect(config.database.connectionString).not.toContain('schema=')
    // Ten leases each, unless set: an abandoned order, an intent with no charge.
    expect(config).toMatchObject({ abandonedOrderMs: 10_000, cancelIntentAfterMs: 10_000 })
    expect(readInstanceConfig({ ...base, SHOP_LOCK_TTL_MS: '300', SHOP_CANCEL_INTENT_AFTER_MS: '300' })).toMatchObject({ cancelIntentAfterMs: 300, abandonedOrderMs: 3_000 })
  })

  it('REDIS_SENTINELS: the Sentinels to ask for the primary (REDIS_URL then not needed), the master name, the lock replicas', () => {
    const config = readInstanceConfig({
      ...base,
      REDIS_URL: undefined,
      REDIS_SENTINELS: 'sentinel-1:26379, sentinel-2:26379,[::1]:26380',
      SHOP_LOCK_REPLICAS: '1',
    })
    expect(config.sentinels).toEqual({
      addresses: [
        { host: 'sentinel-1', port: 26379 },
        { host: 'sentinel-2', port: 26379 },
        { host: '::1', port: 26380 },
      ],
      name: 'fencelock',
    })
    expect(config.lockReplicas).toBe(1)
    // Empty (docker-compose's default) means a single Redis.
    expect(readInstanceConfig({ ...base, REDIS_SENTINELS: '' }).sentinels).toBeUndefined()
    expect(readInstanceConfig(base).lockReplicas).toBe(0)
  })

  it('ETCD_ENDPOINTS: the locks on etcd (Redis still required, for the views); not with SHOP_LOCK_REPLICAS', () => {
    expect(readInstanceConfig({ ...base, ETCD_ENDPOINTS: 'etcd:2379, 127.0.0.1:2380,http://[::1]:2379' }).etcdEndpoints).toEqual([
      'etcd:2379',
      '127.0.0.1:2380',
      'http://[::1]:2379',
    ])
    expect(readInstanceConfig(base).etcdEndpoints).toBeUndefined()
    expect(readInstanceConfig({ ...base, ETCD_ENDPOINTS: '' }).etcdEndpoints).toBeUndefined()
  })

  it.each([
    [{ ETCD_ENDPOINTS: 'etcd' }, 'ETCD_ENDPOINTS'],
    [{ ETCD_ENDPOINTS: 'etcd:2379,etcd:0' }, 'ETCD_ENDPOINTS'],
    [{ ETCD_ENDPOINTS: 'etcd:2379', SHOP_LOCK_REPLICAS: '1' }, 'SHOP_LOCK_REPLICAS'],
    [{ REDIS_URL: undefined }, 'REDIS_URL'],
    [{ REDIS_URL: 'http://x' }, 'REDIS_URL'],
    [{ DATABASE_URL: '' }, 'DATABASE_URL'],
    [{ DATABASE_URL: 'mysql://x/y' }, 'DATABASE_URL'],
    [{ SHOP_MODE: 'safe' }, 'SHOP_MODE'],
    [{ PORT: '70000' }, 'PORT'],
    [{ PORT: 'abc' }, 'PORT'],
    [{ SHOP_LOCK_TTL_MS: '0' }, 'SHOP_LOCK_TTL_MS'],
    [{ SHOP_GATEWAY_URL: undefined }, 'SHOP_GATEWAY_URL'],
    [{ SHOP_GATEWAY_URL: 'ftp://gateway' }, 'SHOP_GATEWAY_URL'],
    [{ SHOP_INSTANCE_ID: 'a b' }, 'SHOP_INSTANCE_ID'],
    [{ SHOP_RUN_ID: 'x{y}' }, 'SHOP_RUN_ID'],
    [{ SHOP_DB_POOL_SIZE: '0' }, 'SHOP_DB_POOL_SIZE'],
    [{ REDIS_SENTINELS: 'sentinel-1' }, 'REDIS_SENTINELS'],
    [{ REDIS_SENTINELS: 'a:1,b:99999' }, 'REDIS_SENTINELS'],
    [{ REDIS_SENTINELS: 'a:1', REDIS_SENTINEL_NAME: 'x y' }, 'REDIS_SENTINEL_NAME'],
    [{ SHOP_LOCK_REPLICAS: '17' }, 'SHOP_LOCK_REPLICAS'],
    [{ SHOP_ABANDONED_ORDER_MS: '999' }, 'SHOP_ABANDONED_ORDER_MS'],
    [{ SHOP_CANCEL_INTENT_AFTER_MS: '999' }, 'SHOP_CANCEL_INTENT_AFTER_MS'],
    [{ SHOP_CANCEL_INTENT_AFTER_MS: '1e4' }, 'SHOP_CANCEL_INTENT_AFTER_MS'],
  ])('refuses %j, naming %s', (patch, variable) => {
    let caught: unknown
    try {
      readInstanceConfig({ ...base, ...patch })
    } catch (error) {
      caught = error
    }
    expect(caught).toBeInstanceOf(InvalidConfigError)
    expect((caught as InvalidConfigError).variable).toBe(variable)
  })
})
