// `npm run bench:fencing [-- --iterations N --rounds R --no-docs]`: what fencing costs, against
// the real PostgreSQL (DATABASE_URL, default postgresql://postgres@127.0.0.1:5432/test), in one
// run, on two schemas migrated alike except for the database guard's migration: a fenced update
// vs a plain Prisma update of the same row (both on the guarded table), the guard's own cost (the
// same plain update, raw UPDATE and INSERT on a guarded vs an unguarded table), a fenced
// updateMany vs a plain one, a fenced delete vs a plain one, and fencedTransaction vs a plain
// interactive transaction doing the same writes. Targets: fenced update p50 at most 1.15x the
// plain update's, the guard's cost on a plain update at most 1.05x. Writes its section of
// docs/BENCHMARKS.md between the bench:fencing markers.
//
// Calls are sequential (one in flight), so each sample is one call's latency, not a throughput
// share. The cases are interleaved in rounds, each round in a fresh random order, so a drift of
// the machine's load (it is shared) spreads over all cases instead of landing on one.
import { randomBytes } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { availableParallelism, cpus, loadavg } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { PrismaPg } from '@prisma/adapter-pg'
import pg from 'pg'
import { fencedTransaction, fencing } from '@fencelock/fencing'
import { PrismaClient } from '../generated/prisma/client.js'
import { connectDatabase, databaseTarget } from '@fencelock/devkit/database-url'
import { applyMigrations, readMigrations } from '@fencelock/devkit/migrations'
import { integerFlag, runCommand, type CliSpec, type CliValues } from '@fencelock/devkit/cli'
import { writeMarkedSection } from './support/docs-section.js'

const root = join(dirname(fileURLToPath(import.meta.url)), '..')
const TARGET_FENCED_P50 = 1.15
const TARGET_GUARD_P50 = 1.05
/** The migrations that install the database guard and bring it up to date; the unguarded schema is migrated without them. */
const GUARD_MIGRATIONS: ReadonlySet<string> = new Set(['20261126000000_fence_guard', '20261201000000_fence_guard_token'])
const TOKEN = 1_000_000n

const CLI: CliSpec = {
  command: 'npm run bench:fencing --',
  summary: 'What fencing costs against the real PostgreSQL: fenced vs plain writes, the database guard (guarded vs unguarded twin schemas), client side and in the executor alone. Writes its section of docs/BENCHMARKS.md.',
  flags: {
    iterations: { type: 'string', value: '<n>', description: 'calls per case, 1-1000000', default: 3_000 },
    rounds: { type: 'string', value: '<n>', description: 'interleaved rounds, 1-1000', default: 20 },
    'no-docs': { type: 'boolean', description: 'leave docs/BENCHMARKS.md untouched' },
  },
  notes: 'DATABASE_URL: default postgresql://postgres@127.0.0.1:5432/test. A missed target is reported, and the exit code stays 0.',
  failure: 'it broke off with an error',
}

interface Args {
  iterations: number
  rounds: number
  docs: boolean
}

function parseCli(values: CliValues): Args {
  const iterations = integerFlag(values, 'iterations', 3_000, 1, 1_000_000)
  return { iterations, rounds: Math.min(integerFlag(values, 'rounds', 20, 1, 1_000), iterations), docs: values['no-docs'] !== true }
}

/** The q-quantile (0..1), linear between closest ranks, of an ascending array. */
function quantile(sorted: Float64Array, q: number): number {
  const pos = (sorted.length - 1) * q
  const lo = Math.floor(pos)
  const hi = Math.ceil(pos)
  return sorted[lo]! + (sorted[hi]! - sorted[lo]!) * (pos - lo)
}

interface Case {
  readonly key: string
  readonly label: string
  /** The case this one is compared with ("vs plain"). */
  readonly baseline?: string
  /** Share of `iterations` this case runs (transactions are slower; fewer samples suffice). */
  readonly share: number
  readonly run: () => Promise<unknown>
}

/** What the purchase needs of a client; the plain and the fenced transaction clients both fit. */
interface PurchaseClient {
  product: {
    findUniqueOrThrow(args: { where: { id: number } }): PromiseLike<{ stock: number }>
    update(args: { where: { id: number }; data: { stock: number } }): PromiseLike<unknown>
  }
  order: { create(args: { data: { productId: number; buyerId: string; quantity: number } }): PromiseLike<unknown> }
}

interface Result {
  readonly label: string
  readonly baseline: string | undefined
  readonly n: number
  readonly p50: number
  readonly p99: number
  readonly mean: number
}

