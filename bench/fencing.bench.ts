// `npm run bench:fencing [-- --iterations N --rounds R --no-docs]`: what fencing costs, against
// the real PostgreSQL (DATABASE_URL, default postgresql://postgres@127.0.0.1:5432/test), in one
// run, on two schemas migrated alike except for the database guard's migrations: a fenced update
// vs a plain Prisma update of the same row (both on the guarded table), the extension's own cost
// (the extended client outside `$fenced`, a new `$fenced` view per call), the guard's own cost on
// each path — the Prisma path (plain and fenced updates, the fence raised by the extension) and the
// token path (the transaction's token, which the guard's trigger reads) — on a guarded vs an
// unguarded table, a fenced updateMany vs a plain one, a fenced delete vs a plain one, and
// fencedTransaction vs a plain interactive transaction doing the same writes. The guard's cost is
// also measured in the executor alone, with what a statement does counted (trigger functions
// called, WAL bytes written), figures a loaded machine cannot blur. Targets: fenced update p50 at
// most 1.15x the plain update's; the guard on the Prisma path at most 1.05x. Writes its section of
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
import { fencedTransaction, fenceGuardSql, fencing } from '@fencelock/fencing'
import { PrismaClient } from '../generated/prisma/client.js'
import { connectDatabase, databaseTarget } from '@fencelock/devkit/database-url'
import { applyMigrations, readMigrations } from '@fencelock/devkit/migrations'
import { integerFlag, runCommand, type CliSpec, type CliValues } from '@fencelock/devkit/cli'
import { writeMarkedSection } from './support/docs-section.js'

const root = join(dirname(fileURLToPath(import.meta.url)), '..')
const TARGET_FENCED_P50 = 1.15
const TARGET_GUARD = 1.05
/**
 * The migrations that install the database guard of Product and Order or bring a guard up to date
 * (`..._fence_guard`, `..._fence_guard_token`, `..._fence_guard_round4`, ...): the unguarded schema is
 * migrated without them.
 */
