/**
 * Issue 24, cases 1–4, on a schema of the issue's own (test/fixtures/adversarial): a fence column
 * under another name (@map), a @@map-ed table, a unique, nullable, @map-ed email, a compound id,
 * Account → Invoice → Line cascades, a relation named `data`, a 40-hop self-relation, a user's own
 * extension methods. Each case also runs its unprotected variant — the call as the extension (or
 * the guard) once let it through — and counts where the effect lands, in the database.
 */
import { Prisma } from '@prisma/client/extension'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { fencing, isFenceGuardError, StaleFencingTokenError, UnsupportedFencedWriteError } from '../src/index.js'
import { ADVERSARIAL_MODELS, createAdversarialDatabase, type AdversarialDatabase, type AdversarialPrismaClient } from './support/adversarial.js'
import { createTestDatabase, GUARD_UPGRADES, settle, uniqueSku, type TestDatabase } from './support/database.js'

let g: AdversarialDatabase
let u: AdversarialDatabase

beforeAll(async () => {
  ;[g, u] = await Promise.all([createAdversarialDatabase('adv'), createAdversarialDatabase('adv_plain', { guard: false })])
})

afterAll(async () => {
  await Promise.all([g?.close(), u?.close()])
})

let emails = 0
const email = () => `${uniqueSku('user')}-${++emails}@x`

describe('1. a re-keyed key under a newer token cannot be taken back by an older one', () => {
  it('a fenced update by 30 that moves a@x to b@x leaves a@x at 30: token 20 cannot create a@x again (@map-ed column and key, @@map-ed table)', async () => {
    const a = email()
    const user = await g.db.$fenced(10n).user.create({ data: { email: a } })
    await g.db.$fenced(30n).user.update({ where: { id: user.id }, data: { email: email() } })
    const stale = await settle(g.db.$fenced(20n).user.create({ data: { email: a } }))
    expect(stale.error).toBeInstanceOf(StaleFencingTokenError)
    expect(stale.error).toMatchObject({ model: 'User', token: 20n, storedToken: 30n })
    expect(await g.base.user.count({ where: { email: a } })).toBe(0)
    expect(await g.db.$fenced(30n).user.create({ data: { email: a } })).toMatchObject({ email: a, fence: 30n })
  })

  let first: TestDatabase
  beforeAll(async () => {
    first = await createTestDatabase('rekey_first', { leaveOut: GUARD_UPGRADES })
  })
  afterAll(async () => {
    await first?.close()
  })

  it('control: with the guard as first installed the old key kept the row’s old fence (10), and token 20 took it back', async () => {
    const sku = uniqueSku('rekey')
    const p = await first.db.$fenced(10n).product.create({ data: { sku, name: 'n', priceCents: 1, stock: 1 } })
    await first.db.$fenced(30n).product.update({ where: { id: p.id }, data: { sku: uniqueSku('moved') } })
    expect(await first.base.productFenceTombstone.findUnique({ where: { sku } })).toEqual({ sku, fenceToken: 10n })
    expect(await first.db.$fenced(20n).product.create({ data: { sku, name: 'again', priceCents: 1, stock: 1 } })).toMatchObject({ sku, fenceToken: 20n })
  })
})

