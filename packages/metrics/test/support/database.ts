/**
 * A PostgreSQL schema of the test file's own, migrated with the repository's migrations (the
 * demo schema: Product and Order with their fences and the database guard), and a Prisma client
 * on it; dropped in `afterAll`. PostgreSQL must be up: the tests fail loudly, they never skip.
 */
import { randomBytes } from 'node:crypto'
import { databaseTarget, redact } from '@fencelock/devkit/database-url'
import { applyMigrations, quoteIdent } from '@fencelock/devkit/migrations'
import { PrismaPg } from '@prisma/adapter-pg'
import pg from 'pg'
import { afterAll } from 'vitest'
import { PrismaClient } from '../../../../generated/prisma/client.js'

export { PrismaClient }

/** A migrated schema named after `label` and this process, and a client on it. */
export async function testDatabase(label: string): Promise<{ schema: string; prisma: PrismaClient }> {
  const { connectionString } = databaseTarget()
  const schema = `metrics_${label}_${process.pid}_${randomBytes(4).toString('hex')}`.toLowerCase().slice(0, 63)
  const admin = new pg.Client({ connectionString })
  try {
    await admin.connect()
  } catch (cause) {
    throw new Error(
      `PostgreSQL is not reachable at ${redact(connectionString)} (set DATABASE_URL); these tests need it and never skip.`,
      { cause },
    )
  }
  await applyMigrations(admin, { schema })
  const prisma = new PrismaClient({ adapter: new PrismaPg({ connectionString }, { schema }) })
  afterAll(async () => {
    await prisma.$disconnect()
    await admin.query(`DROP SCHEMA IF EXISTS ${quoteIdent(schema)} CASCADE`)
    await admin.end()
  })
  return { schema, prisma }
}
