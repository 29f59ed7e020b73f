/**
 * One shop instance as a process: reads and validates the environment (see instance-config.ts),
 * builds the instance, listens. Under the supervisor (forked with an IPC channel) it also reports
 * `ready`, each gateway call made under a lock (the chaos' pause targets) and its stats on demand.
 *
 * Run alone: `REDIS_URL=... DATABASE_URL=...?schema=... node --import tsx apps/demo-shop/src/main.ts`
 */
import type { AddressInfo } from 'node:net'
import { buildInstance, GATEWAY_TIMEOUT_MS } from './instance.js'
import { InvalidConfigError, readInstanceConfig } from './instance-config.js'
import type { InstanceMessage, SupervisorMessage } from './ipc-messages.js'
import type { ShopObserver } from './shop-service.js'

const send = (message: InstanceMessage) => {
  if (process.send && process.connected) process.send(message, undefined, {}, () => {})
}

async function main(): Promise<void> {
  const config = readInstanceConfig(process.env)
  let charges = 0
  let purchases = 0
  const observer: ShopObserver = {
    externalCall: (call) =>
      send({
        type: 'external-call',
        instance: config.instanceId,
        pid: process.pid,
        operation: call.operation,
        resource: call.resource,
        token: call.token === undefined ? null : String(call.token),
      }),
    // FENCELOCK_DIE_AFTER_CHARGE=<n>: the crash the reconciler exists for, at its exact point —
    // the gateway has charged, the payment row is not written. SIGKILL: nothing runs after it.
    // FENCELOCK_DIE_AFTER_PURCHASE=<n>: the order committed, the buyer not answered, no intent:
    // the order the reconciler settles as abandoned.
    ordered: () => {
      if (config.dieAfterPurchase !== undefined && ++purchases >= config.dieAfterPurchase)
        process.kill(process.pid, 'SIGKILL')
    },
    chargeAnswered: () => {
      if (config.dieAfterCharge !== undefined && ++charges >= config.dieAfterCharge)
        process.kill(process.pid, 'SIGKILL')
    },
  }
  const instance = await buildInstance(config, observer)
  const server = instance.app.listen(config.port, config.host)
  await new Promise<void>((resolve, reject) => {
    server.once('listening', resolve)
    server.once('error', reject)
  })
  // Keep-alive sockets from the load generator must not hold a shutdown open for long.
  server.keepAliveTimeout = 5_000
  const { port } = server.address() as AddressInfo
  console.error(`[${config.instanceId}] ${config.mode} mode on http://${config.host}:${port} (pid ${process.pid})`)

  let stopping = false
  const shutdown = async () => {
    if (stopping) return
    stopping = true
    // Stop taking work, then drain: a request may still run after its client gave up (e.g. a
    // paused instance woke up); its charge and its writes belong to the run and must land (or be
    // rejected) before anything closes. Bounded by what one operation can take: the lock wait,
    // then the gateway's timeout, then the transactions around them.
    server.close()
    const drained = await instance.drain(config.lockWaitMs + GATEWAY_TIMEOUT_MS + 10_000)
    if (!drained)
      console.error(`[${config.instanceId}] drain: ${instance.inFlight()} operation(s) still running at the deadline`)
    send({ type: 'final-stats', stats: instance.stats() })
    server.closeAllConnections()
    await instance.close()
    process.disconnect?.()
    process.exit(0)
  }
  process.on('SIGTERM', () => void shutdown())
  process.on('SIGINT', () => void shutdown())
  process.on('message', (m: SupervisorMessage) => {
    if (m?.type === 'stats') send({ type: 'stats', stats: instance.stats() })
    else if (m?.type === 'shutdown') void shutdown()
  })
  // The supervisor died without telling us: do not linger as an orphan.
  process.on('disconnect', () => void shutdown())
  send({ type: 'ready', instance: config.instanceId, pid: process.pid, port })
}

main().catch((error: unknown) => {
  const message =
    error instanceof InvalidConfigError
      ? error.message
      : error instanceof Error
        ? (error.stack ?? error.message)
        : String(error)
  console.error(`[shop] cannot start: ${message}`)
  send({ type: 'failed', message })
  process.exitCode = 1
  setTimeout(() => process.exit(1), 100).unref()
})