describe('2. a fenced delete deletes the rows its filter matched before the raise', () => {
  it('deleteMany on an @updatedAt filter ("purge rows older than X") deletes them; read again after the raise, it deleted nothing and kept the raise', async () => {
    const name = uniqueSku('purge')
    const old = new Date('2020-01-01T00:00:00Z')
    const cutoff = new Date('2021-01-01T00:00:00Z')
    const [x, y] = [await g.base.user.create({ data: { email: email(), name, fence: 1n, updatedAt: old } }), await g.base.user.create({ data: { email: email(), name, fence: 1n, updatedAt: old } })]
    expect(await g.db.$fenced(5n).user.deleteMany({ where: { name, updatedAt: { lt: cutoff } } })).toEqual({ count: 2 })
    expect(await g.base.user.count({ where: { id: { in: [x.id, y.id] } } })).toBe(0)

    // The unprotected variant, as the extension once ran it: raise with the filter, delete with
    // the filter again. @updatedAt moved on the raise.
    const other = uniqueSku('purge')
    const z = await g.base.user.create({ data: { email: email(), name: other, fence: 1n, updatedAt: old } })
    await g.base.user.updateMany({ where: { name: other, updatedAt: { lt: cutoff }, fence: { lte: 5n } }, data: { fence: 5n } })
    expect(await g.base.user.deleteMany({ where: { name: other, updatedAt: { lt: cutoff }, fence: 5n } })).toEqual({ count: 0 })
    expect(await g.base.user.findUniqueOrThrow({ where: { id: z.id } })).toMatchObject({ fence: 5n })
  })

  it('delete with the row’s current updatedAt in its filter deletes it (was P2025); a compound id deletes by its key', async () => {
    const user = await g.base.user.create({ data: { email: email(), fence: 1n } })
    expect(await g.db.$fenced(5n).user.delete({ where: { id: user.id, updatedAt: user.updatedAt } })).toMatchObject({ id: user.id, fence: 5n })
    expect(await g.base.user.findUnique({ where: { id: user.id } })).toBeNull()

    const account = await g.base.account.create({ data: {} })
    const invoice = await g.base.invoice.create({ data: { accountId: account.id } })
    await g.base.line.createMany({ data: [1, 2, 3].map((no) => ({ invoiceId: invoice.id, no, amount: no, fence: 1n })) })
    expect(await g.db.$fenced(5n).line.deleteMany({ where: { invoiceId: invoice.id, amount: { gte: 2 } } })).toEqual({ count: 2 })
    expect(await g.db.$fenced(5n).line.delete({ where: { invoiceId_no: { invoiceId: invoice.id, no: 1 } } })).toMatchObject({ no: 1, fence: 5n })
    expect(await g.base.line.count({ where: { invoiceId: invoice.id } })).toBe(0)
  })

  it('a stale deleteMany is refused and keeps nothing: no fence raised, no row deleted', async () => {
    const name = uniqueSku('stale')
    const mine = await g.base.user.create({ data: { email: email(), name, fence: 1n } })
    const newer = await g.base.user.create({ data: { email: email(), name, fence: 9n } })
    const stale = await settle(g.db.$fenced(5n).user.deleteMany({ where: { name } }))
    expect(stale.error).toMatchObject({ name: 'StaleFencingTokenError', storedToken: 9n })
    expect(await g.base.user.findMany({ where: { name }, orderBy: { id: 'asc' } })).toEqual([mine, newer])
  })
})

describe('3. a fenced delete does not cascade over fenced rows', () => {
  it('deleting an Account whose Invoice holds a newer token is refused, naming the relation; nothing is deleted', async () => {
    const account = await g.base.account.create({ data: { fence: 5n } })
    const invoice = await g.base.invoice.create({ data: { accountId: account.id, fence: 7n } })
    const removes: (() => Promise<unknown>)[] = [() => g.db.$fenced(6n).account.delete({ where: { id: account.id } }), () => g.db.$fenced(6n).account.deleteMany({ where: { id: account.id } })]
    for (const remove of removes) {
      const refused = await settle(remove())
      expect(refused.error).toBeInstanceOf(UnsupportedFencedWriteError)
      expect(refused.error).toMatchObject({ model: 'Account', reason: 'cascade', field: 'invoices' })
    }
    // Through unfenced models too: Region → Ledger → Account.
    const region = await g.base.region.create({ data: { ledgers: { create: { accounts: { create: { fence: 9n } } } } } })
    const viaRegion = await settle(g.db.$fenced(6n).region.delete({ where: { id: region.id } }))
    expect(viaRegion.error).toMatchObject({ model: 'Region', reason: 'cascade', field: 'ledgers.accounts' })
    // A nested delete of an unfenced row that would cascade to a fenced one.
    const nested = await settle(g.db.$fenced(6n).region.update({ where: { id: region.id }, data: { ledgers: { deleteMany: {} } } }))
    expect(nested.error).toMatchObject({ model: 'Region', reason: 'cascade', field: 'ledgers.deleteMany→accounts' })
    expect(await g.base.invoice.findUniqueOrThrow({ where: { id: invoice.id } })).toEqual(invoice)
    expect(await g.base.account.count({ where: { ledger: { regionId: region.id } } })).toBe(1)
    // Refused before any query, whatever rows exist: Invoice itself cascades to the fenced Line.
    expect((await settle(g.db.$fenced(7n).invoice.delete({ where: { id: invoice.id } }))).error).toMatchObject({ reason: 'cascade', field: 'lines' })
  })

  it('control: the same delete as the extension let it through: the Invoice written under 7 goes with it, and its tombstone keeps 7, not the deleter’s 6', async () => {
    const account = await g.base.account.create({ data: { fence: 5n } })
    const invoice = await g.base.invoice.create({ data: { accountId: account.id, fence: 7n } })
    await g.base.$transaction([g.base.account.update({ where: { id: account.id }, data: { fence: 6n } }), g.base.account.delete({ where: { id: account.id } })])
    expect(await g.base.invoice.findUnique({ where: { id: invoice.id } })).toBeNull()
    const [tombstone] = await g.base.$queryRawUnsafe<{ fence: bigint }[]>(`SELECT fence FROM "${g.schema}"."Invoice_fence_tombstones" WHERE id = $1`, invoice.id)
    expect(tombstone).toEqual({ fence: 7n })
  })
})

