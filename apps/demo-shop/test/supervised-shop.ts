/**
 * A shop of one product (5 units of `flash-1`) in a schema of its own, with its payment gateway as
 * a process, for the tests that run shop instances under the Supervisor and kill them at a fault
 * hook. The file's hooks set it up and tear it down; a test starts `supervisor` itself.
 */
import { afterAll, beforeAll } from 'vitest'
import { createPrisma, dropShopSchema, prepareShopSchema } from '../src/database.js'
import { startGateway, type RunningGateway } from '../src/gateway/start-gateway.js'
import type { Supervisor } from '../src/supervisor.js'
import { testDatabase, uniqueRun } from './services.js'

export interface SupervisedShop {
  readonly runId: string
  readonly schema: string
  /** The schema's URL, for the instances' DATABASE_URL. */
  readonly databaseUrl: string
  /** Set by beforeAll. */
  gateway: RunningGateway
  /** Set by beforeAll: a client of the schema, for the counts. */
  prisma: ReturnType<typeof createPrisma>
  /** Started by the test; stopped by afterAll. */
  supervisor: Supervisor | undefined
}

export function supervisedShop(label: string): SupervisedShop {
  const { runId, schema } = uniqueRun(label)
  const database = testDatabase(schema)
  const url = new URL(database.connectionString)
  url.searchParams.set('schema', schema)
  const shop = { runId, schema, databaseUrl: url.toString(), supervisor: undefined } as SupervisedShop
  beforeAll(async () => {
    await prepareShopSchema(database, [{ sku: 'flash-1', name: 'F', priceCents: 4_999, stock: 5 }])
    shop.prisma = createPrisma(database, 2)
    shop.gateway = await startGateway({ databaseUrl: shop.databaseUrl, latencyMs: '5', dbPoolSize: 2 })
  })
  afterAll(async () => {
    await shop.supervisor?.stop()
    await shop.gateway?.stop()
    await shop.prisma?.$disconnect()
    await dropShopSchema(database)
  })
  return shop
}