async function main(values: CliValues): Promise<number> {
  const args = parseCli(values)
  const { connectionString } = databaseTarget()
  const suffix = `${process.pid}_${randomBytes(3).toString('hex')}`
  const schema = `bench_fencing_${suffix}`
  const bareSchema = `bench_fencing_bare_${suffix}`
  const admin = new pg.Client({ connectionString })
  await connectDatabase(admin, connectionString)
  const loadBefore = loadavg()
  const base = new PrismaClient({ adapter: new PrismaPg({ connectionString }, { schema }) })
  const bare = new PrismaClient({ adapter: new PrismaPg({ connectionString }, { schema: bareSchema }) })
  try {
    const migrations = await readMigrations()
    await applyMigrations(admin, { schema, migrations })
    await applyMigrations(admin, { schema: bareSchema, migrations: migrations.filter((m) => !GUARD_MIGRATIONS.has(m.name)) })
    const pgVersion = String((await admin.query('SHOW server_version')).rows[0]?.server_version ?? 'unknown')
    const db = base.$extends(fencing({ models: { Product: 'fenceToken', Order: 'fenceToken' } }))
    const seed = (client: PrismaClient, sku: string, stock: number) => client.product.create({ data: { sku, name: 'bench', priceCents: 100, stock, fenceToken: TOKEN } })
    const updated = await seed(base, 'BENCH-UPDATE', 0)
    const bareUpdated = await seed(bare, 'BENCH-UPDATE', 0)
    const many = await seed(base, 'BENCH-MANY', 0)
    const bought = await seed(base, 'BENCH-TX', 1_000_000_000)
    const table = `"${schema}"."Product"`
    const bareTable = `"${bareSchema}"."Product"`
    // Calls a case makes in all (warm-up and rounds, as the loops below count them).
    const callsOf = (share: number) => Math.ceil(200 * share) + args.rounds * Math.max(1, Math.round((args.iterations * share) / args.rounds))
    // A delete needs a row per call: created up front (not timed), handed out one per call.
    const deletable = async (label: string, share: number) => {
      const data = Array.from({ length: callsOf(share) }, (_, i) => ({ sku: `BENCH-DELETE-${label}-${i}`, name: 'bench', priceCents: 100, stock: 0, fenceToken: TOKEN }))
      const ids = (await base.product.createManyAndReturn({ data, select: { id: true } })).map((r) => r.id)
      return () => {
        const id = ids.pop()
        if (id === undefined) throw new Error(`bench:fencing ran out of rows to delete (${label})`)
        return id
      }
    }
    const plainDeleted = await deletable('plain', 1 / 3)
    const fencedDeleted = await deletable('fenced', 1 / 3)

    // The same writes for both transaction cases: read the stock, write it back decremented,
    // create the order — the demo's purchase.
    const purchase = async (tx: PurchaseClient) => {
      const p = await tx.product.findUniqueOrThrow({ where: { id: bought.id } })
      await tx.product.update({ where: { id: bought.id }, data: { stock: p.stock - 1 } })
      return tx.order.create({ data: { productId: bought.id, buyerId: 'bench', quantity: 1 } })
    }
    const increment = { stock: { increment: 1 } }
    const cases: Case[] = [
      { key: 'bare', label: 'plain Prisma `update` of one row, **unguarded** table', share: 1, run: () => bare.product.update({ where: { id: bareUpdated.id }, data: increment }) },
      { key: 'plain', label: 'plain Prisma `update` of one row, guarded table', baseline: 'bare', share: 1, run: () => base.product.update({ where: { id: updated.id }, data: increment }) },
      {
        key: 'extended',
        label: 'same, on the extended client outside `$fenced`',
        baseline: 'plain',
        share: 1,
        run: () => db.product.update({ where: { id: updated.id }, data: increment }),
      },
      {
        key: 'fenced',
        label: '**fenced `update`**: `db.$fenced(t).product.update`, guarded table',
        baseline: 'plain',
        share: 1,
        run: () => db.$fenced(TOKEN).product.update({ where: { id: updated.id }, data: increment }),
      },
      // The same statements straight through `pg`, without Prisma: what the database alone adds
      // for the guard's trigger, and for the fence's predicate and assignment.
      { key: 'sqlBare', label: 'raw SQL through `pg`: the plain `UPDATE`, unguarded table', share: 1, run: () => admin.query(`UPDATE ${bareTable} SET stock = stock + 1 WHERE id = $1 RETURNING *`, [bareUpdated.id]) },
      { key: 'sql', label: 'raw SQL through `pg`: the plain `UPDATE`, guarded table', baseline: 'sqlBare', share: 1, run: () => admin.query(`UPDATE ${table} SET stock = stock + 1 WHERE id = $1 RETURNING *`, [updated.id]) },
      {
        key: 'sqlFenced',
        label: 'raw SQL through `pg`: the fenced `UPDATE`, guarded table',
        baseline: 'sql',
        share: 1,
        run: () => admin.query(`UPDATE ${table} SET stock = stock + 1, "fenceToken" = $2 WHERE id = $1 AND "fenceToken" <= $2 RETURNING *`, [updated.id, TOKEN]),
      },
      // An INSERT on a guarded table also writes the key's tombstone.
      { key: 'createBare', label: 'plain Prisma `create` of an order, unguarded table', share: 1 / 3, run: () => bare.order.create({ data: { productId: bareUpdated.id, buyerId: 'bench', quantity: 1 } }) },
      { key: 'create', label: 'plain Prisma `create` of an order, guarded table', baseline: 'createBare', share: 1 / 3, run: () => base.order.create({ data: { productId: updated.id, buyerId: 'bench', quantity: 1 } }) },
      // A fenced updateMany writes and checks in one transaction of its own.
      { key: 'many', label: 'plain Prisma `updateMany` (one row), guarded table', share: 1 / 3, run: () => base.product.updateMany({ where: { id: many.id }, data: increment }) },
      {
        key: 'fencedMany',
        label: 'fenced `updateMany` (write + check in one transaction)',
        baseline: 'many',
        share: 1 / 3,
        run: () => db.$fenced(TOKEN).product.updateMany({ where: { id: many.id }, data: increment }),
      },
      // A fenced delete raises the fence (so the guard's tombstone keeps the deleting token), then
      // deletes, in one transaction of its own.
      { key: 'delete', label: 'plain Prisma `delete` of one row, guarded table', share: 1 / 3, run: () => base.product.delete({ where: { id: plainDeleted() } }) },
      {
        key: 'fencedDelete',
        label: 'fenced `delete` (fence raised, then deleted, in one transaction)',
        baseline: 'delete',
        share: 1 / 3,
        run: () => db.$fenced(TOKEN).product.delete({ where: { id: fencedDeleted() } }),
      },
      { key: 'tx', label: 'plain interactive `$transaction` (read, update, create order)', share: 1 / 3, run: () => base.$transaction((tx) => purchase(tx)) },
      {
        key: 'ftx',
        label: '`fencedTransaction` (fence raised first, then the same)',
        baseline: 'tx',
        share: 1 / 3,
        run: () => fencedTransaction(db, TOKEN, { model: 'Product', where: { id: bought.id } }, (tx) => purchase(tx)),
      },
    ]

    // Warm-up: connections, prepared plans, JIT; not measured.
    for (const c of cases) for (let i = 0; i < 200 * c.share; i++) await c.run()

    const samples = new Map(cases.map((c) => [c.key, [] as number[]]))
    console.error(`[bench:fencing] ${args.iterations} calls per case in ${args.rounds} rounds (creates, many-row writes, deletes and transactions: a third), schemas ${schema}, ${bareSchema}`)
    for (let round = 0; round < args.rounds; round++) {
      const order = [...cases].sort(() => Math.random() - 0.5)
      for (const c of order) {
        const n = Math.max(1, Math.round((args.iterations * c.share) / args.rounds))
        const into = samples.get(c.key)!
        for (let i = 0; i < n; i++) {
          const start = performance.now()
          await c.run()
          into.push(performance.now() - start)
        }
      }
    }
    const server = await serverSideCosts(admin, schema, bareSchema)
    const loadAfter = loadavg()

    const results = new Map<string, Result>()
    for (const c of cases) {
      const s = Float64Array.from(samples.get(c.key)!).sort()
      const mean = s.reduce((a, b) => a + b, 0) / s.length
      results.set(c.key, { label: c.label, baseline: c.baseline, n: s.length, p50: quantile(s, 0.5), p99: quantile(s, 0.99), mean })
    }
    const ratio = (key: string, baseline: string) => results.get(key)!.p50 / results.get(baseline)!.p50
    const fencedRatio = ratio('fenced', 'plain')
    const guardRatio = ratio('plain', 'bare')
    const ms = (v: number) => v.toFixed(3)
    const pct = (v: number) => `${v >= 0 ? '+' : '−'}${Math.abs(v * 100).toFixed(1)} %`
    const rows = [...results.values()].map((r) => {
      const b = r.baseline === undefined ? undefined : results.get(r.baseline)
      const vs = b === undefined ? ['—', '—'] : [`×${(r.p50 / b.p50).toFixed(3)} (${pct(r.p50 / b.p50 - 1)})`, `×${(r.p99 / b.p99).toFixed(3)} (${pct(r.p99 / b.p99 - 1)})`]
      return `| ${r.label} | ${r.n} | ${ms(r.p50)} | ${ms(r.p99)} | ${ms(r.mean)} | ${vs[0]} | ${vs[1]} |`
    })
    const cpu = cpuModel()
    const load = (l: number[]) => l.map((v) => v.toFixed(2)).join(', ')
    const verdict = (value: number, target: number) => `${value <= target ? 'met' : '**missed**'} (×${value.toFixed(3)})`
    const markdown = `## Fencing

\`npm run bench:fencing\` — ${new Date().toISOString().slice(0, 10)}. Sequential calls (one in flight) on one row each,
against PostgreSQL on 127.0.0.1, in two fresh schemas migrated alike except that one lacks the database
guard (\`fenceGuardSql\`); the cases interleaved in ${args.rounds} rounds of random order. Times in milliseconds.

Machine: ${availableParallelism()} × ${cpu}, Node ${process.version}, PostgreSQL ${pgVersion}; load average
(1, 5, 15 min) ${load(loadBefore)} at the start, ${load(loadAfter)} at the end (the machine is shared).

| case | samples | p50 | p99 | mean | vs baseline p50 | vs baseline p99 |
| --- | ---: | ---: | ---: | ---: | ---: | ---: |
${rows.join('\n')}

Baselines: each guarded-table row against its unguarded twin (the guard's cost), the fenced update and the
extended-client row against the plain update on the same guarded table, the fenced raw SQL against the
plain raw SQL, the fenced \`updateMany\` and \`delete\` against the plain ones, \`fencedTransaction\` against the plain transaction.

**Targets: fenced update p50 at most ×${TARGET_FENCED_P50} the plain update's (guard installed) — ${verdict(fencedRatio, TARGET_FENCED_P50)};
the guard's own cost, a plain update on a guarded vs an unguarded table, at most ×${TARGET_GUARD_P50} — ${verdict(guardRatio, TARGET_GUARD_P50)}.**

### The database alone

What one statement costs PostgreSQL's executor, without the network or a client: ${SERVER_ROWS} statements in a
PL/pgSQL loop, each on another row, timed inside the server and rolled back; ${SERVER_REPS} repetitions per case,
interleaved in random order. The minimum is the figure least disturbed by other work on the machine.
Times in µs per statement.

| statement | unguarded min | guarded min | guard adds | unguarded median | guarded median |
| --- | ---: | ---: | ---: | ---: | ---: |
${server.join('\n')}

What the differences are made of: the fenced update is the same single \`UPDATE\` with one more predicate
(\`"fenceToken" <= $t\`) and one more assignment. The raw SQL rows show what that costs in the database
alone; the extended-client row what Prisma's \`$extends\` costs by itself; the rest is Prisma's own work on
the larger query (two more bigint arguments to validate, serialize and plan). The extension's JavaScript
(token check, argument rewrite, the lazy promise) is a few µs. The guard's triggers are \`UPDATE OF\` the fence and
the key: an UPDATE that sets neither pays a column-list test only; one that sets the fence evaluates one
\`WHEN\` test (false unless the fence goes down: no function call); an INSERT or DELETE calls a PL/pgSQL
function that writes the key's tombstone row. A fenced \`updateMany\` runs its write and its check in
one transaction of its own (BEGIN, UPDATE, SELECT, COMMIT) so a refusal keeps nothing. A fenced \`delete\` raises
the fence to its token before it deletes (a DELETE carries no token: unraised, the guard's tombstone would keep
the row's older fence), in one transaction of its own (BEGIN, UPDATE, DELETE, COMMIT). A refused write costs
one more read, not measured here (the rare path). \`fencedTransaction\` adds one statement to the transaction —
the conditional \`UPDATE\` that raises the fence and takes the row lock.
`
    console.log(markdown)
    if (args.docs) {
      writeMarkedSection(join(root, 'docs', 'BENCHMARKS.md'), 'bench:fencing', markdown)
      console.error('[bench:fencing] written to docs/BENCHMARKS.md')
    }
  } finally {
    await base.$disconnect()
    await bare.$disconnect()
    for (const s of [schema, bareSchema]) await admin.query(`DROP SCHEMA IF EXISTS "${s}" CASCADE`).catch(() => {})
    await admin.end()
  }
  return 0
}