describe('4. the nested-write check walks Prisma’s grammar and fails closed', () => {
  async function folderWithDoc(db: AdversarialDatabase) {
    const account = await db.base.account.create({ data: { balance: 100, fence: 50n } })
    const folder = await db.base.folder.create({ data: {} })
    const doc = await db.base.doc.create({ data: { folder: { connect: { id: folder.id } }, account: { connect: { id: account.id } }, data: { create: { text: 'before' } } } })
    return { account, folder, doc }
  }

  /** Folder → docs → update → data → account → update: through a model whose relation is named `data`. */
  const throughData = (id: number, docId: number) =>
    ({ where: { id }, data: { docs: { update: { where: { id: docId }, data: { account: { update: { balance: 2 } } } } } } }) as const

  it('(a) a relation named `data` does not hide a nested write into a fenced model', async () => {
    const { account, folder, doc } = await folderWithDoc(g)
    const refused = await settle(g.db.$fenced(1n).folder.update(throughData(folder.id, doc.id)))
    expect(refused.error).toBeInstanceOf(UnsupportedFencedWriteError)
    expect(refused.error).toMatchObject({ model: 'Folder', reason: 'nested-write', field: 'docs.update.data.account' })
    expect(await g.base.account.findUniqueOrThrow({ where: { id: account.id } })).toEqual(account)
  })

  it('(a) control: the same call, unfenced, writes the fenced Account (balance 100 → 2, fence still 50)', async () => {
    const { account, folder, doc } = await folderWithDoc(u)
    await u.base.folder.update(throughData(folder.id, doc.id))
    expect(await u.base.account.findUniqueOrThrow({ where: { id: account.id } })).toMatchObject({ balance: 2, fence: 50n })
  })

  it('(a) harmless calls pass: a write through the `data` relation itself, a Json value shaped like a nested write, relation filters in nested connect and delete', async () => {
    const { account, folder, doc } = await folderWithDoc(g)
    const fenced = g.db.$fenced(1n)
    await fenced.folder.update({ where: { id: folder.id }, data: { docs: { update: { where: { id: doc.id }, data: { data: { update: { text: 'after' } } } } } } })
    expect(await g.base.docData.findFirstOrThrow({ where: { doc: { id: doc.id } } })).toMatchObject({ text: 'after' })
    await fenced.doc.update({ where: { id: doc.id }, data: { meta: { account: { update: { balance: 2 } } } } })
    const other = await g.base.folder.create({ data: {} })
    await fenced.folder.update({ where: { id: other.id }, data: { docs: { connect: { id: doc.id, account: { is: { balance: 100 } } } } } })
    await fenced.folder.update({ where: { id: other.id }, data: { docs: { delete: { id: doc.id, account: { is: { balance: 100 } } } } } })
    await fenced.folder.update({ where: { id: other.id }, data: { docs: { deleteMany: { accountId: account.id } } } })
    expect(await g.base.doc.findUnique({ where: { id: doc.id } })).toBeNull()
    expect(await g.base.account.findUniqueOrThrow({ where: { id: account.id } })).toEqual(account)
  })

  /** A chain of `hops` Nodes whose last points at `accountId`, and the nested update that reaches it from the first. */
  async function chain(db: AdversarialDatabase, hops: number, accountId: number) {
    let node = await db.base.node.create({ data: { accountId } })
    for (let i = 0; i < hops; i++) node = await db.base.node.create({ data: { child: { connect: { id: node.id } } } })
    let data: Record<string, unknown> = { account: { update: { balance: 2 } } }
    for (let i = 0; i < hops; i++) data = { child: { update: data } }
    return { first: node.id, data }
  }

  it('(b) 40 self-relation hops deep, the write into the fenced Account is still refused', async () => {
    const account = await g.base.account.create({ data: { balance: 100, fence: 50n } })
    const { first, data } = await chain(g, 40, account.id)
    const refused = await settle(g.db.$fenced(1n).node.update({ where: { id: first }, data: data as never }))
    expect(refused.error).toMatchObject({ name: 'UnsupportedFencedWriteError', reason: 'nested-write' })
    expect((refused.error as UnsupportedFencedWriteError).field).toMatch(/^(child\.update\.){40}account$/)
    expect(await g.base.account.findUniqueOrThrow({ where: { id: account.id } })).toEqual(account)
    // Cyclic arguments fail closed too.
    const cyclic: Record<string, unknown> = {}
    cyclic.child = { update: cyclic }
    expect((await settle(g.db.$fenced(1n).node.update({ where: { id: first }, data: cyclic as never }))).error).toMatchObject({ reason: 'nested-write' })
  })

  it('(b) control: unfenced, the write 40 hops deep lands on the fenced Account', async () => {
    const account = await u.base.account.create({ data: { balance: 100, fence: 50n } })
    const { first, data } = await chain(u, 40, account.id)
    await u.base.node.update({ where: { id: first }, data: data as never })
    expect(await u.base.account.findUniqueOrThrow({ where: { id: account.id } })).toMatchObject({ balance: 2, fence: 50n })
  })

  /** A user's own extension: `account.credit(id, amount)` through `getExtensionContext(this)`. */
  const credit = Prisma.defineExtension({
    name: 'credit',
    model: {
      account: {
        credit(id: number, amount: number) {
          const account = Prisma.getExtensionContext(this) as unknown as { update(args: object): Promise<{ balance: number }> }
          return account.update({ where: { id }, data: { balance: { increment: amount } } })
        },
      },
    },
  })
  const fencingExtension = fencing({ models: ADVERSARIAL_MODELS })
  const orders: [string, (base: AdversarialPrismaClient) => unknown][] = [
    ['credit, then fencing', (base) => base.$extends(credit).$extends(fencingExtension)],
    ['fencing, then credit', (base) => base.$extends(fencingExtension).$extends(credit)],
  ]

  it.each(orders)('(c) a user’s extension method called on the fenced view writes fenced (%s)', async (_label, extend) => {
    const db = extend(g.base) as { $fenced(t: bigint): { account: { credit(id: number, amount: number): Promise<unknown> } } }
    const account = await g.base.account.create({ data: { balance: 100, fence: 50n } })
    const stale = await settle(db.$fenced(1n).account.credit(account.id, 5))
    expect(stale.error).toBeInstanceOf(StaleFencingTokenError)
    expect(await db.$fenced(60n).account.credit(account.id, 5)).toMatchObject({ balance: 105, fence: 60n })
    // Control: the method as the view once bound it (to the unfenced delegate) writes under any token.
    const unfenced = (extend(g.base) as { account: { credit(id: number, amount: number): Promise<unknown> } }).account
    await unfenced.credit(account.id, 1)
    expect(await g.base.account.findUniqueOrThrow({ where: { id: account.id } })).toMatchObject({ balance: 106, fence: 60n })
  })

  it('(c) a client extended from a fenced view is fenced too', async () => {
    const account = await g.base.account.create({ data: { balance: 100, fence: 50n } })
    const extended = g.db.$fenced(1n).$extends({})
    const stale = await settle(extended.account.update({ where: { id: account.id }, data: { balance: 2 } }))
    expect(stale.error).toBeInstanceOf(StaleFencingTokenError)
    expect(await g.base.account.findUniqueOrThrow({ where: { id: account.id } })).toEqual(account)
  })
})

