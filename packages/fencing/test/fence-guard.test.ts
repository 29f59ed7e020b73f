/**
 * fenceGuardSql: the SQL it generates, installed on tables of the tests' own in a schema of
 * their own, attacked with plain SQL from several sessions. No Prisma here: the guard must hold
 * whatever client writes.
 */
import { createHash } from 'node:crypto'
import { readFile } from 'node:fs/promises'
import { join } from 'node:path'
import pg from 'pg'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { databaseTarget } from '@fencelock/devkit/database-url'
import { applyMigrations, readMigrations } from '@fencelock/devkit/migrations'
import { FENCE_CASCADE_SQLSTATE, SET_FENCE_TOKEN_SQL, FENCE_GUARD_SQLSTATE, fenceGuardObjects, fenceGuardSql, fenceGuardUpgradeSql, InvalidFencingOptionError, isFenceGuardError } from '../src/index.js'
import { createTestDatabase, GUARD_MIGRATION, GUARD_ROUND4_MIGRATION, GUARD_UPGRADE_MIGRATION, holdTransaction, openSession, settle, uniqueName } from './support/database.js'

/** The first 12 hex digits of the SHA-256 of the guard migration as first applied. */
const GUARD_MIGRATION_SHA256 = '34f1a2de955b'

const schema = uniqueName('fencing_guard')
let admin: pg.Client

beforeAll(async () => {
  admin = new pg.Client({ connectionString: databaseTarget().connectionString })
  await admin.connect()
  await admin.query(`CREATE SCHEMA "${schema}"`)
  await admin.query(`SET search_path TO "${schema}"`)
})

