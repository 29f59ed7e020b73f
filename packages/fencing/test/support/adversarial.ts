/**
 * A database for the adversarial models (test/fixtures/adversarial): a schema of its own per test
 * file, its tables made from schema.sql, and — unless `guard: false` — the database guard
 * (fenceGuardSql) on every fenced table, under the names the database sees (@@map, @map).
 */
import { readFile } from 'node:fs/promises'
import { join } from 'node:path'
import { PrismaPg } from '@prisma/adapter-pg'
import pg from 'pg'
import { databaseTarget } from '@fencelock/devkit/database-url'
import { fenceGuardSql, fencing, type FenceGuardOptions } from '../../src/index.js'
import { PrismaClient } from '../fixtures/adversarial/generated/client.js'
import { uniqueName } from './database.js'

export { PrismaClient as AdversarialPrismaClient }

/** The fenced models of the fixture, each with its fence field (Prisma's name). */
export const ADVERSARIAL_MODELS = Object.freeze({ User: 'fence', Account: 'fence', Invoice: 'fence', Line: 'fence' })

/** The guard of each fenced table, in the database's names. */
export const ADVERSARIAL_GUARDS: readonly FenceGuardOptions[] = [
  { table: 'app_users', column: 'fence_token', key: 'email_address' },
  { table: 'Account', column: 'fence', key: 'id' },
  { table: 'Invoice', column: 'fence', key: 'id' },
  { table: 'Line', column: 'fence', key: ['invoiceId', 'no'] },
]

export function adversarialClient(base: PrismaClient) {
  return base.$extends(fencing<typeof base>({ models: ADVERSARIAL_MODELS }))
}

export interface AdversarialDatabase {
  readonly schema: string
  readonly base: PrismaClient
  readonly db: ReturnType<typeof adversarialClient>
  readonly admin: pg.Client
  close(): Promise<void>
}

export async function createAdversarialDatabase(label: string, options: { guard?: boolean } = {}): Promise<AdversarialDatabase> {
  const { connectionString } = databaseTarget()
  const schema = uniqueName(`fencing_adv_${label}`)
  const admin = new pg.Client({ connectionString })
  await admin.connect()
  const tables = await readFile(join(import.meta.dirname, '..', 'fixtures', 'adversarial', 'schema.sql'), 'utf8')
  const guard = options.guard === false ? '' : ADVERSARIAL_GUARDS.map((g) => fenceGuardSql(g)).join('\n')
  await admin.query(`CREATE SCHEMA "${schema}"; SET search_path TO "${schema}"; BEGIN; ${tables}; ${guard}; COMMIT; SET search_path TO DEFAULT`)
  const base = new PrismaClient({ adapter: new PrismaPg({ connectionString }, { schema }) })
  return {
    schema,
    base,
    db: adversarialClient(base),
    admin,
    async close() {
      await base.$disconnect()
      await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`)
      await admin.end()
    },
  }
}
