/**
 * Wires one shop instance from its configuration: its own Redis connection and Locker, its own
 * Prisma client (extended with fencing), its metrics registry, and the express app. `main.ts`
 * runs it as a process; tests build it in-process on the real services.
 */
import { SaleTimings, type SaleTimingTotals } from './sale-timings.js'
import { StaleFencingTokenError } from '@fencelock/fencing'
import { Locker, type LockEvent } from '@fencelock/lock'
import { instrument, metricsHandler } from '@fencelock/metrics'
import type { Express } from 'express'
import { Etcd3 } from 'etcd3'
import { Redis } from 'ioredis'
import { Registry } from 'prom-client'
import { createApp } from './app.js'
import { createPrisma } from './database.js'
import { heldLocksRecorder, readHeldLocks } from './held-locks.js'
import type { InstanceConfig } from './instance-config.js'
import { InFlight } from './in-flight.js'
import { IncidentLog, type RecordedEvent } from './incident-log.js'
import { GatewayError, httpGateway } from './payment-gateway.js'
import { Reconciler } from './reconciler.js'
import { createProtection, fencedShopClient, shopStores } from './protection.js'
import { countShop } from './shop-counts.js'
import { lockPrefixOf, shopKeys } from './shop-keys.js'
import { ShopService, type ShopObserver } from './shop-service.js'

/**
 * What an instance counted itself, for the report's columns that the database cannot know:
 * the waits of granted acquires, locks that expired under their holder, and stale writes the
 * database rejected (counted from the fencing extension's `onRejection`).
 */
export interface InstanceStats {
  readonly instance: string
  /** Wait of every granted acquire, in ms. */
  readonly acquireWaitsMs: number[]
  readonly acquireTimeouts: number
  /** Locks that were lost or found expired at release. */
  readonly expiredLocks: number
  /** Stale writes the database refused, and stale charges the payment gateway refused (409 stale_fencing_token). */
  readonly staleWritesRejected: number
  /** Orders this instance's reconciler settled: paid from the ledger, cancelled. */
  readonly reconciledPaid: number
  readonly reconciledCancelled: number
  /** With SHOP_SALE_TIMERS=1: the purchases' phases summed (sale-timings.ts). */
  readonly saleTimings?: SaleTimingTotals
  /** What it recorded for the incident timeline and the charged-twice drill-down (incident-log.ts). */
  readonly events: RecordedEvent[]
}

/** A built instance. */
export interface Instance {
  readonly app: Express
  readonly config: InstanceConfig
  stats(): InstanceStats
  /** Shop operations (purchases, payments) still running, including ones whose client gave up. */
  inFlight(): number
  /**
   * Stops the reconciler and waits until no purchase or payment runs, at most `timeoutMs`;
   * resolves false when work was still running then. Call it after the server stopped taking requests.
   */
  drain(timeoutMs: number): Promise<boolean>
  /** Closes the locker, Redis and the database pool. The HTTP server is the caller's. */
  close(): Promise<void>
}

// Prisma's interactive-transaction defaults (2 s to get a connection, 5 s to run) are too short
// for a pool of one on PGlite while other instances queue: give them room.
const TX_LIMITS = { maxWait: 15_000, timeout: 15_000 }

/** How long the shop waits for the gateway's answer to a call, in ms (httpGateway's default). */
export const GATEWAY_TIMEOUT_MS = 30_000

/**
 * Builds an instance. `observer` is told about each gateway call made under a lock (the
 * supervisor's chaos uses it to pick whom to pause).
 * @example
 * ```ts
 * const instance = await buildInstance(readInstanceConfig(process.env))
 * instance.app.listen(3000)
 * ```
 */
