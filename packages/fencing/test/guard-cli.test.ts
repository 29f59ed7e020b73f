/**
 * `fencelock-guard` (src/guard/guard-cli.ts, the package's bin): its command line, and the Prisma Migrate
 * flow it serves with the repository's migration runner standing in for `prisma migrate` (whose
 * schema engine cannot run here): its SQL, saved as `prisma/migrations/<timestamp>_fence_guard/
 * migration.sql`, installs a guard that assertFenceGuard finds complete and that refuses a lowering
 * UPDATE; `--upgrade` brings a guard as first installed up to date.
 */
import { spawnSync } from 'node:child_process'
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { createRequire } from 'node:module'
import { fileURLToPath, pathToFileURL } from 'node:url'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { applyMigrations, readMigrations } from '@fencelock/devkit/migrations'
import { runGuardCli } from '../src/guard/guard-cli.js'
import { assertFenceGuard, FENCE_GUARD_SQLSTATE, fenceGuardPrismaModel, fenceGuardSql, fenceGuardUpgradeSql, MissingFenceGuardError } from '../src/index.js'
import { createTestDatabase, FENCED_MODELS, GUARD_UPGRADES, seedProduct, settle, type TestDatabase } from './support/database.js'

const here = dirname(fileURLToPath(import.meta.url))
const bin = join(here, '..', 'src', 'guard-bin.ts')

const repo = join(here, '..', '..', '..')

/** Runs the bin as a user does (a process, through tsx here), with `args`, in `cwd` (default: the repository, whose prisma/schema.prisma has Product and Order). */
function guard(...args: string[]) {
  return guardIn(repo, ...args)
}
// tsx by its path: a project folder outside the repository has no node_modules to find it in.
const tsx = pathToFileURL(createRequire(import.meta.url).resolve('tsx')).href
function guardIn(cwd: string, ...args: string[]) {
  const result = spawnSync(process.execPath, ['--import', tsx, bin, ...args], { encoding: 'utf8', cwd })
  return { code: result.status, stdout: result.stdout, stderr: result.stderr }
}

/** An invoices project as the quick start has it: prisma/schema.prisma with Invoice, and its first migration. */
const INVOICE_SCHEMA = `generator client {
  provider = "prisma-client"
  output   = "../generated/prisma"
}

datasource db {
  provider = "postgresql"
}

model Invoice {
  id          Int     @id
  amountCents Int
  chargeId    String?
  fenceToken  BigInt  @default(0)
  note        String?
}
`
function invoiceProject(): string {
  const dir = mkdtempSync(join(tmpdir(), 'fencelock-guard-project-'))
  mkdirSync(join(dir, 'prisma', 'migrations', '20260101000000_invoices'), { recursive: true })
  writeFileSync(join(dir, 'prisma', 'schema.prisma'), INVOICE_SCHEMA)
  writeFileSync(join(dir, 'prisma', 'migrations', '20260101000000_invoices', 'migration.sql'), '-- the table')
  return dir
}
const projects: string[] = []
afterAll(() => projects.forEach((d) => rmSync(d, { recursive: true, force: true })))