afterAll(async () => {
  await admin?.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`)
  await admin?.end()
})

let tables = 0
/** A fresh table `item_<n>` (composite key region + code), guarded in one transaction as a migration would be. */
async function guardedTable(options: { schema?: boolean } = {}): Promise<string> {
  tables += 1
  const table = `item_${tables}`
  await admin.query(`CREATE TABLE "${table}" (region text, code int, qty int NOT NULL DEFAULT 0, fence bigint NOT NULL DEFAULT 0, PRIMARY KEY (region, code))`)
  const sql = fenceGuardSql({ table, column: 'fence', key: ['region', 'code'], ...(options.schema === true ? { schema } : {}) })
  await admin.query(`BEGIN; ${sql}; COMMIT`)
  return table
}

const code = (error: unknown) => (error as { code?: string } | undefined)?.code

describe('fenceGuardSql', () => {
  it('refuses an UPDATE that lowers the fence, from any session; equal and higher pass', async () => {
    const t = await guardedTable()
    await admin.query(`INSERT INTO "${t}" VALUES ('eu', 1, 5, 10)`)
    const lower = await settle(admin.query(`UPDATE "${t}" SET fence = 9, qty = 0`))
    expect(code(lower.error)).toBe(FENCE_GUARD_SQLSTATE)
    expect(isFenceGuardError(lower.error)).toBe(true)
    expect(JSON.parse((lower.error as { detail: string }).detail)).toMatchObject({ table: t, column: 'fence', stored: '10', token: '9' })
    await admin.query(`UPDATE "${t}" SET qty = 1`)
    await admin.query(`UPDATE "${t}" SET fence = 10, qty = 2`)
    await admin.query(`UPDATE "${t}" SET fence = 11, qty = 3`)
    expect((await admin.query(`SELECT qty, fence FROM "${t}"`)).rows).toEqual([{ qty: 3, fence: '11' }])
  })

  it('keeps a deleted row’s fence: the key cannot come back under an older token, per composite key', async () => {
    const t = await guardedTable()
    await admin.query(`INSERT INTO "${t}" VALUES ('eu', 1, 5, 30), ('us', 1, 5, 30)`)
    await admin.query(`DELETE FROM "${t}" WHERE region = 'eu'`)
    expect(code((await settle(admin.query(`INSERT INTO "${t}" VALUES ('eu', 1, 0, 29)`))).error)).toBe(FENCE_GUARD_SQLSTATE)
    expect(code((await settle(admin.query(`INSERT INTO "${t}" (region, code) VALUES ('eu', 1)`))).error)).toBe(FENCE_GUARD_SQLSTATE)
    // Another key is another row; a never-used key starts from nothing.
    await admin.query(`INSERT INTO "${t}" VALUES ('eu', 2, 0, 0)`)
    await admin.query(`INSERT INTO "${t}" VALUES ('eu', 1, 0, 30)`)
    const tombstones = fenceGuardObjects({ table: t, column: 'fence', key: ['region', 'code'] }).tombstoneTable
    expect((await admin.query(`SELECT region, code, fence FROM "${tombstones}" ORDER BY region, code`)).rows).toEqual([
      { region: 'eu', code: 1, fence: '30' },
      { region: 'eu', code: 2, fence: '0' },
      { region: 'us', code: 1, fence: '30' },
    ])
  })

  it('INSERT ... ON CONFLICT DO UPDATE on a live row is an update, not a recreation', async () => {
    const t = await guardedTable()
    await admin.query(`INSERT INTO "${t}" VALUES ('eu', 1, 5, 10)`)
    await admin.query(`UPDATE "${t}" SET fence = 20`)
    await admin.query(`INSERT INTO "${t}" VALUES ('eu', 1, 7, 0) ON CONFLICT (region, code) DO UPDATE SET qty = EXCLUDED.qty`)
    expect((await admin.query(`SELECT qty, fence FROM "${t}"`)).rows).toEqual([{ qty: 7, fence: '20' }])
  })

  it('a re-key leaves the old key its fence and checks the new key', async () => {
    const t = await guardedTable()
    await admin.query(`INSERT INTO "${t}" VALUES ('eu', 1, 5, 10)`)
    await admin.query(`DELETE FROM "${t}" WHERE code = 1`)
    await admin.query(`INSERT INTO "${t}" VALUES ('eu', 2, 5, 5)`)
    // Moving row 2 onto key 1 would recreate key 1 under 5 < 10.
    expect(code((await settle(admin.query(`UPDATE "${t}" SET code = 1 WHERE code = 2`))).error)).toBe(FENCE_GUARD_SQLSTATE)
    // Moving it elsewhere under 12 leaves key 2 the higher of its fences, 12: the re-key was a
    // write under 12, and a key a write under 12 gave up is not an older token's to take back.
    await admin.query(`UPDATE "${t}" SET code = 3, fence = 12 WHERE code = 2`)
    expect(code((await settle(admin.query(`INSERT INTO "${t}" VALUES ('eu', 2, 0, 11)`))).error)).toBe(FENCE_GUARD_SQLSTATE)
    await admin.query(`INSERT INTO "${t}" VALUES ('eu', 2, 0, 12)`)
  })

  it('TRUNCATE keeps the fences of the rows it removes; truncating the tombstones too is the deliberate reset', async () => {
    const t = await guardedTable()
    const tombstones = fenceGuardObjects({ table: t, column: 'fence', key: ['region', 'code'] }).tombstoneTable
    await admin.query(`INSERT INTO "${t}" VALUES ('eu', 1, 5, 10)`)
    await admin.query(`UPDATE "${t}" SET fence = 50`)
    await admin.query(`TRUNCATE "${t}"`)
    expect(code((await settle(admin.query(`INSERT INTO "${t}" VALUES ('eu', 1, 0, 49)`))).error)).toBe(FENCE_GUARD_SQLSTATE)
    await admin.query(`TRUNCATE "${t}", "${tombstones}"`)
    await admin.query(`INSERT INTO "${t}" VALUES ('eu', 1, 0, 0)`)
  })

  it('the tombstones are never lowered, re-keyed nor deleted row by row', async () => {
    const t = await guardedTable()
    const tombstones = fenceGuardObjects({ table: t, column: 'fence', key: ['region', 'code'] }).tombstoneTable
    await admin.query(`INSERT INTO "${t}" VALUES ('eu', 1, 5, 10)`)
    for (const sql of [`DELETE FROM "${tombstones}"`, `UPDATE "${tombstones}" SET fence = 0`, `UPDATE "${tombstones}" SET code = 9`]) {
      expect(code((await settle(admin.query(sql))).error), sql).toBe(FENCE_GUARD_SQLSTATE)
    }
    await admin.query(`UPDATE "${tombstones}" SET fence = 11`)
  })

  it('a delete and an older re-create racing in two sessions: refused under READ COMMITTED, a serialization failure under REPEATABLE READ', async () => {
    const t = await guardedTable()
    for (const [n, isolation, expected] of [
      [1, 'READ COMMITTED', FENCE_GUARD_SQLSTATE],
      [2, 'REPEATABLE READ', '40001'],
    ] as const) {
      await admin.query(`INSERT INTO "${t}" VALUES ('eu', ${n}, 5, 20)`)
      const creator = await openSession(schema)
      try {
        await creator.query(`BEGIN ISOLATION LEVEL ${isolation}`)
        await creator.query('SELECT 1') // its snapshot is taken before the delete commits
        const deleter = await holdTransaction(schema, [`UPDATE "${t}" SET fence = 30 WHERE code = ${n}`], [`DELETE FROM "${t}" WHERE code = ${n}`])
        const create = settle(creator.query(`INSERT INTO "${t}" VALUES ('eu', ${n}, 0, 29)`))
        await new Promise((resolve) => setTimeout(resolve, 200))
        await deleter.commit()
        expect(code((await create).error), isolation).toBe(expected)
        await creator.query('ROLLBACK')
      } finally {
        await creator.end()
      }
      expect((await admin.query(`SELECT count(*)::int AS n FROM "${t}" WHERE code = ${n}`)).rows).toEqual([{ n: 0 }])
    }
  })

  it('control: without the guard, that race recreates the row under the older token', async () => {
    await admin.query(`CREATE TABLE plain_item (code int PRIMARY KEY, fence bigint NOT NULL DEFAULT 0)`)
    await admin.query(`INSERT INTO plain_item VALUES (1, 20)`)
    const deleter = await holdTransaction(schema, [`UPDATE plain_item SET fence = 30 WHERE code = 1`], [`DELETE FROM plain_item WHERE code = 1`])
    const create = settle(admin.query(`INSERT INTO plain_item VALUES (1, 29)`))
    await new Promise((resolve) => setTimeout(resolve, 200))
    await deleter.commit()
    expect((await create).error).toBeUndefined()
    expect((await admin.query(`SELECT fence FROM plain_item`)).rows).toEqual([{ fence: '29' }])
  })

  it('with schema: names every object in it, and works from a session whose search_path is elsewhere', async () => {
    const t = await guardedTable({ schema: true })
    const sql = fenceGuardSql({ table: t, column: 'fence', key: ['region', 'code'], schema })
    expect(sql).toContain(`"${schema}"."${t}"`)
    const elsewhere = new pg.Client({ connectionString: databaseTarget().connectionString })
    await elsewhere.connect()
    try {
      await elsewhere.query(`INSERT INTO "${schema}"."${t}" VALUES ('eu', 1, 5, 10)`)
      await elsewhere.query(`DELETE FROM "${schema}"."${t}"`)
      expect(code((await settle(elsewhere.query(`INSERT INTO "${schema}"."${t}" VALUES ('eu', 1, 5, 9)`))).error)).toBe(FENCE_GUARD_SQLSTATE)
    } finally {
      await elsewhere.end()
    }
  })

  it('without schema, its functions keep using the schema they were created in', async () => {
    const t = await guardedTable()
    const elsewhere = new pg.Client({ connectionString: databaseTarget().connectionString })
    await elsewhere.connect()
    try {
      await elsewhere.query(`SET search_path TO public`)
      await elsewhere.query(`INSERT INTO "${schema}"."${t}" VALUES ('eu', 1, 5, 10)`)
      await elsewhere.query(`DELETE FROM "${schema}"."${t}"`)
      expect(code((await settle(elsewhere.query(`INSERT INTO "${schema}"."${t}" VALUES ('eu', 1, 5, 9)`))).error)).toBe(FENCE_GUARD_SQLSTATE)
    } finally {
      await elsewhere.end()
    }
  })

  it('quotes names: a table and columns with capitals, spaces and quotes', async () => {
    await admin.query(`CREATE TABLE "Odd ""Table""" ("Key Col" text PRIMARY KEY, "Fence""Col" bigint NOT NULL DEFAULT 0)`)
    await admin.query(`BEGIN; ${fenceGuardSql({ table: 'Odd "Table"', column: 'Fence"Col', key: 'Key Col', name: 'odd' })}; COMMIT`)
    await admin.query(`INSERT INTO "Odd ""Table""" VALUES ('a', 3)`)
    expect(code((await settle(admin.query(`UPDATE "Odd ""Table""" SET "Fence""Col" = 2`))).error)).toBe(FENCE_GUARD_SQLSTATE)
    expect(fenceGuardObjects({ table: 'Odd "Table"', column: 'c', key: 'k', name: 'odd' }).tombstoneTable).toBe('odd_tombstones')
  })

  it('a nullable key: rows with a NULL key insert and delete freely and leave no tombstone; other keys stay guarded (issue 24 case 5)', async () => {
    // Before: the tombstone's primary key made the key NOT NULL there, and the first NULL insert failed with 23502.
    await admin.query(`CREATE TABLE nullable_key (id serial PRIMARY KEY, email text UNIQUE, fence bigint NOT NULL DEFAULT 0)`)
    await admin.query(`BEGIN; ${fenceGuardSql({ table: 'nullable_key', column: 'fence', key: 'email' })}; COMMIT`)
    await admin.query(`INSERT INTO nullable_key (email, fence) VALUES (NULL, 5), (NULL, 6), ('a@x', 7)`)
    await admin.query(`UPDATE nullable_key SET email = NULL, fence = 8 WHERE email = 'a@x'`)
    await admin.query(`DELETE FROM nullable_key WHERE email IS NULL AND fence = 5`)
    await admin.query(`TRUNCATE nullable_key`)
    expect((await admin.query(`SELECT email, fence FROM nullable_key_fence_tombstones ORDER BY email`)).rows).toEqual([{ email: 'a@x', fence: '8' }])
    expect(code((await settle(admin.query(`INSERT INTO nullable_key (email, fence) VALUES ('a@x', 7)`))).error)).toBe(FENCE_GUARD_SQLSTATE)
    await admin.query(`INSERT INTO nullable_key (email, fence) VALUES (NULL, 0), ('a@x', 8)`)
  })

  it('names that contain the dollar-quote tag or a line break install and work (issue 24 case 6)', async () => {
    // Before: a name containing $fencelock$ ended the function bodies early (42601), and a line
    // break in a name ended the header comment, so the rest of the name ran as SQL.
    const table = 'odd$fencelock$table'
    const column = 'f$fencelock_1$'
    await admin.query(`CREATE TABLE "${table}" ("k$fencelock$" int PRIMARY KEY, "${column}" bigint NOT NULL DEFAULT 0)`)
    const sql = fenceGuardSql({ table, column, key: 'k$fencelock$', name: 'dollar' })
    expect(sql).toContain('$fencelock_2$')
    await admin.query(`BEGIN; ${sql}; COMMIT`)
    await admin.query(`INSERT INTO "${table}" VALUES (1, 5)`)
    expect(code((await settle(admin.query(`UPDATE "${table}" SET "${column}" = 4`))).error)).toBe(FENCE_GUARD_SQLSTATE)
    await admin.query(`DELETE FROM "${table}"`)
    expect(code((await settle(admin.query(`INSERT INTO "${table}" VALUES (1, 4)`))).error)).toBe(FENCE_GUARD_SQLSTATE)

    const injected = 'broken\nCREATE TABLE injected (x int);--'
    await admin.query(`CREATE TABLE "${injected}" (k int PRIMARY KEY, fence bigint NOT NULL DEFAULT 0)`)
    await admin.query(`BEGIN; ${fenceGuardSql({ table: injected, column: 'fence', key: 'k', name: 'broken' })}; COMMIT`)
    expect((await admin.query(`SELECT to_regclass('"${schema}".injected') AS t`)).rows).toEqual([{ t: null }])
  })

  it('refuses bad options before producing anything, naming the field and the rule', () => {
    const ok = { table: 'Product', column: 'fenceToken', key: 'sku' }
    const cases: [unknown, string][] = [
      [null, 'options'],
      [{ ...ok, table: '' }, 'table'],
      [{ ...ok, table: 7 }, 'table'],
      [{ ...ok, column: undefined }, 'column'],
      [{ ...ok, key: [] }, 'key'],
      [{ ...ok, key: ['sku', 'sku'] }, 'key'],
      [{ ...ok, key: ['fenceToken'] }, 'key'],
      [{ ...ok, key: [''] }, 'key[0]'],
      [{ ...ok, schema: 'a\0b' }, 'schema'],
      [{ ...ok, table: 'x'.repeat(60) }, 'table'],
      [{ ...ok, name: 'y'.repeat(60) }, 'name'],
      [{ ...ok, keys: ['sku'] }, 'keys'],
    ]
    for (const [options, field] of cases) {
      let error: unknown
      try {
        fenceGuardSql(options as never)
      } catch (e) {
        error = e
      }
      expect(error, field).toBeInstanceOf(InvalidFencingOptionError)
      expect(error).toMatchObject({ field })
      error = undefined
      try {
        fenceGuardUpgradeSql(options as never)
      } catch (e) {
        error = e
      }
      expect(error, field).toBeInstanceOf(InvalidFencingOptionError)
      expect(error).toMatchObject({ field })
    }
  })

  it('the guard’s upgrade migrations are what fenceGuardUpgradeSql produces; the applied ones are left as they were', async () => {
    const migration = (name: string) => readFile(join(import.meta.dirname, '..', '..', '..', 'prisma', 'migrations', name, 'migration.sql'), 'utf8')
    // On a mismatch, regenerate these files with `fencelock-guard --upgrade` for these options; never edit an applied migration, add one.
    expect(await migration(GUARD_ROUND4_MIGRATION)).toBe(
      `${fenceGuardUpgradeSql({ table: 'Product', column: 'fenceToken', key: 'sku' })}\n${fenceGuardUpgradeSql({ table: 'Order', column: 'fenceToken', key: 'id' })}`,
    )
    expect(await migration('20261205000100_gateway_fence_guard_round4')).toBe(fenceGuardUpgradeSql({ table: 'GatewayFence', column: 'fenceToken', key: 'resource' }))
    expect(await migration('20261205000200_stock_segment_fence_guard_round4')).toBe(fenceGuardUpgradeSql({ table: 'StockSegment', column: 'fenceToken', key: 'id' }))
    // The earlier upgrades, applied: their bytes must not change.
    const sha = async (name: string) => createHash('sha256').update(await migration(name)).digest('hex').slice(0, 12)
    expect(await sha(GUARD_UPGRADE_MIGRATION)).toBe('5339b4057420')
    expect(await sha('20261201000100_gateway_fence_guard_token')).toBe('e3fa0a1fac58')
    // The guard as first installed (an applied migration: its bytes must not change, the runner checks them).
    const first = createHash('sha256').update(await migration(GUARD_MIGRATION)).digest('hex')
    expect(first.slice(0, 12)).toBe(GUARD_MIGRATION_SHA256)
  })

  it('a database migrated through the first guard and its upgrade holds exactly the guard fenceGuardSql installs today', async () => {
    const migrated = uniqueName('fencing_guard_up')
    const fresh = uniqueName('fencing_guard_new')
    const migrations = await readMigrations()
    try {
      await applyMigrations(admin, { schema: migrated, migrations })
      await applyMigrations(admin, { schema: fresh, migrations: migrations.filter((m) => m.name === '20251126000000_init') })
      const guards = [
        { table: 'Product', column: 'fenceToken', key: 'sku' },
        { table: 'Order', column: 'fenceToken', key: 'id' },
      ]
      await admin.query(`BEGIN; SET LOCAL search_path TO "${fresh}"; ${guards.map((g) => fenceGuardSql(g)).join('\n')}; COMMIT`)
      const definitions = async (s: string) => {
        const functions = await admin.query<{ name: string; def: string }>(
          `SELECT p.proname AS name, pg_get_functiondef(p.oid) AS def FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = $1 AND (p.proname LIKE 'Product_fence%' OR p.proname LIKE 'Order_fence%') ORDER BY 1`,
          [s],
        )
        const triggers = await admin.query<{ name: string; def: string }>(
          `SELECT t.tgname AS name, pg_get_triggerdef(t.oid) AS def FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 AND NOT t.tgisinternal AND c.relname IN ('Product', 'Order', 'Product_fence_tombstones', 'Order_fence_tombstones') ORDER BY 1`,
          [s],
        )
        return [...functions.rows, ...triggers.rows].map((r) => ({ name: r.name, def: r.def.replaceAll(s, '<schema>') }))
      }
      const upgraded = await definitions(migrated)
      expect(upgraded.map((d) => d.name)).toContain('Product_fence_token')
      expect(upgraded).toEqual(await definitions(fresh))
    } finally {
      await admin.query(`DROP SCHEMA IF EXISTS "${migrated}" CASCADE; DROP SCHEMA IF EXISTS "${fresh}" CASCADE`)
    }
  })
})

describe('a renamed table: the TRUNCATE trigger reads its own table, not the name it was installed on', () => {
  it('after ALTER TABLE … RENAME, TRUNCATE works and keeps its rows’ fences; a new table under the old name is not read', async () => {
    const t = await guardedTable()
    await admin.query(`INSERT INTO "${t}" VALUES ('eu', 1, 0, 10)`)
    await admin.query(`ALTER TABLE "${t}" RENAME TO "${t}_old"`)
    await admin.query(`TRUNCATE "${t}_old"`)
    expect(code((await settle(admin.query(`INSERT INTO "${t}_old" VALUES ('eu', 1, 0, 5)`))).error)).toBe(FENCE_GUARD_SQLSTATE)
    // A new table takes the old name, with a row of a fence the renamed one never had.
    await admin.query(`CREATE TABLE "${t}" (region text, code int, qty int NOT NULL DEFAULT 0, fence bigint NOT NULL DEFAULT 0, PRIMARY KEY (region, code))`)
    await admin.query(`INSERT INTO "${t}" VALUES ('eu', 2, 0, 99)`)
    await admin.query(`INSERT INTO "${t}_old" VALUES ('eu', 3, 0, 7)`)
    await admin.query(`TRUNCATE "${t}_old"`)
    expect((await admin.query(`SELECT region, code, fence FROM "${t}_fence_tombstones" ORDER BY code`)).rows).toEqual([
      { region: 'eu', code: 1, fence: '10' },
      { region: 'eu', code: 3, fence: '7' },
    ])
    // Under the transaction's token, the check of the newest fence reads the renamed table too.
    await admin.query(`INSERT INTO "${t}_old" VALUES ('eu', 4, 0, 30)`)
    const stale = await settle(admin.query(`BEGIN; ${SET_FENCE_TOKEN_SQL.replace('$1', "'20'")}; TRUNCATE "${t}_old"; COMMIT`))
    await admin.query('ROLLBACK')
    expect(code(stale.error)).toBe(FENCE_GUARD_SQLSTATE)
  })

  it('control, the round-3 guard (GatewayFence without its round-4 upgrade): after a rename every TRUNCATE fails', async () => {
    const db = await createTestDatabase('guard_rename_r3', { leaveOut: ['20261205000100_gateway_fence_guard_round4'] })
    try {
      await db.admin.query(`SET search_path TO "${db.schema}"`)
      await db.admin.query(`ALTER TABLE "GatewayFence" RENAME TO "GatewayFenceOld"`)
      expect(code((await settle(db.admin.query(`TRUNCATE "GatewayFenceOld"`))).error)).toBe('42P01')
    } finally {
      await db.close()
    }
  })
})

describe('partitioned tables: the guard refuses to install on one, or on a partition', () => {
  let n = 0
  /** A table partitioned by region, with partitions eu and us, a row ('eu', 1) at fence 30. */
  async function partitioned(): Promise<string> {
    n += 1
    const t = `parted_${n}`
    await admin.query(`CREATE TABLE "${t}" (region text, code int, qty int NOT NULL DEFAULT 0, fence bigint NOT NULL DEFAULT 0, PRIMARY KEY (region, code)) PARTITION BY LIST (region)`)
    await admin.query(`CREATE TABLE "${t}_eu" PARTITION OF "${t}" FOR VALUES IN ('eu'); CREATE TABLE "${t}_us" PARTITION OF "${t}" FOR VALUES IN ('us')`)
    await admin.query(`INSERT INTO "${t}" VALUES ('eu', 1, 0, 30)`)
    return t
  }
  const install = (sql: string) => settle(admin.query(`BEGIN; ${sql}; COMMIT`)).finally(() => admin.query('ROLLBACK'))

  it('refused with feature_not_supported (0A000), saying why; nothing is created', async () => {
    const t = await partitioned()
    for (const table of [t, `${t}_eu`]) {
      for (const sql of [fenceGuardSql({ table, column: 'fence', key: ['region', 'code'] }), fenceGuardUpgradeSql({ table, column: 'fence', key: ['region', 'code'] })]) {
        const refused = await install(sql)
        expect(code(refused.error), table).toBe('0A000')
        expect((refused.error as Error).message).toMatch(/partition.*row.*another partition.*DELETE.*INSERT/s)
      }
    }
    expect((await admin.query(`SELECT to_regclass($1) AS t`, [`"${t}_fence_tombstones"`])).rows).toEqual([{ t: null }])
  })

  it('control: the guard installed anyway lets an UPDATE that moves the row to another partition lower its fence, 30 to 5', async () => {
    const t = await partitioned()
    const sql = fenceGuardSql({ table: t, column: 'fence', key: ['region', 'code'] })
    const withoutCheck = sql.replace(/DO \$fencelock\$[\s\S]*?\n\$fencelock\$;\n/, '')
    expect(withoutCheck).not.toBe(sql)
    expect((await install(withoutCheck)).error).toBeUndefined()
    await admin.query(`UPDATE "${t}" SET region = 'us', fence = 5 WHERE code = 1`)
    expect((await admin.query(`SELECT region, fence FROM "${t}"`)).rows).toEqual([{ region: 'us', fence: '5' }])
  })
})

describe('least privilege: an application role with rights on the table only', () => {
  /** Runs `fn` with a new role (rights: the schema, and `grants` on `table`), as that role in a session of its own; drops it after. */
  async function asAppRole<T>(schemaName: string, table: string, fn: (session: pg.Client) => Promise<T>): Promise<T> {
    const role = uniqueName('fencing_app')
    await admin.query(`CREATE ROLE "${role}" NOLOGIN`)
    const session = await openSession(schemaName)
    try {
      await admin.query(`GRANT USAGE ON SCHEMA "${schemaName}" TO "${role}"; GRANT SELECT, INSERT, UPDATE, DELETE, TRUNCATE ON "${schemaName}"."${table}" TO "${role}"`)
      await session.query(`SET ROLE "${role}"`)
      return await fn(session)
    } finally {
      await session.end()
      await admin.query(`DROP OWNED BY "${role}"; DROP ROLE "${role}"`)
    }
  }

  it('writes, deletes and truncates through the guard (its functions are SECURITY DEFINER, search_path fixed); the tombstones stay out of its reach', async () => {
    const t = await guardedTable()
    await asAppRole(schema, t, async (app) => {
      await app.query(`INSERT INTO "${t}" VALUES ('eu', 1, 0, 10), ('eu', 2, 0, 10)`)
      await app.query(`UPDATE "${t}" SET code = 3 WHERE code = 2`)
      await app.query(`DELETE FROM "${t}" WHERE code = 1`)
      expect(code((await settle(app.query(`INSERT INTO "${t}" VALUES ('eu', 1, 0, 5)`))).error)).toBe(FENCE_GUARD_SQLSTATE)
      await app.query(`TRUNCATE "${t}"`)
      await app.query('BEGIN')
      await app.query(SET_FENCE_TOKEN_SQL, ['12'])
      await app.query(`INSERT INTO "${t}" VALUES ('eu', 4, 0, 0)`)
      await app.query('COMMIT')
      // The tombstones: no rights of its own, neither to read nor to write.
      expect(code((await settle(app.query(`DELETE FROM "${t}_fence_tombstones"`))).error)).toBe('42501')
      expect(code((await settle(app.query(`INSERT INTO "${t}_fence_tombstones" VALUES ('eu', 9, 1)`))).error)).toBe('42501')
    })
    expect((await admin.query(`SELECT code, fence FROM "${t}_fence_tombstones" ORDER BY code`)).rows).toEqual([
      { code: 1, fence: '10' },
      { code: 2, fence: '10' },
      { code: 3, fence: '10' },
      { code: 4, fence: '12' },
    ])
    // Every function of the guard runs with a search_path of its own, pg_temp last.
    const { rows } = await admin.query<{ name: string; definer: boolean; config: string[] | null }>(
      `SELECT p.proname AS name, p.prosecdef AS definer, p.proconfig AS config FROM pg_proc p WHERE p.pronamespace = $1::regnamespace AND p.proname LIKE $2 ORDER BY 1`,
      [`"${schema}"`, `${t}\\_fence\\_%`],
    )
    expect(rows.length).toBe(5)
    for (const r of rows) expect(r.config, r.name).toEqual([`search_path=${schema}, pg_temp`])
    expect(rows.filter((r) => r.definer).map((r) => r.name).sort()).toEqual([`${t}_fence_on_truncate`, `${t}_fence_remember`])
  })

  it('control, the round-3 guard (GatewayFence without its round-4 upgrade): the same role cannot INSERT nor DELETE at all', async () => {
    const db = await createTestDatabase('guard_role_r3', { leaveOut: ['20261205000100_gateway_fence_guard_round4'] })
    try {
      await asAppRole(db.schema, 'GatewayFence', async (app) => {
        expect(code((await settle(app.query(`INSERT INTO "GatewayFence" VALUES ('r', 1)`))).error)).toBe('42501')
      })
    } finally {
      await db.close()
    }
  })
})

describe('cascades under the transaction’s token are decided as the Prisma path does: refused', () => {
  let n = 0
  /** A guarded parent and a guarded child (ON DELETE CASCADE), a child row at fence 7 from its own lock; `sql` makes the guard's SQL. */
  async function family(sql: (options: Parameters<typeof fenceGuardSql>[0]) => string = fenceGuardSql) {
    n += 1
    const [parent, child] = [`cparent_${n}`, `cchild_${n}`]
    await admin.query(`CREATE TABLE "${parent}" (id int PRIMARY KEY, fence bigint NOT NULL DEFAULT 0)`)
    await admin.query(`CREATE TABLE "${child}" (id int PRIMARY KEY, parent int NOT NULL REFERENCES "${parent}" ON DELETE CASCADE, fence bigint NOT NULL DEFAULT 0)`)
    await admin.query(`BEGIN; ${sql({ table: parent, column: 'fence', key: 'id' })}; ${sql({ table: child, column: 'fence', key: 'id' })}; COMMIT`)
    await admin.query(`INSERT INTO "${parent}" VALUES (1, 5); INSERT INTO "${child}" VALUES (1, 1, 7)`)
    const deleteParent = (token: string) => settle(admin.query(`BEGIN; ${SET_FENCE_TOKEN_SQL.replace('$1', `'${token}'`)}; DELETE FROM "${parent}" WHERE id = 1; COMMIT`)).finally(() => admin.query('ROLLBACK'))
    return { parent, child, deleteParent }
  }

  it('a DELETE under a token that cascades to a guarded table is refused (FL003, naming the cascade), whatever the child’s fence; a plain DELETE cascades', async () => {
    const f = await family()
    for (const token of ['6', '1000']) {
      const refused = await f.deleteParent(token)
      expect(code(refused.error), token).toBe(FENCE_CASCADE_SQLSTATE)
      expect((refused.error as Error).message).toMatch(/cascade/)
    }
    expect((await admin.query(`SELECT id, fence FROM "${f.child}"`)).rows).toEqual([{ id: 1, fence: '7' }])
    expect((await admin.query(`SELECT id, fence FROM "${f.child}_fence_tombstones"`)).rows).toEqual([{ id: 1, fence: '7' }])
    // The child deleted first under its own lock's token, then the parent under its own: both go.
    await admin.query(`BEGIN; ${SET_FENCE_TOKEN_SQL.replace('$1', "'7'")}; DELETE FROM "${f.child}" WHERE id = 1; COMMIT`)
    await admin.query(`BEGIN; ${SET_FENCE_TOKEN_SQL.replace('$1', "'6'")}; DELETE FROM "${f.parent}" WHERE id = 1; COMMIT`)
    // Without a token, the cascade is any other write: the child's tombstone keeps its own fence.
    await admin.query(`INSERT INTO "${f.parent}" VALUES (2, 6); INSERT INTO "${f.child}" VALUES (2, 2, 9)`)
    await admin.query(`DELETE FROM "${f.parent}" WHERE id = 2`)
    expect((await admin.query(`SELECT id, fence FROM "${f.child}_fence_tombstones" ORDER BY id`)).rows).toEqual([
      { id: 1, fence: '7' },
      { id: 2, fence: '9' },
    ])
  })

  it('control, without the check: the parent’s token fences the child — refused under 6 (the child holds 7 of its own lock), and under 1000 the child’s tombstone keeps 1000', async () => {
    const f = await family((options) => fenceGuardSql(options).replace('pg_trigger_depth() > 1', 'false'))
    expect(code((await f.deleteParent('6')).error)).toBe(FENCE_GUARD_SQLSTATE)
    expect((await f.deleteParent('1000')).error).toBeUndefined()
    expect((await admin.query(`SELECT id, fence FROM "${f.child}_fence_tombstones"`)).rows).toEqual([{ id: 1, fence: '1000' }])
  })
})

describe('the transaction’s token (fencelock.token): fencing for any client', () => {
  /** Runs `statements` in one transaction of `session` that set the token first; rolls back on failure. */
  async function underToken(session: pg.Client, token: string, ...statements: string[]) {
    await session.query('BEGIN')
    try {
      await session.query(SET_FENCE_TOKEN_SQL, [token])
      for (const sql of statements) await session.query(sql)
      await session.query('COMMIT')
    } catch (error) {
      await session.query('ROLLBACK')
      throw error
    }
  }

  it('an UPDATE or DELETE of a row with a newer fence is refused; a write that does not set the fence raises it to the token', async () => {
    const t = await guardedTable()
    await admin.query(`INSERT INTO "${t}" VALUES ('eu', 1, 5, 10), ('eu', 2, 5, 10)`)
    const stale = await settle(underToken(admin, '9', `UPDATE "${t}" SET qty = 0 WHERE code = 1`))
    expect(code(stale.error)).toBe(FENCE_GUARD_SQLSTATE)
    expect(JSON.parse((stale.error as { detail: string }).detail)).toMatchObject({ table: t, stored: '10', token: '9', operation: 'update' })
    expect(code((await settle(underToken(admin, '9', `DELETE FROM "${t}" WHERE code = 1`))).error)).toBe(FENCE_GUARD_SQLSTATE)
    // Equal and newer tokens write; the fence follows the token without the write naming it.
    await underToken(admin, '10', `UPDATE "${t}" SET qty = 1 WHERE code = 1`)
    await underToken(admin, '12', `UPDATE "${t}" SET qty = 2 WHERE code = 1`, `INSERT INTO "${t}" (region, code, qty) VALUES ('eu', 3, 1)`)
    expect((await admin.query(`SELECT code, qty, fence FROM "${t}" ORDER BY code`)).rows).toEqual([
      { code: 1, qty: 2, fence: '12' },
      { code: 2, qty: 5, fence: '10' },
      { code: 3, qty: 1, fence: '12' },
    ])
    // A DELETE under a token leaves the token in the tombstone, not the row's older fence.
    await underToken(admin, '20', `DELETE FROM "${t}" WHERE code = 2`)
    expect(code((await settle(underToken(admin, '19', `INSERT INTO "${t}" VALUES ('eu', 2, 0, 0)`))).error)).toBe(FENCE_GUARD_SQLSTATE)
    await underToken(admin, '20', `INSERT INTO "${t}" VALUES ('eu', 2, 0, 0)`)
    // After the transaction the token is gone: plain writes are as before.
    await admin.query(`UPDATE "${t}" SET qty = 3 WHERE code = 1`)
    expect((await admin.query(`SELECT qty, fence FROM "${t}" WHERE code = 1`)).rows).toEqual([{ qty: 3, fence: '12' }])
  })

  it('a token that is not 0 to 2^63 − 1 in digits fails the write (22023), and TRUNCATE under an older token is refused', async () => {
    const t = await guardedTable()
    await admin.query(`INSERT INTO "${t}" VALUES ('eu', 1, 5, 10)`)
    for (const bad of ['abc', '-1', '9223372036854775808', ' 5']) {
      expect(code((await settle(underToken(admin, bad, `UPDATE "${t}" SET qty = 0`))).error), bad).toBe('22023')
    }
    expect(code((await settle(underToken(admin, '9', `TRUNCATE "${t}"`))).error)).toBe(FENCE_GUARD_SQLSTATE)
    await underToken(admin, '11', `TRUNCATE "${t}"`)
    expect(code((await settle(admin.query(`INSERT INTO "${t}" VALUES ('eu', 1, 0, 10)`))).error)).toBe(FENCE_GUARD_SQLSTATE)
  })

  /** A newer holder (token 20) holds the row lock of `code` with its write; `stale` (token 15) is sent behind it. */
  async function behindNewer(t: string, key: number, stale: string) {
    const older = await openSession(schema)
    try {
      const newer = await holdTransaction(schema, [SET_FENCE_TOKEN_SQL, ['20']], [`UPDATE "${t}" SET qty = 100, fence = 20 WHERE code = ${key}`])
      await older.query('BEGIN')
      await older.query(SET_FENCE_TOKEN_SQL, ['15'])
      const write = settle(older.query(stale))
      await waitForLock(older)
      await newer.commit()
      const outcome = await write
      await older.query(outcome.error === undefined ? 'COMMIT' : 'ROLLBACK')
      return outcome
    } finally {
      await older.end()
    }
  }

  /** Until `session`'s backend waits on a lock. */
  async function waitForLock(session: pg.Client) {
    const pid = (session as unknown as { processID: number }).processID
    for (;;) {
      const { rows } = await admin.query(`SELECT wait_event_type FROM pg_stat_activity WHERE pid = $1`, [pid])
      if (rows[0]?.wait_event_type === 'Lock') return
      await new Promise((resolve) => setTimeout(resolve, 5))
    }
  }

  it.each([
    ['UPDATE', (t: string) => `UPDATE "${t}" SET qty = 1 WHERE code = 1`],
    ['DELETE', (t: string) => `DELETE FROM "${t}" WHERE code = 1`],
  ])('race: a %s under an older token that waited for a newer holder’s row lock is refused once that one commits', async (_label, stale) => {
    const t = await guardedTable()
    await admin.query(`INSERT INTO "${t}" VALUES ('eu', 1, 5, 10)`)
    const outcome = await behindNewer(t, 1, stale(t))
    expect(code(outcome.error)).toBe(FENCE_GUARD_SQLSTATE)
    expect((await admin.query(`SELECT qty, fence FROM "${t}"`)).rows).toEqual([{ qty: 100, fence: '20' }])
  })

  it.each([
    ['UPDATE', (t: string) => `UPDATE "${t}" SET qty = 1 WHERE code = 1`, [{ qty: 1, fence: '20' }]],
    ['DELETE', (t: string) => `DELETE FROM "${t}" WHERE code = 1`, []],
  ])('control: without the guard the same %s goes through and overwrites the newer holder’s write', async (_label, stale, rows) => {
    tables += 1
    const t = `plain_${tables}`
    await admin.query(`CREATE TABLE "${t}" (region text, code int, qty int NOT NULL DEFAULT 0, fence bigint NOT NULL DEFAULT 0, PRIMARY KEY (region, code))`)
    await admin.query(`INSERT INTO "${t}" VALUES ('eu', 1, 5, 10)`)
    const outcome = await behindNewer(t, 1, stale(t))
    expect(outcome.error).toBeUndefined()
    expect((await admin.query(`SELECT qty, fence FROM "${t}"`)).rows).toEqual(rows)
  })
})
