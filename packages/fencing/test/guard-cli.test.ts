/**
 * `fencelock-guard` (src/guard-cli.ts, the package's bin): its command line, and the Prisma Migrate
 * flow it serves with the repository's migration runner standing in for `prisma migrate` (whose
 * schema engine cannot run here): its SQL, saved as `prisma/migrations/<timestamp>_fence_guard/
 * migration.sql`, installs a guard that assertFenceGuard finds complete and that refuses a lowering
 * UPDATE; `--upgrade` brings a guard as first installed up to date.
 */
import { spawnSync } from 'node:child_process'
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { applyMigrations, readMigrations } from '@fencelock/devkit/migrations'
import { runGuardCli } from '../src/guard-cli.js'
import { assertFenceGuard, FENCE_GUARD_SQLSTATE, fenceGuardPrismaModel, fenceGuardSql, fenceGuardUpgradeSql, MissingFenceGuardError } from '../src/index.js'
import { createTestDatabase, FENCED_MODELS, GUARD_UPGRADE_MIGRATION, seedProduct, settle, type TestDatabase } from './support/database.js'

const here = dirname(fileURLToPath(import.meta.url))
const bin = join(here, '..', 'src', 'guard-bin.ts')

/** Runs the bin as a user does (a process, through tsx here), with `args`. */
function guard(...args: string[]) {
  const result = spawnSync(process.execPath, ['--import', 'tsx', bin, ...args], { encoding: 'utf8', cwd: join(here, '..', '..', '..') })
  return { code: result.status, stdout: result.stdout, stderr: result.stderr }
}

describe('fencelock-guard: the command line', () => {
  it('prints fenceGuardSql for the flags, and fenceGuardUpgradeSql with --upgrade (a process, exit 0)', () => {
    const out = guard('--table', 'Invoice', '--column', 'fenceToken', '--key', 'id')
    expect(out).toEqual({ code: 0, stdout: fenceGuardSql({ table: 'Invoice', column: 'fenceToken', key: 'id' }), stderr: '' })
    expect(runGuardCli(['--table', 'Line', '--column', 'fence', '--key', 'invoiceId,no', '--schema', 's', '--name', 'line_guard', '--upgrade'])).toEqual({
      code: 0,
      stdout: fenceGuardUpgradeSql({ table: 'Line', column: 'fence', key: ['invoiceId', 'no'], schema: 's', name: 'line_guard' }),
      stderr: '',
    })
  })

  it('--help prints the usage and exits 0', () => {
    const out = guard('--help')
    expect(out.code).toBe(0)
    expect(out.stdout).toMatch(/^Usage: fencelock-guard --table <table> --column <fence column> --key/)
    expect(out.stdout).toContain('--prisma-model')
  })

  it.each([
    [['--table', 'Invoice', '--column', 'fenceToken', '--key', 'id', '--tabel', 'x'], /Unknown option '--tabel'/],
    [['--column', 'fenceToken', '--key', 'id'], /--table is required/],
    [['--table', 'Invoice', '--column', 'fenceToken'], /--key is required/],
    [['--table', 'Invoice', '--column', 'fenceToken', '--key', 'fenceToken'], /invalid --key: must not include the fence column/],
    [['--table', 'Invoice', '--column', 'fenceToken', '--key', 'id,id'], /invalid --key: must not name a column twice/],
    [['--table', 'x'.repeat(60), '--column', 'fenceToken', '--key', 'id'], /invalid --table: must be at most \d+ bytes/],
    [['--table', 'Invoice', '--column', 'fenceToken', '--key', 'id', '--upgrade', '--prisma-model'], /do not go together/],
    [['--table', 'Invoice', '--column', 'fenceToken', '--key', 'id', '--schema-file', 'x.prisma'], /--schema-file goes with --prisma-model/],
    [['--table', 'Invoice', '--column', 'fenceToken', '--key', 'id', 'extra'], /Unexpected argument 'extra'/],
  ])('refuses a bad command line with exit 2, naming the flag: %j', (args, message) => {
    const out = runGuardCli(args)
    expect(out.code).toBe(2)
    expect(out.stdout).toBe('')
    expect(out.stderr).toMatch(message)
  })

  it('--prisma-model prints the tombstone model read off schema.prisma (default prisma/schema.prisma, from the working directory)', () => {
    const out = guard('--table', 'Product', '--column', 'fenceToken', '--key', 'sku', '--prisma-model')
    expect(out.code).toBe(0)
    expect(out.stdout).toBe(fenceGuardPrismaModel(readFileSync(join(here, '..', '..', '..', 'prisma', 'schema.prisma'), 'utf8'), { table: 'Product', column: 'fenceToken', key: 'sku' }))
    expect(out.stdout).toContain('model ProductFenceTombstone {')
  })

  it('--prisma-model without a readable schema file: exit 2 naming the path', () => {
    const out = guard('--table', 'Invoice', '--column', 'fenceToken', '--key', 'id', '--prisma-model', '--schema-file', 'no/such/schema.prisma')
    expect(out.code).toBe(2)
    expect(out.stderr).toContain('cannot read the schema file no/such/schema.prisma')
  })
})

