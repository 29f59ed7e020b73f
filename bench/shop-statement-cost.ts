// `node --import tsx bench/shop-statement-cost.ts [--n 2000] [--rounds 3]`: what one statement costs
// the process that sends it, on this stack (issue 34: "Prisma's own cost per statement beside
// pg's"): the same statements on the shop's schema, one at a time on one connection, through `pg`,
// through Prisma 7 with the pg adapter (the shop's client), and through the shop's fenced client
// (the fencing extension's `$fenced(token)` view). CPU is the process's own (process.cpuUsage: user
// + system, µs per statement), so it counts the client's work, not PostgreSQL's; wall time is shown
// beside it. Cases interleave over rounds; the median round is reported. Prints a table; writes
// nothing.
import { parseArgs } from 'node:util'
import { fencedShopClient } from '@fencelock/demo-shop/protection'
import { createPrisma, dropShopSchema, prepareShopSchema, type DatabaseLocation } from '@fencelock/demo-shop/database'
import { databaseTarget } from '@fencelock/devkit/database-url'
import pg from 'pg'
import { loadAverage } from './support/machine.js'
import { median } from './support/stats.js'

const { values } = parseArgs({ options: { n: { type: 'string', default: '2000' }, rounds: { type: 'string', default: '3' } } })
const n = Number(values.n)
const rounds = Number(values.rounds)
if (!Number.isInteger(n) || n < 10 || n > 100_000) throw new RangeError('--n must be an integer from 10 to 100000')
if (!Number.isInteger(rounds) || rounds < 1 || rounds > 20) throw new RangeError('--rounds must be an integer from 1 to 20')

const { connectionString } = databaseTarget()
const location: DatabaseLocation = { connectionString, schema: `stmt_cost_${process.pid}` }
await prepareShopSchema(location, [{ sku: 'cost-1', name: 'cost', priceCents: 100, stock: 1_000_000 }])
const prisma = createPrisma(location, 1)
const fenced = fencedShopClient(prisma)
const pool = new pg.Pool({ connectionString, max: 1, application_name: location.schema })
const s = `"${location.schema}"`
const sku = 'cost-1'
const token = 1_000n

/** One case: `op` sends one statement, or one transaction of one statement. */
const CASES: ReadonlyArray<{ name: string; op: () => Promise<unknown> }> = [
  { name: 'read by key: pg', op: () => pool.query(`SELECT id, sku, name, "priceCents", stock, "fenceToken" FROM ${s}."Product" WHERE sku = $1`, [sku]) },
  { name: 'read by key: Prisma', op: () => prisma.product.findUnique({ where: { sku } }) },
  { name: 'update by key: pg', op: () => pool.query(`UPDATE ${s}."Product" SET stock = stock WHERE sku = $1 RETURNING *`, [sku]) },
  { name: 'update by key: Prisma', op: () => prisma.product.update({ where: { sku }, data: { stock: { increment: 0 } } }) },
  { name: 'update by key: Prisma, fenced', op: () => fenced.$fenced(token).product.update({ where: { sku }, data: { stock: { increment: 0 } } }) },
  {
    name: 'transaction of one update: pg',
    op: async () => {
      const client = await pool.connect()
      try {
        await client.query('BEGIN')
        await client.query(`UPDATE ${s}."Product" SET stock = stock WHERE sku = $1 RETURNING *`, [sku])
        await client.query('COMMIT')
      } finally {
        client.release()
      }
    },
  },
  { name: 'transaction of one update: Prisma', op: () => prisma.$transaction((tx) => tx.product.update({ where: { sku }, data: { stock: { increment: 0 } } })) },
  {
    name: 'transaction of one update: Prisma, fenced',
    op: () => fenced.$transaction((tx) => tx.$fenced(token).product.update({ where: { sku }, data: { stock: { increment: 0 } } })),
  },
  // The array form: the same BEGIN, statement, COMMIT, without the interactive transaction's round trips through the client.
  { name: 'transaction of one update: Prisma, array form', op: () => prisma.$transaction([prisma.product.update({ where: { sku }, data: { stock: { increment: 0 } } })]) },
  {
    name: 'transaction of one update: Prisma, fenced, array form',
    op: () => fenced.$transaction([fenced.$fenced(token).product.update({ where: { sku }, data: { stock: { increment: 0 } } })]),
  },
]

async function measure(op: () => Promise<unknown>, count: number): Promise<{ cpuUs: number; wallUs: number }> {
  const cpu = process.cpuUsage()
  const wall = performance.now()
  for (let i = 0; i < count; i++) await op()
  const used = process.cpuUsage(cpu)
  return { cpuUs: (used.user + used.system) / count, wallUs: ((performance.now() - wall) * 1000) / count }
}

console.log(`load average before: ${loadAverage()}`)
try {
  // The fenced view writes the token once: the row's fence is then the token, and every later write equal to it passes.
  for (const c of CASES) await measure(c.op, Math.ceil(n / 10))
  const results = new Map<string, Array<{ cpuUs: number; wallUs: number }>>()
  for (let round = 0; round < rounds; round++) {
    for (const c of round % 2 === 0 ? CASES : [...CASES].reverse()) {
      const r = await measure(c.op, n)
      results.set(c.name, [...(results.get(c.name) ?? []), r])
    }
  }
  const pgOf = (name: string) => median((results.get(`${name.split(':')[0]}: pg`) ?? []).map((r) => r.cpuUs))
  console.log(`\n${n} each, ${rounds} rounds, one connection; median round\n`)
  console.log('| statement | client CPU µs | wall µs | CPU / pg |')
  console.log('| --- | ---: | ---: | ---: |')
  for (const c of CASES) {
    const list = results.get(c.name) ?? []
    const cpuUs = median(list.map((r) => r.cpuUs))
    console.log(`| ${c.name} | ${cpuUs.toFixed(0)} | ${median(list.map((r) => r.wallUs)).toFixed(0)} | ×${(cpuUs / pgOf(c.name)).toFixed(1)} |`)
  }
} finally {
  await prisma.$disconnect()
  await pool.end()
  await dropShopSchema(location)
}
console.log(`\nload average after: ${loadAverage()}`)
