/**
 * assertFenceGuard: the startup check that the database guard is on every fenced table, against
 * the real PostgreSQL — the guard present, missing, and partly missing (as first installed, a
 * trigger dropped or disabled, the tombstone table gone). Without the guard the failure it catches is
 * silent: a plain UPDATE lowers a fence, and a stale token is then accepted (shown below).
 */
import { PrismaPg } from '@prisma/adapter-pg'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { assertFenceGuard, InvalidFencingOptionError, MissingFenceGuardError, StaleFencingTokenError, type MissingGuardObject } from '../src/index.js'
import { ADVERSARIAL_MODELS, createAdversarialDatabase, type AdversarialDatabase } from './support/adversarial.js'
import { createTestDatabase, FENCED_MODELS, GUARD_UPGRADES, PrismaClient, seedProduct, settle, type TestDatabase } from './support/database.js'

const GUARD = (table: string) => ({
  tombstones: `${table}_fence_tombstones`,
  functions: ['refuse_lower', 'remember', 'on_truncate', 'keep_tombstones', 'token'].map((s) => `${table}_fence_${s}`),
  triggers: ['refuse_lower', 'on_insert', 'on_delete', 'on_rekey', 'on_truncate', 'tombstone_delete', 'tombstone_update', 'token'].map((s) => `${table}_fence_${s}`),
})

/** The error `assertFenceGuard` threw, or a failure when it resolved. */
async function refusal(promise: Promise<void>): Promise<MissingFenceGuardError> {
  const { error } = await settle(promise)
  expect(error).toBeInstanceOf(MissingFenceGuardError)
  return error as MissingFenceGuardError
}

const named = (missing: readonly MissingGuardObject[], model: string) =>
  missing
    .filter((m) => m.model === model)
    .map((m) => `${m.kind} ${m.name}${m.problem === 'missing' ? '' : ` (${m.problem})`}`)
    .sort()

