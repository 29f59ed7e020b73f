// The flash sale with its locks on etcd (`--backend etcd`, issue 36): an etcd member spawned for
// the run, the instances' Lockers on it (ETCD_ENDPOINTS), Redis keeping only the views. A lock
// holder frozen (SIGSTOP) past its lease wakes to a larger etcd revision in the row's fence: in
// fenced mode nothing is sold twice or charged twice, counted from the database and the gateway
// ledger. The unprotected controls are the Redis runs of flash-sale.test.ts: the code under the
// lock is the same, only the engine differs.
import { stopAllEtcdServers } from '@fencelock/devkit/etcd-server'
import { afterAll, describe, expect, it } from 'vitest'
import { databaseTarget } from '../src/database.js'
import { FLASH_SALE_DEFAULTS, FlashSaleSetupError, runFlashSale, type FlashSaleServices } from '../src/flash-sale.js'
import { REDIS_URL } from './services.js'

const services: FlashSaleServices = {
  redis: { url: REDIS_URL, origin: 'test Redis', owned: undefined, stop: async () => {} },
  database: { connectionString: databaseTarget(process.env.DATABASE_URL || undefined).connectionString, origin: 'test PostgreSQL' },
}

afterAll(async () => {
  await stopAllEtcdServers()
})

describe('flash sale with the locks on etcd', () => {
  it('fenced + pause: exactly the stock sold, nothing charged twice, every charge one paid order; the report names the etcd it spawned', async () => {
    const saved = process.env.ETCD_ENDPOINTS
    delete process.env.ETCD_ENDPOINTS
    try {
      const report = await runFlashSale(
        {
          ...FLASH_SALE_DEFAULTS,
          backend: 'etcd',
          instances: 2,
          buyers: 60,
          stock: 10,
          mode: 'fenced',
          chaos: 'pause',
          seed: 3,
          ttlMs: 1_000,
          gatewayLatencyMs: '60-120',
          concurrency: 16,
        },
        () => {},
        services,
      )
      expect(report.services.etcd).toMatch(/^etcd \(spawned: one member :\d+\)$/)
      expect(report.sold).toBe(10)
      expect(report.oversoldUnits).toBe(0)
      expect(report.doubleChargedOrders).toBe(0)
      expect(report.lostUpdates).toBe(0)
      expect(report.gatewayCharges).toBe(report.paidOrders)
      expect(report.violations).toBe(0)
      expect(report.acquires).toBeGreaterThan(0)
    } finally {
      if (saved !== undefined) process.env.ETCD_ENDPOINTS = saved
    }
  }, 180_000)

  it('refuses what cannot go with etcd before starting anything: --chaos redis-restart, --redis sentinel', async () => {
    for (const extra of [{ chaos: 'redis-restart' as const }, { redis: 'sentinel' as const }]) {
      await expect(runFlashSale({ ...FLASH_SALE_DEFAULTS, backend: 'etcd', ...extra }, () => {}, services)).rejects.toBeInstanceOf(
        FlashSaleSetupError,
      )
    }
  })
})
