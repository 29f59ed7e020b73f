/** The migration runner (src/migrations.ts) and its command line (npm run db:migrate), against the real server, in schemas of its own. */
import { execFile } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { mkdtemp, mkdir, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'
import pg from 'pg'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { databaseTarget } from '../src/database-url.js'
import { applyMigrations, MigrationError, MIGRATIONS_TABLE, readMigrations } from '../src/migrations.js'

const uniqueName = (prefix: string) => `${prefix}_${process.pid}_${randomBytes(4).toString('hex')}`.toLowerCase().slice(0, 63)
const settle = async <T>(promise: Promise<T>): Promise<{ value?: T; error?: unknown }> => {
  try {
    return { value: await promise }
  } catch (error) {
    return { error }
  }
}

const root = join(import.meta.dirname, '..', '..', '..')
const { connectionString } = databaseTarget()
let admin: pg.Client
const schemas: string[] = []
let dir: string
/** The project's migrations, by name, in order. */
let project: string[]

const newSchema = (label: string) => {
  const name = uniqueName(`devkit_mig_${label}`)
  schemas.push(name)
  return name
}

beforeAll(async () => {
  admin = new pg.Client({ connectionString })
  await admin.connect()
  dir = await mkdtemp(join(tmpdir(), 'fencing-migrations-'))
  project = (await readMigrations()).map((m) => m.name)
  expect(project).toEqual(['20251126000000_init', '20261126000000_fence_guard', '20261126000100_payment_gateway', '20261201000000_fence_guard_token', '20261201000100_gateway_fence_guard_token', '20261202000000_order_reference', '20261203000000_stock_segments', '20261205000000_fence_guard_round4', '20261205000100_gateway_fence_guard_round4', '20261205000200_stock_segment_fence_guard_round4'])
})

afterAll(async () => {
  for (const s of schemas) await admin?.query(`DROP SCHEMA IF EXISTS "${s}" CASCADE`)
  await admin?.end()
  await rm(dir, { recursive: true, force: true })
})

async function migrationDir(files: Record<string, string>): Promise<string> {
  const d = await mkdtemp(join(dir, 'set-'))
  for (const [name, sql] of Object.entries(files)) {
    await mkdir(join(d, name))
    await writeFile(join(d, name, 'migration.sql'), sql)
  }
  return d
}

describe('db-migrate', () => {
  it('creates the schema, applies the project migrations once and records them; a second run applies nothing', async () => {
    const schema = newSchema('once')
    const first = await applyMigrations(admin, { schema })
    expect(first.applied).toEqual(project)
    const second = await applyMigrations(admin, { schema })
    expect(second).toEqual({ schema, applied: [], alreadyApplied: project })
    const { rows } = await admin.query(`SELECT table_name FROM information_schema.tables WHERE table_schema = $1 ORDER BY table_name`, [schema])
    expect(rows.map((r) => r.table_name)).toEqual(['GatewayCharge', 'GatewayFence', 'GatewayFence_fence_tombstones', 'GatewayIdempotencyKey', 'Order', 'Order_fence_tombstones', 'Payment', 'Product', 'Product_fence_tombstones', 'StockSegment', 'StockSegment_fence_tombstones', MIGRATIONS_TABLE])
    const recorded = await admin.query(`SELECT name, checksum FROM "${schema}"."${MIGRATIONS_TABLE}"`)
    expect(recorded.rows).toEqual((await readMigrations()).map((m) => ({ name: m.name, checksum: m.checksum })))
  })

  it('concurrent runs on one schema apply each migration once', async () => {
    const schema = newSchema('race')
    const clients = await Promise.all([0, 1, 2].map(async () => {
      const c = new pg.Client({ connectionString })
      await c.connect()
      return c
    }))
    try {
      const reports = await Promise.all(clients.map((c) => applyMigrations(c, { schema })))
      expect(reports.flatMap((r) => r.applied)).toEqual(project)
    } finally {
      await Promise.all(clients.map((c) => c.end()))
    }
  })

  it('a failing migration is rolled back whole and not recorded; the ones before it stay', async () => {
    const schema = newSchema('fail')
    const migrationsDir = await migrationDir({
      '1_ok': 'CREATE TABLE a (id int);',
      '2_bad': 'CREATE TABLE b (id int); INSERT INTO nope VALUES (1);',
    })
    const result = await settle(applyMigrations(admin, { schema, migrations: await readMigrations(migrationsDir) }))
    expect(result.error).toBeInstanceOf(MigrationError)
    expect(result.error).toMatchObject({ migration: '2_bad' })
    const { rows } = await admin.query(`SELECT table_name FROM information_schema.tables WHERE table_schema = $1 ORDER BY table_name`, [schema])
    expect(rows.map((r) => r.table_name)).toEqual([MIGRATIONS_TABLE, 'a'])
    expect((await admin.query(`SELECT name FROM "${schema}"."${MIGRATIONS_TABLE}"`)).rows).toEqual([{ name: '1_ok' }])
  })

  it('refuses to go on when an applied migration’s file has changed', async () => {
    const schema = newSchema('edit')
    const migrationsDir = await migrationDir({ '1_ok': 'CREATE TABLE a (id int);' })
    await applyMigrations(admin, { schema, migrations: await readMigrations(migrationsDir) })
    await writeFile(join(migrationsDir, '1_ok', 'migration.sql'), 'CREATE TABLE a (id bigint);')
    const result = await settle(applyMigrations(admin, { schema, migrations: await readMigrations(migrationsDir) }))
    expect(result.error).toMatchObject({ name: 'MigrationError', migration: '1_ok' })
  })

  it('the CLI (npm run db:migrate) takes the schema from --schema or from ?schema= in DATABASE_URL', async () => {
    const run = promisify(execFile)
    const viaFlag = newSchema('cli_flag')
    const out = await run(process.execPath, ['--import', 'tsx', 'scripts/db-migrate.ts', '--schema', viaFlag], {
      cwd: root,
      env: { ...process.env, DATABASE_URL: connectionString },
    })
    expect(out.stdout).toMatch(new RegExp(`schema ${viaFlag}: ${project.length} applied, 0 already applied`))
    const viaUrl = newSchema('cli_url')
    const url = new URL(connectionString)
    url.searchParams.set('schema', viaUrl)
    const again = await run(process.execPath, ['--import', 'tsx', 'scripts/db-migrate.ts'], { cwd: root, env: { ...process.env, DATABASE_URL: url.toString() } })
    expect(again.stdout).toMatch(new RegExp(`schema ${viaUrl}: ${project.length} applied`))
    const bad = await settle(run(process.execPath, ['--import', 'tsx', 'scripts/db-migrate.ts', '--nope'], { cwd: root }))
    expect(bad.error).toMatchObject({ code: 2 })
  })
})
