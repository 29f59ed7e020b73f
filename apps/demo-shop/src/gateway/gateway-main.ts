/**
 * The payment gateway as a process: reads and validates the environment (gateway-config.ts),
 * builds the app on its own Prisma client, listens. Under the supervisor (forked with an IPC
 * channel) it reports `ready` with its port and exits on `shutdown`, as a shop instance does.
 *
 * Run alone: `DATABASE_URL=...?schema=... PORT=4000 node --import tsx apps/demo-shop/src/gateway/gateway-main.ts`
 */
import type { AddressInfo } from 'node:net'
import { createPrisma } from '../database.js'
import { InvalidConfigError } from '../instance-config.js'
import type { InstanceMessage, SupervisorMessage } from '../ipc-messages.js'
import { InFlight } from '../in-flight.js'
import { createGatewayApp, gatewayDb } from './gateway-app.js'
import { readGatewayConfig } from './gateway-config.js'

const send = (message: InstanceMessage) => {
  if (process.send && process.connected) process.send(message, undefined, {}, () => {})
}

async function main(): Promise<void> {
  const config = readGatewayConfig(process.env)
  const prisma = createPrisma(config.database, config.dbPoolSize)
  const inFlight = new InFlight()
  const app = createGatewayApp({ db: gatewayDb(prisma), schema: config.database.schema, latency: config.latency, inFlight })
  const server = app.listen(config.port, config.host)
  await new Promise<void>((resolve, reject) => {
    server.once('listening', resolve)
    server.once('error', reject)
  })
  server.keepAliveTimeout = 5_000
  const { port } = server.address() as AddressInfo
  console.error(
    `[gateway] on http://${config.host}:${port} (pid ${process.pid}), latency ${config.latency.minMs}-${config.latency.maxMs} ms`,
  )

  let stopping = false
  const shutdown = async () => {
    if (stopping) return
    stopping = true
    // No new request; then every running handler finishes — its caller may be gone (killed -9
    // mid-call), its charge still lands in the ledger, as at a real processor — before the pool
    // closes. Bounded by the longest a handler can take: the latency plus its transaction's limit.
    server.close()
    await inFlight.idle(config.latency.maxMs + 35_000)
    server.closeAllConnections()
    await prisma.$disconnect().catch(() => {})
    process.disconnect?.()
    process.exit(0)
  }
  process.on('SIGTERM', () => void shutdown())
  process.on('SIGINT', () => void shutdown())
  process.on('message', (m: SupervisorMessage) => {
    if (m?.type === 'shutdown') void shutdown()
  })
  process.on('disconnect', () => void shutdown())
  send({ type: 'ready', instance: 'gateway', pid: process.pid, port })
}

main().catch((error: unknown) => {
  const message =
    error instanceof InvalidConfigError
      ? error.message
      : error instanceof Error
        ? (error.stack ?? error.message)
        : String(error)
  console.error(`[gateway] cannot start: ${message}`)
  send({ type: 'failed', message })
  process.exitCode = 1
  setTimeout(() => process.exit(1), 100).unref()
})