const isGuardMigration = (name: string) => /_fence_guard(_|$)/.test(name)
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
  readonly min: number
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
  // The guard without the token path (tokenPath: false), for a table written only through Prisma.
  const poSchema = `bench_fencing_po_${suffix}`
  const admin = new pg.Client({ connectionString })
  await connectDatabase(admin, connectionString)
  // The token path through pg: a second connection, one round trip per transaction (simple protocol).
  const tokenSession = new pg.Client({ connectionString })
  await connectDatabase(tokenSession, connectionString)
  const loadBefore = loadavg()
  const base = new PrismaClient({ adapter: new PrismaPg({ connectionString }, { schema }) })
  const bare = new PrismaClient({ adapter: new PrismaPg({ connectionString }, { schema: bareSchema }) })
  const po = new PrismaClient({ adapter: new PrismaPg({ connectionString }, { schema: poSchema }) })
  try {
    const migrations = await readMigrations()
    await applyMigrations(admin, { schema, migrations })
    await applyMigrations(admin, { schema: bareSchema, migrations: migrations.filter((m) => !isGuardMigration(m.name)) })
    if ((await triggerCount(admin, bareSchema)) !== 0) throw new Error(`bench:fencing: the unguarded schema has triggers on Product: a guard migration was not left out`)
    await applyMigrations(admin, { schema: poSchema, migrations: migrations.filter((m) => !isGuardMigration(m.name)) })
    const prismaOnly = (table: string, key: string) => fenceGuardSql({ table, column: 'fenceToken', key, tokenPath: false })
    await admin.query(`BEGIN; SET LOCAL search_path TO "${poSchema}"; ${prismaOnly('Product', 'sku')}; ${prismaOnly('Order', 'id')}; COMMIT`)
    const pgVersion = String((await admin.query('SHOW server_version')).rows[0]?.server_version ?? 'unknown')
    const models = { Product: 'fenceToken', Order: 'fenceToken' } as const
    const db = base.$extends(fencing({ models }))
    const bareDb = bare.$extends(fencing({ models }))
    const poDb = po.$extends(fencing({ models }))
    const seed = (client: PrismaClient, sku: string, stock: number) => client.product.create({ data: { sku, name: 'bench', priceCents: 100, stock, fenceToken: TOKEN } })
    const updated = await seed(base, 'BENCH-UPDATE', 0)
    const bareUpdated = await seed(bare, 'BENCH-UPDATE', 0)
    const poUpdated = await seed(po, 'BENCH-UPDATE', 0)
    const many = await seed(base, 'BENCH-MANY', 0)
    const viewed = await seed(base, 'BENCH-VIEW', 0)
    // A new token (so a new $fenced view) per call, as every request of the shop has; increasing, as lock grants are.
    let viewToken = TOKEN
    const tokenTransaction = (t: string, id: number) =>
      `BEGIN; SELECT set_config('fencelock.token', '${TOKEN}', true), set_config('fencelock.txid', pg_current_xact_id()::text, true); UPDATE ${t} SET stock = stock + 1 WHERE id = ${id}; COMMIT`
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
      {
        key: 'fencedBare',
        label: 'fenced `update`, **unguarded** table',
        baseline: 'bare',
        share: 1,
        run: () => bareDb.$fenced(TOKEN).product.update({ where: { id: bareUpdated.id }, data: increment }),
      },
      {
        key: 'poPlain',
        label: 'plain Prisma `update`, table guarded **without the token path** (`tokenPath: false`)',
        baseline: 'bare',
        share: 1,
        run: () => po.product.update({ where: { id: poUpdated.id }, data: increment }),
      },
      {
        key: 'poFenced',
        label: 'fenced `update`, table guarded without the token path',
        baseline: 'fencedBare',
        share: 1,
        run: () => poDb.$fenced(TOKEN).product.update({ where: { id: poUpdated.id }, data: increment }),
      },
      {
        key: 'freshView',
        label: 'fenced `update` with a new token per call (a new `$fenced` view each time)',
        baseline: 'fenced',
        share: 1,
        run: () => db.$fenced(++viewToken).product.update({ where: { id: viewed.id }, data: increment }),
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
      {
        key: 'sqlFencedBare',
        label: 'raw SQL through `pg`: the fenced `UPDATE`, unguarded table',
        share: 1,
        run: () => admin.query(`UPDATE ${bareTable} SET stock = stock + 1, "fenceToken" = $2 WHERE id = $1 AND "fenceToken" <= $2 RETURNING *`, [bareUpdated.id, TOKEN]),
      },
      // The token path: a transaction that sets its token (what withFence and raw SQL on a $fenced view send), one round trip.
      { key: 'tokenBare', label: 'token path through `pg`: `BEGIN`, the token, a plain `UPDATE`, `COMMIT`, unguarded table', share: 1 / 3, run: () => tokenSession.query(tokenTransaction(bareTable, bareUpdated.id)) },
      { key: 'token', label: 'token path through `pg`: the same, guarded table (the trigger fences the `UPDATE`)', baseline: 'tokenBare', share: 1 / 3, run: () => tokenSession.query(tokenTransaction(table, updated.id)) },
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
    console.error(`[bench:fencing] ${args.iterations} calls per case in ${args.rounds} rounds (creates, many-row writes, deletes and transactions: a third), schemas ${schema}, ${bareSchema}, ${poSchema}`)
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
    const server = await serverSideCosts(admin, schema, bareSchema, poSchema)
    const loadAfter = loadavg()

    const results = new Map<string, Result>()
    for (const c of cases) {
      const s = Float64Array.from(samples.get(c.key)!).sort()
      const mean = s.reduce((a, b) => a + b, 0) / s.length
      results.set(c.key, { label: c.label, baseline: c.baseline, n: s.length, min: s[0]!, p50: quantile(s, 0.5), p99: quantile(s, 0.99), mean })
    }
    const get = (key: string) => results.get(key)!
    const fencedRatio = get('fenced').p50 / get('plain').p50
    const ms = (v: number) => v.toFixed(3)
    const x = (v: number) => `×${v.toFixed(3)}`
    const pct = (v: number) => `${v >= 0 ? '+' : '−'}${Math.abs(v * 100).toFixed(1)} %`
    const rows = [...results.values()].map((r) => {
      const b = r.baseline === undefined ? undefined : results.get(r.baseline)
      const vs = b === undefined ? ['—', '—'] : [`${x(r.p50 / b.p50)} (${pct(r.p50 / b.p50 - 1)})`, x(r.min / b.min)]
      return `| ${r.label} | ${r.n} | ${ms(r.min)} | ${ms(r.p50)} | ${ms(r.p99)} | ${ms(r.mean)} | ${vs[0]} | ${vs[1]} |`
    })
    // The guard's cost, path by path: the same call on the guarded and on the unguarded table.
    const guardPairs: [string, string, string][] = [
      ['Prisma path: plain `update` (the fence not set)', 'plain', 'bare'],
      ['Prisma path: fenced `update` (the extension raises the fence)', 'fenced', 'fencedBare'],
      ['Prisma path, guard without the token path: plain `update`', 'poPlain', 'bare'],
      ['Prisma path, guard without the token path: fenced `update`', 'poFenced', 'fencedBare'],
      ['raw SQL: plain `UPDATE`', 'sql', 'sqlBare'],
      ['raw SQL: fenced `UPDATE`', 'sqlFenced', 'sqlFencedBare'],
      ['token path: a transaction under the token, one `UPDATE`', 'token', 'tokenBare'],
      ['Prisma `create` (writes the key\'s tombstone)', 'create', 'createBare'],
    ]
    const guardRows = guardPairs.map(([label, guarded, unguarded]) => {
      const g = get(guarded)
      const u = get(unguarded)
      return `| ${label} | ${x(g.min / u.min)} | ${x(g.p50 / u.p50)} | ${ms((g.p50 - u.p50) * 1000)} |`
    })
    const prismaGuard = Math.max(get('plain').p50 / get('bare').p50, get('fenced').p50 / get('fencedBare').p50)
    const poGuard = Math.max(get('poPlain').p50 / get('bare').p50, get('poFenced').p50 / get('fencedBare').p50)
    const serverPrisma = Math.max(...server.prismaPath)
    const serverPo = Math.max(...server.poPrismaPath)
    const cpu = cpuModel()
    const load = (l: number[]) => l.map((v) => v.toFixed(2)).join(', ')
    const verdict = (value: number, target: number) => `${value <= target ? 'met' : '**missed**'} (${x(value)})`
    const markdown = `## Fencing

\`npm run bench:fencing\` — ${new Date().toISOString().slice(0, 10)}. Sequential calls (one in flight) on one row each,
against PostgreSQL on 127.0.0.1, in three fresh schemas migrated alike but for the database guard: none (the
guard's migrations left out), the guard as the migrations install it (with the token path), and the guard
without the token path (\`tokenPath: false\`); the cases interleaved in ${args.rounds} rounds of random order.
Times in milliseconds.

Machine: ${availableParallelism()} × ${cpu}, Node ${process.version}, PostgreSQL ${pgVersion}; load average
(1, 5, 15 min) ${load(loadBefore)} at the start, ${load(loadAfter)} at the end (the machine is shared: under load
the minimum is the figure least disturbed, the p50 the typical one).

| case | samples | min | p50 | p99 | mean | vs baseline p50 | vs baseline min |
| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |
${rows.join('\n')}

Baselines: the fenced update, the extended-client row and the new-view-per-call row against the plain (or the cached-view) update on the
same guarded table; every guarded row against its unguarded twin; the fenced raw SQL against the plain raw SQL; the fenced
\`updateMany\` and \`delete\` against the plain ones; \`fencedTransaction\` against the plain transaction.

**The guard's cost, path by path** (guarded / unguarded, same call, same run):

| path | min ratio | p50 ratio | p50 difference (µs) |
| --- | ---: | ---: | ---: |
${guardRows.join('\n')}

**Targets: fenced update p50 at most ×${TARGET_FENCED_P50} the plain update's (guard installed) — ${verdict(fencedRatio, TARGET_FENCED_P50)};
the guard on a table written only through Prisma (plain and fenced \`update\`, guarded vs unguarded, the worse of the two) at most ×${TARGET_GUARD}:
installed without the token path (\`tokenPath: false\`), client side p50 — ${verdict(poGuard, TARGET_GUARD)}, in the executor alone (min) — ${verdict(serverPo, TARGET_GUARD)};
the default guard (with the token path), client side p50 — ${verdict(prismaGuard, TARGET_GUARD)}, in the executor alone (min) — ${verdict(serverPrisma, TARGET_GUARD)}.**

### The database alone

What one statement costs PostgreSQL's executor, without the network or a client: ${SERVER_ROWS} statements in a
PL/pgSQL loop, each on another row, timed inside the server and rolled back; ${SERVER_REPS} repetitions per case,
interleaved in random order. Times in µs per statement; the minimum is the figure least disturbed by other
work on the machine. Beside them, what a statement does, counted (the same on a loaded machine as on a
quiet one): the guard's trigger functions called (\`pg_stat_xact_user_functions\`, \`track_functions = all\` set
in the bench's session) and the WAL bytes written (\`pg_current_wal_insert_lsn()\`), per statement.

Columns: the unguarded table; the default guard (with the token path); the guard without the token path
(\`tokenPath: false\`, whose write under a token is refused, so its token rows say *refused*).

| statement | unguarded min | guarded min | min ratio | median ratio | no token path min | min ratio | median ratio | functions called (guarded, no token path) | WAL bytes (unguarded, guarded, no token path) |
| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |
${server.rows.join('\n')}

${EXPLANATION}
`
    console.log(markdown)
    if (args.docs) {
      writeMarkedSection(join(root, 'docs', 'BENCHMARKS.md'), 'bench:fencing', markdown)
      console.error('[bench:fencing] written to docs/BENCHMARKS.md')
    }
  } finally {
    await base.$disconnect()
    await bare.$disconnect()
    await po.$disconnect()
    await tokenSession.end().catch(() => {})
    for (const s of [schema, bareSchema, poSchema]) await admin.query(`DROP SCHEMA IF EXISTS "${s}" CASCADE`).catch(() => {})
    await admin.end()
  }
  return 0
}