describe('fencelock-guard: its SQL as a Prisma migration, applied by the migration runner', () => {
  let t: TestDatabase
  let firstGuard: TestDatabase
  let dir: string

  beforeAll(async () => {
    ;[t, firstGuard] = await Promise.all([
      createTestDatabase('cli_unguarded', { guard: false }),
      createTestDatabase('cli_first_guard', { leaveOut: [GUARD_UPGRADE_MIGRATION] }),
    ])
    dir = mkdtempSync(join(tmpdir(), 'fencelock-guard-migrations-'))
  })

  afterAll(async () => {
    await Promise.all([t?.close(), firstGuard?.close()])
    if (dir !== undefined) rmSync(dir, { recursive: true, force: true })
  })

  /** Writes `sql` as `<dir>/<name>/migration.sql` (Prisma's layout) and applies the folder's migrations to `db`'s schema. */
  async function migrate(db: TestDatabase, name: string, sql: string) {
    mkdirSync(join(dir, name), { recursive: true })
    writeFileSync(join(dir, name, 'migration.sql'), sql)
    const migrations = (await readMigrations(dir)).filter((m) => m.name === name)
    return applyMigrations(db.admin, { schema: db.schema, migrations })
  }

  it('installs the guard: assertFenceGuard fails before and passes after, and a lowering UPDATE is then refused', async () => {
    const p = await seedProduct(t.base, 20n, 'cli')
    expect((await settle(assertFenceGuard(t.base, { models: FENCED_MODELS }))).error).toBeInstanceOf(MissingFenceGuardError)
    // Control: no guard yet, so a plain update lowers the fence.
    await t.base.product.update({ where: { id: p.id }, data: { fenceToken: 5n } })
    await t.base.product.update({ where: { id: p.id }, data: { fenceToken: 20n } })

    const sql = ['Product:sku', 'Order:id'].map((spec) => {
      const [table, key] = spec.split(':') as [string, string]
      const out = guard('--table', table, '--column', 'fenceToken', '--key', key)
      expect(out.code).toBe(0)
      return out.stdout
    })
    const report = await migrate(t, '20270101000000_fence_guard', sql.join('\n'))
    expect(report.applied).toEqual(['20270101000000_fence_guard'])
    await expect(assertFenceGuard(t.base, { models: FENCED_MODELS })).resolves.toBeUndefined()
    const lower = await settle(t.base.product.update({ where: { id: p.id }, data: { fenceToken: 5n } }))
    expect(JSON.stringify(lower.error)).toContain(FENCE_GUARD_SQLSTATE)
    expect(await t.base.product.findUniqueOrThrow({ where: { id: p.id } })).toMatchObject({ fenceToken: 20n })
  })

  it('--upgrade, as a new migration, brings a guard as first installed up to date', async () => {
    const before = await settle(assertFenceGuard(firstGuard.base, { models: FENCED_MODELS }))
    expect((before.error as MissingFenceGuardError).missing.map((m) => m.name).sort()).toEqual(['Order_fence_token', 'Order_fence_token', 'Product_fence_token', 'Product_fence_token'])
    const sql = [guard('--table', 'Product', '--column', 'fenceToken', '--key', 'sku', '--upgrade'), guard('--table', 'Order', '--column', 'fenceToken', '--key', 'id', '--upgrade')]
    await migrate(firstGuard, '20270101000100_fence_guard_upgrade', sql.map((o) => o.stdout).join('\n'))
    await expect(assertFenceGuard(firstGuard.base, { models: FENCED_MODELS })).resolves.toBeUndefined()
  })
})