export async function buildInstance(config: InstanceConfig, observer?: ShopObserver): Promise<Instance> {
  // Through Sentinel when configured: ioredis asks the Sentinels for the primary and follows a failover.
  const redis = config.sentinels
    ? new Redis({ sentinels: [...config.sentinels.addresses], name: config.sentinels.name, maxRetriesPerRequest: 2 })
    : new Redis(config.redisUrl, { lazyConnect: false, maxRetriesPerRequest: 2 })
  redis.on('error', () => {
    // ioredis reconnects by itself (e.g. across a Redis restart); the lock reports what failed.
  })
  const keys = shopKeys(config.runId)
  const lockPrefix = lockPrefixOf(config.runId)

  const counters = { acquireWaitsMs: [] as number[], acquireTimeouts: 0, expiredLocks: 0, staleWritesRejected: 0 }
  const count = (event: LockEvent) => {
    if (event.type === 'acquired') counters.acquireWaitsMs.push(event.waitedMs)
    else if (event.type === 'timeout') counters.acquireTimeouts++
    else if (event.type === 'lost') counters.expiredLocks++
    else if (event.type === 'released' && event.outcome === 'expired' && !event.wasLost) counters.expiredLocks++
  }
  // The locks on etcd when ETCD_ENDPOINTS is set (Redis still keeps the views); else on Redis.
  const etcd = config.etcdEndpoints ? new Etcd3({ hosts: [...config.etcdEndpoints] }) : undefined
  const locker = new Locker(etcd ?? redis, {
    ttlMs: config.lockTtlMs,
    waitMs: config.lockWaitMs,
    prefix: lockPrefix,
    onEvent: count,
    ...(config.lockReplicas > 0 ? { replicas: config.lockReplicas } : {}),
  })
  const heldLocks = heldLocksRecorder(redis, keys.heldLocks, config.instanceId)
  locker.listen(heldLocks)
  const incidentLog = new IncidentLog(config.instanceId)
  locker.listen(incidentLog.lockListener())

  const registry = new Registry()
  const metrics = instrument(locker, { registry, groups: ['product', 'order'] })

  const prisma = createPrisma(config.database, config.dbPoolSize)
  const db = fencedShopClient(prisma, (rejection) => {
    counters.staleWritesRejected++
    metrics.onFencingRejection(rejection)
  })
  const stores = shopStores(prisma, db, TX_LIMITS)
  const protection = createProtection(config.mode, {
    stores,
    locker,
    ttlMs: config.lockTtlMs,
    waitMs: config.lockWaitMs,
  })
  const gateway = httpGateway({ url: config.gatewayUrl, timeoutMs: GATEWAY_TIMEOUT_MS })
  const timings = config.saleTimers ? new SaleTimings() : undefined
  const service = new ShopService({
    ...(timings === undefined ? {} : { timings }),
    db: prisma,
    protection,
    gateway,
    instanceId: config.instanceId,
    observer: {
      externalCall: (call) => {
        incidentLog.call(call)
        observer?.externalCall(call)
      },
      ordered: (call) => observer?.ordered?.(call),
      chargeAnswered: (call) => observer?.chargeAnswered?.(call),
      step: (step) => {
        incidentLog.step(step)
        observer?.step?.(step)
      },
    },
  })
  const reconciler = new Reconciler({
    db: prisma,
    protection,
    gateway,
    instanceId: config.instanceId,
    minAgeMs: config.lockTtlMs,
    abandonedAfterMs: config.abandonedOrderMs,
    cancelIntentAfterMs: config.cancelIntentAfterMs,
    logError: () => {},
  })

  // Counted here rather than per HTTP request: a handler goes on after its client gave up (a
  // paused instance wakes to requests whose callers timed out), and shutdown must wait for it.
  const inFlight = new InFlight()
  // The gateway refused a charge with an old token: a stale write rejected, as the database's are.
  const countGatewayRefusal = (error: unknown, resource: string) => {
    if (!(error instanceof GatewayError && error.isStaleToken)) return
    counters.staleWritesRejected++
    metrics.onFencingRejection({
      model: 'GatewayCharge',
      operation: `charge ${resource}`,
      token: 0n,
      storedToken: undefined,
    })
  }
  const shop = {
    purchase: (sku: string, buyerId: string) => inFlight.track(() => service.purchase(sku, buyerId)),
    pay: (orderId: number) =>
      inFlight.track(() =>
        service.pay(orderId).catch((error: unknown) => {
          countGatewayRefusal(error, `order:${orderId}`)
          throw error
        }),
      ),
  }
  // At start-up, then every reconcileIntervalMs: intents an instance left unpaid (it died after
  // the charge) are settled from the gateway's ledger. 0: never (tests drive it themselves).
  const stopReconciler = config.reconcileIntervalMs > 0 ? reconciler.start(config.reconcileIntervalMs) : async () => {}

  const app = createApp({
    instanceId: config.instanceId,
    mode: config.mode,
    lockTtlMs: config.lockTtlMs,
    shop,
    counts: () => countShop(prisma, config.database.schema, { abandonedAfterMs: config.abandonedOrderMs, inFlightMs: config.lockTtlMs }),
    heldLocks: () => readHeldLocks(redis, keys.heldLocks, locker, heldLocks),
    metrics: metricsHandler(registry),
    // The shop's database refused a stale write, or the gateway refused a stale token: either way
    // this instance's lock is no longer current and nothing of the operation was done.
    isStaleWrite: (error) =>
      error instanceof StaleFencingTokenError || (error instanceof GatewayError && error.isStaleToken),
  })

  let closed: Promise<void> | undefined
  return {
    app,
    config,
    inFlight: () => inFlight.count,
    stats: () => ({
      instance: config.instanceId,
      ...counters,
      acquireWaitsMs: [...counters.acquireWaitsMs],
      reconciledPaid: reconciler.totals.paid,
      reconciledCancelled: reconciler.totals.cancelled,
      ...(timings === undefined ? {} : { saleTimings: timings.totals() }),
      events: incidentLog.events(),
    }),
    async drain(timeoutMs) {
      const deadline = performance.now() + timeoutMs
      await stopReconciler()
      return inFlight.idle(Math.max(0, deadline - performance.now()))
    },
    close: () =>
      (closed ??= (async () => {
        await stopReconciler()
        await locker.close().catch(() => {})
        etcd?.close()
        metrics.stop()
        await prisma.$disconnect().catch(() => {})
        redis.disconnect()
      })()),
  }
}