const SERVER_ROWS = 20_000
const SERVER_REPS = 12

/** What the numbers in the tables are made of, for the reader of BENCHMARKS.md. */
const EXPLANATION = `What the differences are made of. The fenced update is the same single \`UPDATE\` with one more predicate
(\`"fenceToken" <= $t\`) and one more assignment; the raw SQL rows show what that costs in the database alone, the
extended-client row what the extension's query hook costs by itself (it is on the write operations only), the
new-view row what a \`$fenced\` view made per request costs, and the rest is Prisma's own work on the larger query.
The guard's triggers on a table written only through Prisma: \`UPDATE OF\` the fence and of the key, so an UPDATE
that sets neither pays a column-list test; one that sets the fence evaluates one \`WHEN\` (false unless the
fence goes down); the token path's trigger is guarded by a \`WHEN\` on the transaction's token (false without
one) — but it is a BEFORE row trigger, which PostgreSQL runs by locking the row first, whatever the \`WHEN\`: one
more WAL record per row updated or deleted (the WAL column, +56 bytes), on every path; the guard without the
token path has none. No trigger function runs for an \`UPDATE\` on the Prisma path — the *functions called* column counts it. An
INSERT or DELETE calls the PL/pgSQL function that writes the key's tombstone row (one call, one more row written:
the WAL column). Under the token, the trigger function runs once per row written. A fenced \`updateMany\` runs its
write and its check in one transaction of its own (BEGIN, UPDATE, SELECT, COMMIT) so a refusal keeps nothing. A
fenced \`delete\` raises the fence to its token before it deletes (a DELETE carries no token: unraised, the guard's
tombstone would keep the row's older fence), in one transaction of its own (BEGIN, UPDATE, DELETE, COMMIT). A
refused write costs one more read, not measured here (the rare path). \`fencedTransaction\` adds one statement to
the transaction — the conditional \`UPDATE\` that raises the fence and takes the row lock.`