describe('8. the fluent API on a fenced write', () => {
  it('update(...).invoices() resolves to the relation as Prisma’s own does, fenced; chained, and stale, too', async () => {
    // Before: a TypeError (the fenced write's promise had no relation methods).
    const account = await g.base.account.create({ data: { fence: 5n, invoices: { create: [{ fence: 1n }, { fence: 1n }] } } })
    const plain = await g.base.account.update({ where: { id: account.id }, data: { balance: 1 } }).invoices()
    const fenced = await g.db.$fenced(6n).account.update({ where: { id: account.id }, data: { balance: 2 } }).invoices({ orderBy: { id: 'asc' } })
    expect(fenced).toEqual(plain.sort((a, b) => a.id - b.id))
    expect(await g.base.account.findUniqueOrThrow({ where: { id: account.id } })).toMatchObject({ balance: 2, fence: 6n })
    const [first] = fenced
    const owner = await g.db.$fenced(7n).invoice.update({ where: { id: first!.id }, data: { total: 3 } }).account()
    expect(owner).toMatchObject({ id: account.id })
    expect(await g.db.$fenced(7n).invoice.update({ where: { id: first!.id }, data: { total: 4 } }).account().ledger()).toBeNull()
    const stale = await settle(g.db.$fenced(1n).account.update({ where: { id: account.id }, data: { balance: 0 } }).invoices())
    expect(stale.error).toBeInstanceOf(StaleFencingTokenError)
    expect(await g.base.account.findUniqueOrThrow({ where: { id: account.id } })).toMatchObject({ balance: 2, fence: 6n })
  })
})

describe('the guard on the @map-ed names', () => {
  it('refuses a raw UPDATE that lowers fence_token of app_users', async () => {
    const user = await g.base.user.create({ data: { email: email(), fence: 7n } })
    const lowered = await settle(g.base.$executeRawUnsafe(`UPDATE "${g.schema}"."app_users" SET fence_token = 1 WHERE id = $1`, user.id))
    expect(isFenceGuardError(lowered.error)).toBe(true)
  })
})
