/**
 * fenceGuardPrismaModel (`fencelock-guard --prisma-model`): the tombstone table's model for
 * schema.prisma. Prisma Migrate (`migrate dev`, `migrate diff`) compares the tables its migrations
 * build with the schema's models — columns, their types and nullability, primary keys and their
 * names — and writes a DROP for a table no model lists. So the printed model must describe exactly
 * the table the guard's SQL creates: checked here against PostgreSQL's catalog, for the demo schema
 * (the same text as its hand-written models) and for @@map, @map, a nullable key and a compound key.
 */
import { readFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import type pg from 'pg'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { fenceGuardPrismaModel, InvalidFencingOptionError } from '../src/index.js'
import { readSchemaModels } from '../src/shared/prisma-schema.js'
import { createAdversarialDatabase, type AdversarialDatabase } from './support/adversarial.js'
import { createTestDatabase, type TestDatabase } from './support/database.js'

const here = dirname(fileURLToPath(import.meta.url))
const demoSchema = readFileSync(join(here, '..', '..', '..', 'prisma', 'schema.prisma'), 'utf8')
const adversarialSchema = readFileSync(join(here, 'fixtures', 'adversarial', 'schema.prisma'), 'utf8')

/** A model block without comments, one space between words: two texts that format alike compare equal. */
const normalized = (block: string) =>
  block
    .replace(/\/\/.*$/gm, '')
    .split('\n')
    .map((line) => line.trim().replace(/\s+/g, ' '))
    .filter((line) => line !== '')
    .join('\n')

const blockOf = (schema: string, model: string) => new RegExp(`^model ${model} \\{[\\s\\S]*?^\\}`, 'm').exec(schema)?.[0]

// Prisma's default column type for each scalar type on PostgreSQL (pg_type.typname).
const COLUMN_TYPE: Record<string, string> = { String: 'text', Int: 'int4', BigInt: 'int8', Boolean: 'bool', DateTime: 'timestamp' }

interface TableShape {
  columns: { name: string; type: string; nullable: boolean }[]
  primaryKey: { name: string; columns: string[] } | undefined
}

/** The table as Prisma Migrate would see it, from the printed model. */
function shapeOfModel(modelText: string): TableShape {
  const models = readSchemaModels(modelText)
  const [model] = [...(models?.values() ?? [])]
  if (model === undefined) throw new Error(`not a model: ${modelText}`)
  const columnOf = (field: string) => model.fields.get(field)?.column ?? field
  return {
    columns: [...model.fields.values()].map((f) => ({ name: f.column, type: COLUMN_TYPE[f.type] ?? `?${f.type}`, nullable: f.optional })).sort((a, b) => a.name.localeCompare(b.name)),
    primaryKey: model.primaryKey === undefined ? undefined : { name: `${model.dbName}_pkey`, columns: model.primaryKey.map(columnOf) },
  }
}

/** The table as PostgreSQL has it. */
async function shapeOfTable(admin: pg.Client, schema: string, table: string): Promise<TableShape> {
  const columns = await admin.query<{ name: string; type: string; nullable: boolean }>(
    `SELECT a.attname AS name, t.typname AS type, NOT a.attnotnull AS nullable
       FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid
      WHERE a.attrelid = format('%I.%I', $1::text, $2::text)::regclass AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attname`,
    [schema, table],
  )
  const key = await admin.query<{ name: string; columns: string[] }>(
    `SELECT c.conname AS name, array(SELECT a.attname FROM unnest(c.conkey) WITH ORDINALITY k(n, i) JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = k.n ORDER BY k.i)::text[] AS columns
       FROM pg_constraint c WHERE c.conrelid = format('%I.%I', $1::text, $2::text)::regclass AND c.contype = 'p'`,
    [schema, table],
  )
  return { columns: columns.rows.sort((a, b) => a.name.localeCompare(b.name)), primaryKey: key.rows[0] }
}

describe('fenceGuardPrismaModel', () => {
  let t: TestDatabase
  let a: AdversarialDatabase

  beforeAll(async () => {
    ;[t, a] = await Promise.all([createTestDatabase('tombstone_model'), createAdversarialDatabase('tombstone_model')])
  })

  afterAll(async () => {
    await Promise.all([t?.close(), a?.close()])
  })

  it.each([
    ['Product', 'sku', 'ProductFenceTombstone'],
    ['Order', 'id', 'OrderFenceTombstone'],
  ])('%s: the model the repository’s schema.prisma has by hand, and the table the guard made', async (table, key, model) => {
    const printed = fenceGuardPrismaModel(demoSchema, { table, column: 'fenceToken', key })
    expect(normalized(printed)).toBe(normalized(blockOf(demoSchema, model) ?? '(missing)'))
    expect(shapeOfModel(printed)).toEqual(await shapeOfTable(t.admin, t.schema, `${table}_fence_tombstones`))
  })

  it.each([
    // @@map("app_users"), key email_address (@map of email, nullable in the table: required in the tombstones), fence_token (@map of fence).
    [{ table: 'app_users', column: 'fence_token', key: 'email_address' }, ['model UserFenceTombstone {', 'email String @id @map("email_address")', 'fence BigInt @map("fence_token")', '@@map("app_users_fence_tombstones")']],
    // A compound key: @@id.
    [{ table: 'Line', column: 'fence', key: ['invoiceId', 'no'] }, ['model LineFenceTombstone {', 'invoiceId Int', 'no Int', 'fence BigInt', '@@id([invoiceId, no])', '@@map("Line_fence_tombstones")']],
  ])('names the database sees: %j', async (options, lines) => {
    const printed = fenceGuardPrismaModel(adversarialSchema, options)
    expect(normalized(printed).split('\n')).toEqual([...lines, '}'])
    expect(shapeOfModel(printed)).toEqual(await shapeOfTable(a.admin, a.schema, `${options.table}_fence_tombstones`))
  })

  it('copies a key’s native type and the printed text is a schema Prisma reads', () => {
    const schema = 'model Invoice {\n  number     String @id @db.VarChar(32)\n  fenceToken BigInt @default(0) @map("fence")\n\n  @@map("invoices")\n}\n'
    const printed = fenceGuardPrismaModel(schema, { table: 'invoices', column: 'fence', key: 'number' })
    expect(normalized(printed).split('\n')).toEqual(['model InvoiceFenceTombstone {', 'number String @id @db.VarChar(32)', 'fenceToken BigInt @map("fence")', '@@map("invoices_fence_tombstones")', '}'])
    expect(readSchemaModels(`${schema}\n${printed}`)?.get('InvoiceFenceTombstone')?.primaryKey).toEqual(['number'])
  })

  it('refuses a table no model has, or a column its model does not have, naming what there is', () => {
    const refused = (f: () => unknown) => {
      try {
        f()
      } catch (error) {
        expect(error).toBeInstanceOf(InvalidFencingOptionError)
        return `${(error as InvalidFencingOptionError).field}: ${(error as InvalidFencingOptionError).rule}`
      }
      throw new Error('not refused')
    }
    expect(refused(() => fenceGuardPrismaModel(demoSchema, { table: 'Invoice', column: 'fenceToken', key: 'id' }))).toMatch(/^table: must be the table of a model of the schema \((?=[^)]*\bProduct\b)(?=[^)]*\bOrder\b)/)
    expect(refused(() => fenceGuardPrismaModel(demoSchema, { table: 'Product', column: 'fenceToken', key: 'code' }))).toMatch(/^key: must be a column of Product \(id, sku, /)
    expect(refused(() => fenceGuardPrismaModel(demoSchema, { table: 'Product', column: 'fence', key: 'sku' }))).toMatch(/^column: must be a column of Product/)
    expect(refused(() => fenceGuardPrismaModel('not a schema {', { table: 'Product', column: 'fenceToken', key: 'sku' }))).toMatch(/^schemaText: /)
  })
})
