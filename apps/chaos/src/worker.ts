/**
 * One chaos worker process, forked by the demo shop's Supervisor (it speaks the shop instance's
 * IPC protocol: `ready`, `external-call`, `shutdown`). It runs the shop's business code
 * (`ShopService`) in `lock` or `fenced` mode with its own Redis connection (one per node in
 * quorum mode: `CHAOS_REDIS_URLS`; ioredis's Sentinel or Cluster client with `CHAOS_SENTINELS` or
 * `CHAOS_CLUSTER_NODES`, and the lock's `replicas` option from `CHAOS_REPLICAS`; or its locks on
 * etcd with `CHAOS_ETCD_ENDPOINTS`, an `etcd3` client on those members), Locker and Prisma client, from a few concurrent clients, and records its history (see history.ts) to
 * `<CHAOS_HISTORY_DIR>/<instance>.jsonl`. No HTTP: the faults are about the lock and the
 * database, and a server would only add latency between the fault and the write.
 *
 * With `CHAOS_BLOCK=1` it blocks its own event loop (a busy loop, as a long synchronous job or a
 * stop-the-world GC) for 0-3 × TTL at some gateway calls made under a lock, and records each.
 *
 * With `FENCELOCK_DIE_AFTER_CHARGE=<n>` (the shop instance's test hook, same meaning) it kills
 * itself (SIGKILL) right after the gateway answered its n-th charge, before the payment row,
 * having first recorded its death (a `fault` naming it), so the checker ends its open sections
 * there and the money it moved is left to the reconciler's pass.
 */
import { Locker } from '@fencelock/lock'
import { Etcd3 } from 'etcd3'
import { Cluster, Redis } from 'ioredis'
import { createPrisma } from '@fencelock/demo-shop/database'
import type { InstanceMessage, SupervisorMessage } from '@fencelock/demo-shop/ipc-messages'
import { httpGateway } from '@fencelock/demo-shop/payment-gateway'
import { createProtection, fencedShopClient, shopStores } from '@fencelock/demo-shop/protection'
import { lockPrefixOf } from '@fencelock/demo-shop/shop-keys'
import { ShopService, type ShopObserver } from '@fencelock/demo-shop/shop-service'
import { monoNow, Recorder, recordStalls } from './history.js'
import { recordingProtection } from './recording-protection.js'

const env = (name: string): string => {
  const value = process.env[name]
  if (value === undefined || value === '') throw new Error(`${name} is required`)
  return value
}

const send = (message: InstanceMessage) => {
  if (process.send && process.connected) process.send(message, undefined, {}, () => {})
}
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms))

/** An optional positive integer variable: undefined when unset or empty, else 1 or more (else it throws, naming it). */
function positiveIntegerOrUnset(name: string): number | undefined {
  const text = process.env[name]
  if (text === undefined || text === '') return undefined
  const value = Number(text)
  if (!Number.isSafeInteger(value) || value < 1) throw new RangeError(`${name} must be an integer of 1 or more (got ${JSON.stringify(text)})`)
  return value
}