describe('assertFenceGuard', () => {
  let guarded: TestDatabase
  let unguarded: TestDatabase
  let firstGuard: TestDatabase

  beforeAll(async () => {
    ;[guarded, unguarded, firstGuard] = await Promise.all([
      createTestDatabase('assert_guarded'),
      createTestDatabase('assert_unguarded', { guard: false }),
      createTestDatabase('assert_first_guard', { leaveOut: GUARD_UPGRADES }),
    ])
  })

  afterAll(async () => {
    await Promise.all([guarded?.close(), unguarded?.close(), firstGuard?.close()])
  })

  it('resolves when the guard is on every fenced table (plain and extended client)', async () => {
    await expect(assertFenceGuard(guarded.base, { models: FENCED_MODELS })).resolves.toBeUndefined()
    await expect(assertFenceGuard(guarded.db, { models: { Product: 'fenceToken' } })).resolves.toBeUndefined()
  })

  it('the guard missing: names every object of every model, in the table’s own schema; the failure it prevents is silent without it', async () => {
    // What goes wrong unnoticed without the guard: a write outside $fenced lowers the fence, and an
    // older token is then accepted.
    const p = await seedProduct(unguarded.base, 0n, 'assert')
    await unguarded.db.$fenced(20n).product.update({ where: { id: p.id }, data: { stock: 9 } })
    await unguarded.base.product.update({ where: { id: p.id }, data: { fenceToken: 0n } })
    await unguarded.db.$fenced(10n).product.update({ where: { id: p.id }, data: { stock: 0 } })
    expect(await unguarded.base.product.findUniqueOrThrow({ where: { id: p.id } })).toMatchObject({ stock: 0, fenceToken: 10n })
    // With the guard, that lowering is refused.
    const q = await seedProduct(guarded.base, 0n, 'assert')
    await guarded.db.$fenced(20n).product.update({ where: { id: q.id }, data: { stock: 9 } })
    expect((await settle(guarded.base.product.update({ where: { id: q.id }, data: { fenceToken: 0n } }))).error).toBeDefined()
    expect((await settle(guarded.db.$fenced(10n).product.update({ where: { id: q.id }, data: { stock: 0 } }))).error).toBeInstanceOf(StaleFencingTokenError)

    const error = await refusal(assertFenceGuard(unguarded.base, { models: FENCED_MODELS }))
    for (const table of ['Product', 'Order']) {
      const g = GUARD(table)
      expect(named(error.missing, table)).toEqual(
        [`tombstone table ${g.tombstones}`, ...g.functions.map((f) => `function ${f}`), ...g.triggers.map((t) => `trigger ${t}`)].sort(),
      )
      expect(error.missing.find((m) => m.model === table)?.table).toBe(`${unguarded.schema}.${table}`)
    }
    expect(error.name).toBe('MissingFenceGuardError')
    expect(error.model).toBeUndefined()
    expect(error.message).toContain(`Product (table ${unguarded.schema}.Product): the guard is not installed`)
    expect(error.message).toContain('Install it in a migration: npx fencelock-guard --table Product --column fenceToken --key id --migration product_fence_guard (')
    expect(Object.isFrozen(error.missing)).toBe(true)
  })

  it('partly missing — the guard as first installed: the token function and trigger, and the upgrade to run', async () => {
    const error = await refusal(assertFenceGuard(firstGuard.base, { models: { Order: 'fenceToken' } }))
    expect(named(error.missing, 'Order')).toEqual(['function Order_fence_token', 'trigger Order_fence_token'])
    expect(error.model).toBe('Order')
    expect(error.message).toContain('the guard is incomplete')
    expect(error.message).toContain('in a new migration: npx fencelock-guard --table Order --column fenceToken --key id --upgrade')
  })

  describe('partly missing on a guarded table', () => {
    let t: TestDatabase
    beforeAll(async () => {
      t = await createTestDatabase('assert_partial')
    })
    afterAll(async () => {
      await t?.close()
    })

    it('a dropped trigger, a disabled one, a dropped function: each named, the rest not', async () => {
      await t.admin.query(`SET search_path TO "${t.schema}"`)
      await t.admin.query(`DROP TRIGGER "Product_fence_on_delete" ON "Product"`)
      await t.admin.query(`ALTER TABLE "Product" DISABLE TRIGGER "Product_fence_refuse_lower"`)
      await t.admin.query(`ALTER TABLE "Product_fence_tombstones" ENABLE REPLICA TRIGGER "Product_fence_tombstone_update"`)
      await t.admin.query(`DROP FUNCTION "Product_fence_on_truncate"() CASCADE`)
      const error = await refusal(assertFenceGuard(t.base, { models: FENCED_MODELS }))
      expect(named(error.missing, 'Product')).toEqual(
        [
          'function Product_fence_on_truncate',
          'trigger Product_fence_on_delete',
          'trigger Product_fence_on_truncate',
          'trigger Product_fence_refuse_lower (disabled)',
          'trigger Product_fence_tombstone_update (disabled)',
        ].sort(),
      )
      expect(named(error.missing, 'Order')).toEqual([])
      expect(error.message).toContain('Product_fence_refuse_lower (disabled)')
    })

    it('the tombstone table dropped: the table and its two triggers', async () => {
      await t.admin.query(`DROP TABLE "${t.schema}"."Order_fence_tombstones" CASCADE`)
      const error = await refusal(assertFenceGuard(t.base, { models: { Order: 'fenceToken' } }))
      expect(named(error.missing, 'Order')).toEqual(['tombstone table Order_fence_tombstones', 'trigger Order_fence_tombstone_delete', 'trigger Order_fence_tombstone_update'])
      expect(error.message).not.toContain('--upgrade')
    })

    it('a lowering trigger on another column than the fence', async () => {
      await t.admin.query(`SET search_path TO "${t.schema}"`)
      await t.admin.query(`ALTER TABLE "Product" ADD COLUMN "otherFence" bigint NOT NULL DEFAULT 0`)
      await t.admin.query(`DROP TRIGGER "Product_fence_refuse_lower" ON "Product"`)
      await t.admin.query(
        `CREATE TRIGGER "Product_fence_refuse_lower" AFTER UPDATE OF "otherFence" ON "Product" FOR EACH ROW WHEN (NEW."otherFence" < OLD."otherFence") EXECUTE FUNCTION "Product_fence_refuse_lower"()`,
      )
      const error = await refusal(assertFenceGuard(t.base, { models: { Product: 'fenceToken' } }))
      expect(named(error.missing, 'Product')).toContain('trigger Product_fence_refuse_lower (other column)')
    })
  })

  describe('names the database sees (@@map, @map), a nullable and a compound key', () => {
    let a: AdversarialDatabase
    let bare: AdversarialDatabase
    beforeAll(async () => {
      ;[a, bare] = await Promise.all([createAdversarialDatabase('assert'), createAdversarialDatabase('assert_bare', { guard: false })])
    })
    afterAll(async () => {
      await Promise.all([a?.close(), bare?.close()])
    })

    it('finds app_users (User) and its fence_token (fence); without the guard names them', async () => {
      await expect(assertFenceGuard(a.base, { models: ADVERSARIAL_MODELS })).resolves.toBeUndefined()
      const error = await refusal(assertFenceGuard(bare.base, { models: { User: 'fence', Line: 'fence' } }))
      expect(error.missing.find((m) => m.model === 'User')).toMatchObject({ table: `${bare.schema}.app_users`, name: 'app_users_fence_tombstones' })
      expect(error.message).toContain('npx fencelock-guard --table app_users --column fence_token --key id')
      expect(error.message).toContain('npx fencelock-guard --table Line --column fence --key invoiceId,no')
    })
  })

  it('checks its options before any query: unknown option, unknown model, a column that is not BigInt', async () => {
    // A client whose database does not exist: anything sent would fail differently.
    const nowhere = new PrismaClient({ adapter: new PrismaPg({ connectionString: 'postgresql://nobody@127.0.0.1:1/none' }) })
    const cases: [unknown, string][] = [
      [{ models: FENCED_MODELS, schema: 'x' }, 'schema'],
      [{ models: {} }, 'models'],
      [{ models: { Nope: 'fenceToken' } }, 'models'],
      [{ models: { Product: 'stock' } }, 'models.Product'],
      [null, 'options'],
    ]
    for (const [options, field] of cases) {
      const { error } = await settle(assertFenceGuard(nowhere, options as never))
      expect(error, field).toBeInstanceOf(InvalidFencingOptionError)
      expect((error as InvalidFencingOptionError).field).toBe(field)
    }
    expect((await settle(assertFenceGuard({} as object, { models: {} as never }))).error).toBeInstanceOf(InvalidFencingOptionError)
  })
})