describe('fencelock-guard: the command line', () => {
  it('prints fenceGuardSql for the flags, and fenceGuardUpgradeSql with --upgrade (a process, exit 0)', () => {
    const project = invoiceProject()
    projects.push(project)
    const out = guardIn(project, '--table', 'Invoice', '--column', 'fenceToken', '--key', 'id')
    expect(out).toEqual({ code: 0, stdout: fenceGuardSql({ table: 'Invoice', column: 'fenceToken', key: 'id' }), stderr: '' })
    // No schema file: printed, and said that nothing was checked.
    expect(runGuardCli(['--table', 'Line', '--column', 'fence', '--key', 'invoiceId,no', '--schema', 's', '--name', 'line_guard', '--upgrade'])).toEqual({
      code: 0,
      stdout: fenceGuardUpgradeSql({ table: 'Line', column: 'fence', key: ['invoiceId', 'no'], schema: 's', name: 'line_guard' }),
      stderr: 'fencelock-guard: no prisma/schema.prisma: the names were not checked against a schema (give --schema-file)\n',
    })
  })

  it('--no-token-path prints the guard without the token path (with --upgrade too); with --prisma-model it is a bad command line', () => {
    const project = invoiceProject()
    projects.push(project)
    const flags = ['--table', 'Invoice', '--column', 'fenceToken', '--key', 'id', '--no-token-path']
    const options = { table: 'Invoice', column: 'fenceToken', key: 'id', tokenPath: false }
    expect(guardIn(project, ...flags)).toEqual({ code: 0, stdout: fenceGuardSql(options), stderr: '' })
    expect(runGuardCli([...flags, '--upgrade'], project)).toEqual({ code: 0, stdout: fenceGuardUpgradeSql(options), stderr: '' })
    // Not the default's SQL: no BEFORE row trigger, the statement trigger that refuses a token instead.
    expect(fenceGuardSql(options)).not.toEqual(fenceGuardSql({ table: 'Invoice', column: 'fenceToken', key: 'id' }))
    expect(fenceGuardSql(options)).toMatch(/FOR EACH STATEMENT WHEN/)
    const bad = runGuardCli([...flags, '--prisma-model'], project)
    expect(bad.code).toBe(2)
    expect(bad.stdout).toBe('')
    expect(bad.stderr).toMatch(/--no-token-path and --prisma-model do not go together/)
  })

  it('checks every name against the schema in every mode: a misspelt column, key or table, a fence that is no BigInt (exit 2, nothing printed or written)', () => {
    const project = invoiceProject()
    projects.push(project)
    const cases: [string[], RegExp][] = [
      [['--table', 'Invoice', '--column', 'fenceTokn', '--key', 'id'], /invalid --column: must be a column of Invoice \(id, amountCents, chargeId, fenceToken, note\) \(got "fenceTokn"\)/],
      [['--table', 'Invoice', '--column', 'fenceToken', '--key', 'idd', '--upgrade'], /invalid --key: must be a column of Invoice .*\(got "idd"\)/],
      [['--table', 'Invoices', '--column', 'fenceToken', '--key', 'id', '--migration', 'fence_guard'], /invalid --table: must be the table of a model of the schema \(Invoice\)/],
      [['--table', 'Invoice', '--column', 'note', '--key', 'id', '--prisma-model'], /invalid --column: must be a required BigInt column of Invoice \(note is String\?\)/],
      [['--table', 'Invoice', '--column', 'amountCents', '--key', 'id'], /invalid --column: must be a required BigInt column of Invoice \(amountCents is Int\)/],
    ]
    for (const [args, message] of cases) {
      const out = runGuardCli(args, project)
      expect(out, args.join(' ')).toMatchObject({ code: 2, stdout: '' })
      expect(out.stderr).toMatch(message)
    }
    expect(readdirSync(join(project, 'prisma', 'migrations'))).toEqual(['20260101000000_invoices'])
    expect(readFileSync(join(project, 'prisma', 'schema.prisma'), 'utf8')).toBe(INVOICE_SCHEMA)
  })

  it('--prisma-model --write appends the model after a blank line, once; printed, the model starts with a blank line (for >>)', () => {
    const project = invoiceProject()
    projects.push(project)
    const model = fenceGuardPrismaModel(INVOICE_SCHEMA, { table: 'Invoice', column: 'fenceToken', key: 'id' })
    expect(runGuardCli(['--table', 'Invoice', '--column', 'fenceToken', '--key', 'id', '--prisma-model'], project)).toEqual({ code: 0, stdout: `\n${model}`, stderr: '' })
    const out = guardIn(project, '--table', 'Invoice', '--column', 'fenceToken', '--key', 'id', '--prisma-model', '--write')
    expect(out).toEqual({ code: 0, stdout: 'fencelock-guard: appended model InvoiceFenceTombstone to prisma/schema.prisma\n', stderr: '' })
    const written = readFileSync(join(project, 'prisma', 'schema.prisma'), 'utf8')
    expect(written).toBe(`${INVOICE_SCHEMA}\n${model}`)
    expect(written).toContain('}\n\n// The database guard')
    const again = runGuardCli(['--table', 'Invoice', '--column', 'fenceToken', '--key', 'id', '--prisma-model', '--write'], project)
    expect(again).toMatchObject({ code: 2, stderr: 'fencelock-guard: prisma/schema.prisma already has model InvoiceFenceTombstone; nothing written\n' })
    expect(readFileSync(join(project, 'prisma', 'schema.prisma'), 'utf8')).toBe(written)
  })

  it('--migration <name> writes the SQL into the folder --create-only made, else into a new folder after the newest; never into an older one', () => {
    const project = invoiceProject()
    projects.push(project)
    const migrations = join(project, 'prisma', 'migrations')
    const args = ['--table', 'Invoice', '--column', 'fenceToken', '--key', 'id']
    const sql = fenceGuardSql({ table: 'Invoice', column: 'fenceToken', key: 'id' })
    // A new folder: its timestamp after the newest (and now).
    const first = guardIn(project, ...args, '--migration', 'fence_guard')
    expect(first.code, first.stderr).toBe(0)
    const made = readdirSync(migrations).sort()
    expect(made).toHaveLength(2)
    const folder = made[1] as string
    expect(folder).toMatch(/^\d{14}_fence_guard$/)
    expect(folder > '20260101000000_invoices').toBe(true)
    expect(first.stdout).toBe(`fencelock-guard: wrote prisma/migrations/${folder}/migration.sql\n`)
    expect(readFileSync(join(migrations, folder, 'migration.sql'), 'utf8')).toBe(sql)
    // The folder `prisma migrate dev --create-only --name fence_guard_2` made: its SQL replaced.
    mkdirSync(join(migrations, '29990101000000_fence_guard_2'))
    writeFileSync(join(migrations, '29990101000000_fence_guard_2', 'migration.sql'), 'CREATE TABLE "Invoice_fence_tombstones" ();')
    const replaced = runGuardCli([...args, '--migration', 'fence_guard_2'], project)
    expect(replaced).toEqual({ code: 0, stdout: 'fencelock-guard: replaced the migration.sql of prisma/migrations/29990101000000_fence_guard_2/migration.sql\n', stderr: '' })
    expect(readFileSync(join(migrations, '29990101000000_fence_guard_2', 'migration.sql'), 'utf8')).toBe(sql)
    // A name an older (maybe applied) migration has: refused, nothing written.
    const older = runGuardCli([...args, '--migration', 'fence_guard'], project)
    expect(older).toMatchObject({ code: 2, stdout: '' })
    expect(older.stderr).toContain(`prisma/migrations/${folder} has that name and is not the newest migration`)
    expect(readdirSync(migrations)).toHaveLength(3)
    // A clock behind the newest folder: the new folder still sorts after it.
    const next = runGuardCli([...args, '--migration', 'fence_guard_3'], project)
    expect(next.stdout).toBe('fencelock-guard: wrote prisma/migrations/29990101000001_fence_guard_3/migration.sql\n')
    for (const [bad, message] of [
      [['--migration', 'fence guard'], /invalid --migration: must be 1-200 letters, digits or _/],
      [['--migration', 'x', '--prisma-model'], /--migration and --prisma-model do not go together/],
      [['--write'], /--write goes with --prisma-model/],
      [['--migrations-dir', 'm'], /--migrations-dir goes with --migration/],
    ] as const) {
      expect(runGuardCli([...args, ...bad], project).stderr).toMatch(message)
    }
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
    expect(out.stdout).toBe('\n' + fenceGuardPrismaModel(readFileSync(join(here, '..', '..', '..', 'prisma', 'schema.prisma'), 'utf8'), { table: 'Product', column: 'fenceToken', key: 'sku' }))
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
      createTestDatabase('cli_first_guard', { leaveOut: GUARD_UPGRADES }),
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

    // Written by the command itself (--migration), one migration per table, as a project does.
    const project = mkdtempSync(join(tmpdir(), 'fencelock-guard-written-'))
    projects.push(project)
    for (const [table, key] of [['Product', 'sku'], ['Order', 'id']] as const) {
      const out = guardIn(project, '--table', table, '--column', 'fenceToken', '--key', key, '--schema-file', join(repo, 'prisma', 'schema.prisma'), '--migration', `${table.toLowerCase()}_fence_guard`, '--migrations-dir', 'migrations')
      expect(out.code, out.stderr).toBe(0)
      expect(out.stdout).toMatch(new RegExp(`^fencelock-guard: wrote migrations/\\d{14}_${table.toLowerCase()}_fence_guard/migration.sql\\n$`))
    }
    const written = await readMigrations(join(project, 'migrations'))
    expect(written.map((m) => m.name)).toEqual([expect.stringMatching(/_product_fence_guard$/), expect.stringMatching(/_order_fence_guard$/)])
    const report = await applyMigrations(t.admin, { schema: t.schema, migrations: written })
    expect(report.applied).toHaveLength(2)
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