async function main(): Promise<void> {
  const inst = env('SHOP_INSTANCE_ID')
  const mode = env('CHAOS_MODE')
  if (mode !== 'lock' && mode !== 'fenced') throw new Error(`CHAOS_MODE must be lock or fenced (got ${mode})`)
  const ttlMs = Number(env('CHAOS_TTL_MS'))
  const waitMs = Number(process.env.CHAOS_WAIT_MS ?? 2_000)
  const schema = env('CHAOS_SCHEMA')
  const skus = env('CHAOS_SKUS').split(',')
  const clients = Number(process.env.CHAOS_CLIENTS ?? 3)
  const block = process.env.CHAOS_BLOCK === '1'
  const dieAfterCharge = positiveIntegerOrUnset('FENCELOCK_DIE_AFTER_CHARGE')
  const recorder = new Recorder(env('CHAOS_HISTORY_DIR'), inst)
  // When this process did not run (a busy machine): a deadline of the lock cannot fire then, so
  // the checker does not count it against the lock.
  const stopStalls = recordStalls(recorder, inst)

  // Quorum mode (CHAOS_REDIS_URLS, one URL per independent master): one client per node, with
  // ioredis's stock options (offline queue on, 20 retries per command), since the lock promises
  // its deadlines whatever the client options. Else one client on CHAOS_REDIS_URL.
  // A Sentinel set (CHAOS_SENTINELS, CHAOS_SENTINEL_NAME) or a Cluster (CHAOS_CLUSTER_NODES):
  // ioredis's own clients, options as docs/LOCK.md's deployment guide says.
  const quorumUrls = process.env.CHAOS_REDIS_URLS?.split(',').filter(Boolean)
  const addresses = (list: string) => list.split(',').map((a) => ({ host: a.split(':')[0] as string, port: Number(a.split(':')[1]) }))
  const sentinels = process.env.CHAOS_SENTINELS
  const clusterNodes = process.env.CHAOS_CLUSTER_NODES
  // The locks on etcd (CHAOS_ETCD_ENDPOINTS, `host:port,...` of the members): one etcd3 client over
  // every member, its stock options; then no Redis client at all.
  const etcdEndpoints = process.env.CHAOS_ETCD_ENDPOINTS?.split(',').filter(Boolean)
  const etcd = etcdEndpoints === undefined ? undefined : new Etcd3({ hosts: etcdEndpoints })
  const redisClients: (Redis | Cluster)[] =
    etcd !== undefined
      ? []
      : quorumUrls !== undefined
        ? quorumUrls.map((url) => new Redis(url))
        : sentinels
          ? [new Redis({ sentinels: addresses(sentinels), name: env('CHAOS_SENTINEL_NAME'), maxRetriesPerRequest: 2 })]
          : clusterNodes
            ? [new Cluster(addresses(clusterNodes), { redisOptions: { maxRetriesPerRequest: 2 } })]
            : [new Redis(env('CHAOS_REDIS_URL'), { maxRetriesPerRequest: 2 })]
  for (const client of redisClients) {
    client.on('error', () => {
      // ioredis reconnects by itself (across a kill -9 of redis-server); the lock reports failures.
    })
  }
  const replicas = Number(process.env.CHAOS_REPLICAS ?? 0)
  const lockOptions = { ttlMs, waitMs, prefix: lockPrefixOf(env('CHAOS_RUN_ID')), ...(replicas > 0 ? { replicas } : {}) }
  const locker = etcd !== undefined ? new Locker(etcd, lockOptions) : quorumUrls === undefined ? new Locker(redisClients[0] as Redis | Cluster, lockOptions) : new Locker(redisClients as Redis[], lockOptions)
  locker.listen((event) => {
    if (event.type === 'lost') recorder.record({ k: 'lost', inst, res: event.resource, token: String(event.token), reason: event.reason })
  })
  const prisma = createPrisma({ connectionString: env('CHAOS_DB_URL'), schema }, clients + 1)
  const stores = shopStores(prisma, fencedShopClient(prisma), { maxWait: 15_000, timeout: 15_000 })
  const protection = recordingProtection(createProtection(mode, { stores, locker, ttlMs, waitMs }), recorder, inst, schema)

  let nextBlockAt = performance.now() + ttlMs
  let charges = 0
  const observer: ShopObserver = {
    chargeAnswered: (call) => {
      if (dieAfterCharge === undefined || ++charges < dieAfterCharge) return
      // The crash the reconciler exists for: the gateway charged, the payment row is not written.
      // Recorded first (synchronously), then SIGKILL: nothing of this process runs after it.
      const at = monoNow()
      recorder.record({ k: 'fault', kind: 'die-after-charge', inst, start: at, end: at, detail: `${inst} (pid ${process.pid}) killed itself after charge ${charges} (order ${call.orderId}) was answered` })
      process.kill(process.pid, 'SIGKILL')
    },
    externalCall: (call) => {
      send({ type: 'external-call', instance: inst, pid: process.pid, operation: call.operation, resource: call.resource, token: call.token === undefined ? null : String(call.token) })
      if (!block || performance.now() < nextBlockAt || Math.random() > 0.3) return
      // The holder's event loop stops: no watchdog renewal, no I/O, as in a long GC pause.
      const ms = Math.random() * 3 * ttlMs
      const start = monoNow()
      const until = performance.now() + ms
      while (performance.now() < until) {
        // Busy: the point is to hold the event loop.
      }
      recorder.record({ k: 'fault', kind: 'event-loop-blocked', start, end: monoNow(), detail: `${inst} ${Math.round(ms)} ms in ${call.resource}` })
      nextBlockAt = performance.now() + 2 * ttlMs
    },
  }
  const shop = new ShopService({
    db: prisma,
    protection,
    gateway: httpGateway({ url: env('CHAOS_GATEWAY_URL') }),
    instanceId: inst,
    observer,
  })

  let stopping = false
  const mine: number[] = []
  const pickOrder = async (): Promise<number | undefined> => {
    // Half the time an order of our own; else a recent unpaid one of anyone's, so two workers
    // pay one order at once (the double-charge race).
    if (mine.length > 0 && Math.random() < 0.5) return mine.shift()
    const recent = await prisma.order.findMany({ where: { status: 'pending' }, orderBy: { id: 'desc' }, take: 4, select: { id: true } })
    return recent[Math.floor(Math.random() * recent.length)]?.id
  }
  const client = async (n: number) => {
    let i = 0
    while (!stopping) {
      i++
      const purchase = Math.random() < 0.55
      try {
        if (purchase) {
          const sku = skus[Math.floor(Math.random() * skus.length)] as string
          const r = await shop.purchase(sku, `${inst}-c${n}-${i}`)
          if (r.kind === 'ordered') mine.push(r.orderId)
          recorder.record({ k: 'op', inst, op: 'purchase', result: r.kind })
        } else {
          const orderId = await pickOrder()
          if (orderId === undefined) continue
          const r = await shop.pay(orderId)
          recorder.record({ k: 'op', inst, op: 'pay', result: r.kind })
        }
      } catch (error) {
        recorder.record({ k: 'op', inst, op: purchase ? 'purchase' : 'pay', result: error instanceof Error ? error.name : 'error' })
        await sleep(20)
      }
    }
  }

  const loops = Array.from({ length: clients }, (_, n) => client(n))
  const shutdown = async () => {
    if (stopping) return
    stopping = true
    // Drain: a woken holder's writes belong to the run and must land (or be refused) before the
    // database is counted.
    await Promise.race([Promise.all(loops), sleep(20_000)])
    await locker.close().catch(() => {})
    await prisma.$disconnect().catch(() => {})
    for (const client of redisClients) client.disconnect()
    etcd?.close()
    stopStalls()
    recorder.close()
    process.disconnect?.()
    process.exit(0)
  }
  process.on('message', (m: SupervisorMessage) => {
    if (m?.type === 'shutdown') void shutdown()
  })
  process.on('SIGTERM', () => void shutdown())
  // The supervisor died without telling us: do not linger as an orphan.
  process.on('disconnect', () => void shutdown())
  send({ type: 'ready', instance: inst, pid: process.pid, port: 0 })
}

main().catch((error: unknown) => {
  const message = error instanceof Error ? (error.stack ?? error.message) : String(error)
  console.error(`[chaos worker] cannot start: ${message}`)
  send({ type: 'failed', message })
  process.exitCode = 1
  setTimeout(() => process.exit(1), 100).unref()
})