/** Triggers (not internal ones) on the Product table of `schema`. */
async function triggerCount(admin: pg.Client, schema: string): Promise<number> {
  const r = await admin.query(
    `SELECT count(*)::int AS n FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 AND c.relname = 'Product' AND NOT t.tgisinternal`,
    [schema],
  )
  return Number(r.rows[0]?.n)
}

interface ServerCosts {
  /** One table row per statement. */
  readonly rows: string[]
  /** Guarded / unguarded minimum of the Prisma path's statements (plain and fenced UPDATE), default guard. */
  readonly prismaPath: number[]
  /** The same, the guard without the token path. */
  readonly poPrismaPath: number[]
}

/** One measurement of one statement: µs per statement, trigger functions called and WAL bytes per statement. */
interface ServerSample {
  readonly us: number
  readonly calls: number
  readonly wal: number
}

/**
 * The executor's cost per statement on the guarded and the unguarded schema: each case runs
 * SERVER_ROWS statements in a DO loop (one row each, no chains of row versions), timed with
 * clock_timestamp() inside the server, in a transaction rolled back afterwards; with the trigger
 * functions it called and the WAL it wrote, per statement.
 */
async function serverSideCosts(admin: pg.Client, schema: string, bareSchema: string, poSchema: string): Promise<ServerCosts> {
  const schemas = [schema, bareSchema, poSchema]
  for (const s of schemas) {
    await admin.query(
      `INSERT INTO "${s}"."Product" (sku, name, "priceCents", stock, "fenceToken") SELECT 'server-' || g, 'n', 1, 0, 1000 FROM generate_series(1, ${SERVER_ROWS}) g`,
    )
    await admin.query(`ANALYZE "${s}"."Product"`)
  }
  // Counting calls needs track_functions, a superuser's setting; without it the column says so.
  const counting = await admin.query(`SET track_functions = 'all'`).then(
    () => true,
    () => false,
  )
  const idRange = async (s: string) =>
    Number((await admin.query(`SELECT min(id) AS lo FROM "${s}"."Product" WHERE sku LIKE 'server-%'`)).rows[0]?.lo)
  // The token path: the transaction's token (1000, the rows' fence), set as SET_FENCE_TOKEN_SQL does.
  const underToken = `PERFORM set_config('fencelock.token', '1000', true), set_config('fencelock.txid', pg_current_xact_id()::text, true);`
  const statements: Record<string, { sql: (s: string) => string; token?: boolean; prismaPath?: boolean }> = {
    'plain `UPDATE` (sets neither fence nor key)': { sql: (s) => `UPDATE "${s}"."Product" SET stock = stock + 1 WHERE id = i`, prismaPath: true },
    'fenced `UPDATE` (`fenceToken <= t`, sets the fence): the Prisma path': {
      sql: (s) => `UPDATE "${s}"."Product" SET stock = stock + 1, "fenceToken" = 1000 WHERE id = i AND "fenceToken" <= 1000`,
      prismaPath: true,
    },
    'plain `UPDATE` under the transaction\'s token: the token path': { sql: (s) => `UPDATE "${s}"."Product" SET stock = stock + 1 WHERE id = i`, token: true },
    '`INSERT` (a new key)': { sql: (s) => `INSERT INTO "${s}"."Product" (sku, name, "priceCents", stock, "fenceToken") VALUES ('ins-' || i, 'n', 1, 0, 1000)` },
    '`DELETE` (keeps the fence in a tombstone)': { sql: (s) => `DELETE FROM "${s}"."Product" WHERE id = i` },
    '`DELETE` under the transaction\'s token': { sql: (s) => `DELETE FROM "${s}"."Product" WHERE id = i`, token: true },
  }
  const lows = new Map(schemas.map((s) => [s, 0]))
  for (const s of lows.keys()) lows.set(s, await idRange(s))
  const samples = new Map<string, ServerSample[]>()
  let last: ServerSample | undefined
  const onNotice = (n: { message?: string }) => {
    const m = /us=([0-9.e+-]+) calls=([0-9]+) wal=([0-9.e+-]+)/.exec(n.message ?? '')
    if (m !== null) last = { us: Number(m[1]), calls: Number(m[2]), wal: Number(m[3]) }
  }
  const calls = counting ? `(SELECT coalesce(sum(calls), 0) FROM pg_stat_xact_user_functions)` : '0'
  admin.on('notice', onNotice)
  try {
    // The guard without the token path refuses a write under a token: those cases are not run there.
    const runs = Object.entries(statements).flatMap(([label, st]) => schemas.filter((s) => s !== poSchema || st.token !== true).map((s) => ({ label, s })))
    for (let rep = 0; rep < SERVER_REPS; rep++) {
      for (const { label, s } of [...runs].sort(() => Math.random() - 0.5)) {
        const lo = lows.get(s)!
        const statement = statements[label]!
        await admin.query('BEGIN')
        last = undefined
        await admin.query(
          `DO $$ DECLARE t0 timestamptz; c0 bigint; l0 pg_lsn; BEGIN ${statement.token === true ? underToken : ''}
             c0 := ${calls}; l0 := pg_current_wal_insert_lsn(); t0 := clock_timestamp();
             FOR i IN ${lo}..${lo + SERVER_ROWS - 1} LOOP ${statement.sql(s)}; END LOOP;
             RAISE NOTICE 'us=% calls=% wal=%', extract(epoch from clock_timestamp() - t0) * 1e6 / ${SERVER_ROWS}, ${calls} - c0, (pg_current_wal_insert_lsn() - l0) / ${SERVER_ROWS};
           END $$`,
        )
        await admin.query('ROLLBACK')
        if (last === undefined) throw new Error(`bench:fencing: the server-side case "${label}" reported nothing`)
        const key = `${label}\u0000${s}`
        samples.set(key, [...(samples.get(key) ?? []), last])
      }
    }
  } finally {
    admin.off('notice', onNotice)
  }
  const median = (v: number[]) => [...v].sort((a, b) => a - b)[v.length >> 1]!
  const prismaPath: number[] = []
  const poPrismaPath: number[] = []
  const us = (v: ServerSample[]) => v.map((x) => x.us)
  const min = (v: ServerSample[]) => Math.min(...us(v))
  const rows = Object.entries(statements).map(([label, statement]) => {
    const bare = samples.get(`${label}\u0000${bareSchema}`)!
    const guarded = samples.get(`${label}\u0000${schema}`)!
    const po = samples.get(`${label}\u0000${poSchema}`)
    const minRatio = min(guarded) / min(bare)
    if (statement.prismaPath === true) prismaPath.push(minRatio)
    if (statement.prismaPath === true && po !== undefined) poPrismaPath.push(min(po) / min(bare))
    const calls = (v: ServerSample[] | undefined) => (v === undefined ? 'refused' : counting ? (Math.min(...v.map((x) => x.calls)) / SERVER_ROWS).toFixed(2) : 'n/a')
    const wal = (v: ServerSample[] | undefined) => (v === undefined ? 'refused' : Math.min(...v.map((x) => x.wal)).toFixed(0))
    const poCells = po === undefined ? ['refused', '—', '—'] : [min(po).toFixed(2), `×${(min(po) / min(bare)).toFixed(3)}`, `×${(median(us(po)) / median(us(bare))).toFixed(3)}`]
    return `| ${label} | ${min(bare).toFixed(2)} | ${min(guarded).toFixed(2)} | ×${minRatio.toFixed(3)} | ×${(median(us(guarded)) / median(us(bare))).toFixed(3)} | ${poCells.join(' | ')} | ${calls(guarded)}, ${calls(po)} | ${wal(bare)}, ${wal(guarded)}, ${wal(po)} |`
  })
  if (!counting) rows.push('', 'Functions called: n/a — `SET track_functions` was refused (it needs a superuser); the WAL column still counts.')
  return { rows, prismaPath, poPrismaPath }
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
