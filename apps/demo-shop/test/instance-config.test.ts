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
  })

  it.each([
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
