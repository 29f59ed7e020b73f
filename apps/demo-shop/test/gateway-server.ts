// The payment gateway in-process for tests: the real app on its own Prisma client and the real
// database (the test's schema), listening on a free loopback port.
import type { AddressInfo } from 'node:net'
import type { Server } from 'node:http'
import { createPrisma, type DatabaseLocation } from '../src/database.js'
import { createGatewayApp, gatewayDb } from '../src/gateway/gateway-app.js'
import type { GatewayLatency } from '../src/payment-gateway.js'

/** A gateway serving for one test file. */
export interface TestGateway {
  readonly url: string
  readonly db: ReturnType<typeof gatewayDb>
  close(): Promise<void>
}

/** Starts the gateway on `database` (already migrated) with `latency`. */
export async function startTestGateway(database: DatabaseLocation, latency: GatewayLatency = { minMs: 1, maxMs: 3 }): Promise<TestGateway> {
  const prisma = createPrisma(database, 10)
  const db = gatewayDb(prisma)
  const server: Server = createGatewayApp({ db, schema: database.schema, latency, logError: () => {} }).listen(0, '127.0.0.1')
  await new Promise<void>((resolve) => server.once('listening', () => resolve()))
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    db,
    async close() {
      server.closeAllConnections()
      await new Promise((resolve) => server.close(resolve))
      await prisma.$disconnect()
    },
  }
}