const SERVER_ROWS = 20_000
const SERVER_REPS = 12

/**
 * The executor's cost per statement on the guarded and the unguarded schema: each case runs
 * SERVER_ROWS statements in a DO loop (one row each, no chains of row versions), timed with
 * clock_timestamp() inside the server, in a transaction rolled back afterwards.
 */
async function serverSideCosts(admin: pg.Client, schema: string, bareSchema: string): Promise<string[]> {
  for (const s of [schema, bareSchema]) {
    await admin.query(
      `INSERT INTO "${s}"."Product" (sku, name, "priceCents", stock, "fenceToken") SELECT 'server-' || g, 'n', 1, 0, 1000 FROM generate_series(1, ${SERVER_ROWS}) g`,
    )
    await admin.query(`ANALYZE "${s}"."Product"`)
  }
  const idRange = async (s: string) =>
    Number((await admin.query(`SELECT min(id) AS lo FROM "${s}"."Product" WHERE sku LIKE 'server-%'`)).rows[0]?.lo)
  const statements: Record<string, (s: string) => string> = {
    'plain `UPDATE` (sets neither fence nor key)': (s) => `UPDATE "${s}"."Product" SET stock = stock + 1 WHERE id = i`,
    'fenced `UPDATE` (`fenceToken <= t`, sets the fence)': (s) => `UPDATE "${s}"."Product" SET stock = stock + 1, "fenceToken" = 1000 WHERE id = i AND "fenceToken" <= 1000`,
    '`INSERT` (a new key)': (s) => `INSERT INTO "${s}"."Product" (sku, name, "priceCents", stock) VALUES ('ins-' || i, 'n', 1, 0)`,
    '`DELETE` (keeps the fence in a tombstone)': (s) => `DELETE FROM "${s}"."Product" WHERE id = i`,
  }
  const lows = new Map([schema, bareSchema].map((s) => [s, 0]))
  for (const s of lows.keys()) lows.set(s, await idRange(s))
  const times = new Map<string, number[]>()
  let last = Number.NaN
  const onNotice = (n: { message?: string }) => {
    last = Number(/us=([0-9.e+-]+)/.exec(n.message ?? '')?.[1])
  }
  admin.on('notice', onNotice)
  try {
    const runs = Object.keys(statements).flatMap((label) => [schema, bareSchema].map((s) => ({ label, s })))
    for (let rep = 0; rep < SERVER_REPS; rep++) {
      for (const { label, s } of [...runs].sort(() => Math.random() - 0.5)) {
        const lo = lows.get(s)!
        const body = statements[label]!(s)
        await admin.query('BEGIN')
        await admin.query(
          `DO $$ DECLARE t0 timestamptz; BEGIN t0 := clock_timestamp(); FOR i IN ${lo}..${lo + SERVER_ROWS - 1} LOOP ${body}; END LOOP; RAISE NOTICE 'us=%', extract(epoch from clock_timestamp() - t0) * 1e6 / ${SERVER_ROWS}; END $$`,
        )
        await admin.query('ROLLBACK')
        const key = `${label}\u0000${s}`
        times.set(key, [...(times.get(key) ?? []), last])
      }
    }
  } finally {
    admin.off('notice', onNotice)
  }
  const median = (v: number[]) => [...v].sort((a, b) => a - b)[v.length >> 1]!
  return Object.keys(statements).map((label) => {
    const bare = times.get(`${label}\u0000${bareSchema}`)!
    const guarded = times.get(`${label}\u0000${schema}`)!
    const added = Math.min(...guarded) - Math.min(...bare)
    return `| ${label} | ${Math.min(...bare).toFixed(2)} | ${Math.min(...guarded).toFixed(2)} | ${added >= 0 ? '+' : '−'}${Math.abs(added).toFixed(2)} | ${median(bare).toFixed(2)} | ${median(guarded).toFixed(2)} |`
  })
}

/** The CPU model as /proc/cpuinfo names it (os.cpus() may shorten it); `unknown` elsewhere. */
function cpuModel(): string {
  try {
    const line = readFileSync('/proc/cpuinfo', 'utf8')
      .split('\n')
      .find((l) => l.startsWith('model name'))
    if (line !== undefined) return line.slice(line.indexOf(':') + 1).trim()
  } catch {
    // Not Linux: fall back to what Node reports.
  }
  return cpus()[0]?.model.trim() || 'unknown'
}


await runCommand(CLI, process.argv.slice(2), main)
