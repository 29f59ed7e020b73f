/**
 * Every code block of README.md, packages/*\/README.md and docs/*.md is a tested program, checked
 * against the packages as a user installs them (the scratch project of the global setup: the packed
 * tarballs, their peers, a Prisma client generated from fixtures/schema.prisma):
 *
 * - every TypeScript block is type-checked with `tsc --strict` — one tsc run over all of them, each
 *   block a module of its own in the scratch project's docs/ folder, its errors reported at their line
 *   in the doc;
 * - the blocks marked `<!-- runs -->` also run, compiled, to exit 0 against a Redis and a PostgreSQL
 *   database of their own (a redis-server spawned for the run, a database cloned from a template with
 *   the test schema, its guards and rows: invoice 42, product A-1), within a time limit: a block that
 *   hangs (a client it never quits) fails;
 * - the quick starts' pay-an-invoice program is run as the failure it must survive: holder A charges
 *   and freezes before it records the charge, its lease runs out, holder B pays again — one charge at
 *   the provider; the same program with the token as the idempotency key charges twice;
 * - the blocks that are not programs are listed by kind; a `prisma` block's models must be the test
 *   schema's.
 * The rules each block follows (markers, `// Assumes:`) are in support/markdown-blocks.ts.
 */
import { spawn } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { readdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { freePort } from '@fencelock/devkit/net'
import { startRedisServer, stopAllRedisServers, type RedisServer } from '@fencelock/devkit/redis-server'
import { LOCK_DEFAULTS, resourceKeys } from '@fencelock/lock'
import { Redis } from 'ioredis'
import pg from 'pg'
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest'
import { blocksOf, type Block } from '../support/markdown-blocks.js'
import { startPaymentProvider, type PaymentProvider } from '../support/payment-provider.js'
import { databaseUrl, PACKAGES, repoRoot, run } from '../support/scratch-project.js'

const { dir: scratch } = inject('scratch')
const fixtures = join(import.meta.dirname, '..', 'fixtures')

/** The Markdown the test reads: the root README, the published packages' READMEs, docs/. */
const DOCS = [
  'README.md',
  ...PACKAGES.map((p) => `packages/${p}/README.md`),
  ...readdirSync(join(repoRoot, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .sort()
    .map((f) => `docs/${f}`),
]
const parsed = DOCS.map((doc) => blocksOf(doc, readFileSync(join(repoRoot, doc), 'utf8')))
const blocks = parsed.flatMap((p) => p.blocks)
const problems = parsed.flatMap((p) => p.problems)
const where = (b: Block) => `${b.doc}:${b.line}`
const programs = blocks.filter((b) => b.kind === 'ts')
const runs = blocks.filter((b) => b.kind === 'ts' && b.mode === 'runs')
const scripts = blocks.filter((b) => b.kind === 'js')
const listed = blocks.filter((b) => b.mode === 'listed')

/**
 * What a block may take as given (`// Assumes:`): declared for a compile-only block, defined for a
 * block that runs (only the names with a definition can). Types come from the packed packages and
 * the generated client.
 */
const GIVEN: Readonly<Record<string, { declare: string; define?: string }>> = {
  prisma: { declare: "declare const prisma: import('./generated/prisma/client.js').PrismaClient" },
  db: { declare: "declare const db: import('./given.js').Db" },
  locker: { declare: "declare const locker: import('@fencelock/lock').Locker" },
  lock: {
    declare: "declare const lock: import('@fencelock/lock').Lock",
    define: "const lock = { resource: `product:${process.env.DOCS_SKU ?? 'A-1'}`, token: BigInt(process.env.DOCS_TOKEN ?? '1'), signal: new AbortController().signal }",
  },
  sku: { declare: 'declare const sku: string', define: "const sku = process.env.DOCS_SKU ?? 'A-1'" },
  connectionString: { declare: 'declare const connectionString: string', define: 'const connectionString = process.env.DATABASE_URL as string' },
  id: { declare: 'declare const id: number' },
  buyerId: { declare: 'declare const buyerId: string' },
  amountCents: { declare: 'declare const amountCents: number' },
  ledger: { declare: 'declare const ledger: string' },
  app: { declare: "declare const app: import('express').Express" },
  metrics: { declare: "declare const metrics: import('@fencelock/metrics').LockInstrumentation" },
  SoldOutError: { declare: 'declare class SoldOutError extends Error { constructor(sku: string) }' },
  checkout: { declare: 'declare function checkout(sku: string): Promise<unknown>' },
  payInvoice: { declare: 'declare function payInvoice(id: number): Promise<string>' },
}

/** The type of `db`: the fenced client of docs/FENCING.md's Set-up. */
const GIVEN_MODULE = `import { fencing } from '@fencelock/fencing'
import type { PrismaClient } from './generated/prisma/client.js'

declare const prisma: PrismaClient
const fenced = () => prisma.$extends(fencing<typeof prisma>({ models: { Product: 'fenceToken', Order: 'fenceToken', Invoice: 'fenceToken' } }))
export type Db = ReturnType<typeof fenced>
`

/** The quick starts' pay-an-invoice program: it charges with the operation's idempotency key. */
const PAY_KEY = "'idempotency-key': `invoice:${id}`"
const pays = runs.filter((b) => b.code.includes(PAY_KEY))

interface Source {
  readonly block: Block
  readonly file: string
  /** Lines put before the block's code (its givens). */
  readonly prelude: number
}

const slug = (b: Block) => `${b.doc.replace(/\.md$/, '').replace(/[^A-Za-z0-9]+/g, '-')}-L${b.line}`

/** The block as a module of the scratch project's docs/ folder. */
function sourceOf(b: Block, name = slug(b), code = b.code): Source & { text: string } {
  const prelude = b.assumes.map((n) => {
    const given = GIVEN[n]
    if (given === undefined) return `// unknown given ${n}`
    return b.mode === 'runs' ? (given.define ?? `// ${n} cannot be given to a block that runs`) : given.declare
  })
  // `export {}`: a module even without imports, so its names are its own.
  return { block: b, file: `docs/${name}.ts`, prelude: prelude.length, text: `${[...prelude, code].join('\n')}\nexport {}\n` }
}

/** A control compiled with the blocks: an error in a block must be reported at its line. */
const CONTROL: Block = { doc: 'control.md', line: 1000, kind: 'ts', code: "import { Locker } from '@fencelock/lock'\nconst n: number = Locker.name.length\nconst s: number = 'not a number'", mode: 'compile-only', reason: 'control', assumes: [] }
/** A control that runs: a program that never quits its Redis client (issue 20: six examples ran until killed). */
const HANGS: Block = { doc: 'control.md', line: 2000, kind: 'ts', code: "import { Redis } from 'ioredis'\nconst redis = new Redis(process.env.REDIS_URL ?? '')\nconsole.log(await redis.ping())", mode: 'runs', assumes: [] }
/** A control with Redis down: the pattern of round 3's examples, `quit()` after the lock's error (issue 35: hung until killed). */
const QUITS: Block = { doc: 'control.md', line: 3000, kind: 'ts', code: "import { Locker } from '@fencelock/lock'\nimport { Redis } from 'ioredis'\nconst redis = new Redis(process.env.REDIS_URL ?? '')\nconst locker = new Locker(redis)\ntry {\n  await locker.using('x', async () => {})\n} finally {\n  await locker.close()\n  await redis.quit()\n}", mode: 'runs', assumes: [] }
/** The pay program with the lock's token as the idempotency key: the unprotected variant. */
const tokenKeyed = (b: Block) => ({ ...b, code: b.code.replace(PAY_KEY, "'idempotency-key': `${lock.token}`") })

let compileErrors: string[] = []
let databases: Databases

beforeAll(async () => {
  const files: (Source & { text: string })[] = [
    ...programs.map((b) => sourceOf(b)),
    sourceOf(CONTROL, 'control'),
    sourceOf(HANGS, 'control-hangs'),
    sourceOf(QUITS, 'control-quits'),
    ...pays.map((b) => sourceOf(tokenKeyed(b), `${slug(b)}-token-key`)),
  ]
  writeFileSync(join(scratch, 'docs', 'given.ts'), GIVEN_MODULE)
  writeFileSync(
    join(scratch, 'docs', 'tsconfig.json'),
    JSON.stringify({
      // What a user's `tsc --strict` project has; emitted to docs-out/ for the blocks that run.
      compilerOptions: { target: 'ES2022', module: 'NodeNext', moduleResolution: 'NodeNext', strict: true, skipLibCheck: true, types: ['node'], rootDir: '.', outDir: '../docs-out', noEmitOnError: false },
      include: ['*.ts', 'generated/**/*.ts'],
    }),
  )
  for (const f of files) writeFileSync(join(scratch, f.file), f.text)
  for (const f of scripts) writeFileSync(join(scratch, 'docs', `${slug(f)}.cjs`), f.code)
  compileErrors = typeCheck(files)
  databases = await templateDatabase()
}, 240_000)

afterAll(async () => {
  await databases?.dropAll()
  await stopAllRedisServers()
})

/** One `tsc -p docs` over every block; its errors as `doc:line: TSnnnn: message`. */
function typeCheck(files: readonly Source[]): string[] {
  let out: string
  try {
    out = run(join(scratch, 'node_modules', '.bin', 'tsc'), ['-p', 'docs', '--pretty', 'false'], scratch)
  } catch (error) {
    out = String((error as Error).message)
  }
  const byFile = new Map(files.map((f) => [f.file, f]))
  const errors: string[] = []
  for (const line of out.split('\n')) {
    const m = /^(\S+?)\((\d+),\d+\): error (TS\d+): (.*)$/.exec(line)
    if (m === null) {
      if (line.startsWith('  ') && errors.length > 0) errors[errors.length - 1] += ` ${line.trim()}`
      continue
    }
    const [, file, lineNo, code, message] = m as unknown as [string, string, string, string, string]
    const source = byFile.get(file)
    if (source === undefined) {
      errors.push(`${file}:${lineNo}: ${code}: ${message}`)
      continue
    }
    const at = Number(lineNo) - source.prelude - 1
    errors.push(at < 0 ? `${where(source.block)} (its givens): ${code}: ${message}` : `${source.block.doc}:${source.block.line + at}: ${code}: ${message}`)
  }
  return errors
}

interface Databases {
  /** A fresh database with the test schema, its guards and the seed rows; its URL. */
  fresh(): Promise<string>
  dropAll(): Promise<void>
}

/**
 * A template database — the tables of fixtures/docs-tables.sql, the guard of each fenced table made
 * by the packed `fencelock-guard`, invoice 42 and product A-1 — cloned for every run.
 */
async function templateDatabase(): Promise<Databases> {
  const base = databaseUrl()
  const name = `fencelock_docs_${process.pid}_${randomBytes(3).toString('hex')}`
  const urlOf = (database: string) => {
    const url = new URL(base)
    url.pathname = `/${database}`
    return url.toString()
  }
  const admin = new pg.Client({ connectionString: base })
  await admin.connect()
  const made: string[] = []
  await admin.query(`CREATE DATABASE "${name}_tpl"`)
  made.push(`${name}_tpl`)
  const guard = (table: string, key: string) => run(join(scratch, 'node_modules', '.bin', 'fencelock-guard'), ['--table', table, '--column', 'fenceToken', '--key', key], scratch)
  const template = new pg.Client({ connectionString: urlOf(`${name}_tpl`) })
  await template.connect()
  try {
    await template.query(`BEGIN; ${readFileSync(join(fixtures, 'docs-tables.sql'), 'utf8')}
      ${guard('Invoice', 'id')} ${guard('Product', 'sku')} ${guard('Order', 'id')} ${guard('FencedResource', 'resource')}
      INSERT INTO "Invoice" (id, "amountCents") VALUES (42, 1999);
      INSERT INTO "Product" (sku, stock) VALUES ('A-1', 10);
      COMMIT`)
  } finally {
    await template.end()
  }
  let n = 0
  return {
    async fresh() {
      n += 1
      const database = `${name}_${n}`
      made.push(database)
      await admin.query(`CREATE DATABASE "${database}" TEMPLATE "${name}_tpl"`)
      return urlOf(database)
    },
    async dropAll() {
      for (const database of made.reverse()) await admin.query(`DROP DATABASE IF EXISTS "${database}" WITH (FORCE)`)
      await admin.end()
    },
  }
}

interface Outcome {
  readonly code: number | null
  readonly signal: NodeJS.Signals | null
  readonly stdout: string
  readonly stderr: string
  readonly timedOut: boolean
}

/**
 * Runs a compiled block (docs-out/<slug>.js) or a CommonJS block with node, in the scratch project.
 * `afterOutputMs`: the time limit counts from the program's first output instead (a machine busy
 * enough can take seconds to start node and connect), still within 60 s in all.
 */
function start(
  file: string,
  env: NodeJS.ProcessEnv,
  timeoutMs = 60_000,
  { afterOutputMs }: { afterOutputMs?: number } = {},
): { pid: number; done: Promise<Outcome> } {
  const child = spawn(process.execPath, [file], { cwd: scratch, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] })
  let stdout = ''
  let stderr = ''
  let timedOut = false
  // A block that does not exit in time hangs: a client it never quits, a timer it left.
  const kill = () => {
    timedOut = true
    child.kill('SIGCONT')
    child.kill('SIGKILL')
  }
  let timer = setTimeout(kill, afterOutputMs === undefined ? timeoutMs : 60_000)
  child.stdout.on('data', (d: Buffer) => {
    if (afterOutputMs !== undefined && stdout === '') {
      clearTimeout(timer)
      timer = setTimeout(kill, afterOutputMs)
    }
    stdout += d.toString()
  })
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()))
  const done = new Promise<Outcome>((resolve) => {
    child.once('close', (code, signal) => {
      clearTimeout(timer)
      resolve({ code, signal, stdout, stderr, timedOut })
    })
  })
  return { pid: child.pid as number, done }
}

const compiled = (b: Block, name = slug(b)) => join('docs-out', `${name}.js`)

/** The services of one run: a database, a redis-server (three for quorum mode), a payment provider. */
async function services(b: Block): Promise<{ env: NodeJS.ProcessEnv; redis: RedisServer; provider: PaymentProvider; close(): Promise<void> }> {
  const quorum = b.code.includes('REDIS_URLS')
  const [database, redis, provider, ...nodes] = await Promise.all([
    databases.fresh(),
    startRedisServer(),
    startPaymentProvider(),
    ...(quorum ? [startRedisServer(), startRedisServer(), startRedisServer()] : []),
  ])
  const env: NodeJS.ProcessEnv = { DATABASE_URL: database, REDIS_URL: redis.url, PAYMENTS_URL: provider.url, DOCS_SKU: 'A-1', DOCS_TOKEN: '1' }
  if (quorum) env.REDIS_URLS = nodes.map((s) => (s as RedisServer).url).join(',')
  return {
    env,
    redis,
    provider,
    async close() {
      await provider.close()
      await Promise.all([redis, ...nodes].map((s) => (s as RedisServer).stop()))
    },
  }
}

/** Sends `name` to `pid`, unless it has exited. */
function signal(pid: number, name: NodeJS.Signals): void {
  try {
    process.kill(pid, name)
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ESRCH') throw error
  }
}

/** A row of the run's database. */
async function queryOne<T>(url: string, sql: string): Promise<T> {
  const client = new pg.Client({ connectionString: url })
  await client.connect()
  try {
    return (await client.query(sql)).rows[0] as T
  } finally {
    await client.end()
  }
}

describe('the docs’ code blocks', () => {
  it('every block follows the rules (a TypeScript block says whether it runs, a compile-only one why; no unknown language)', () => {
    expect(problems.map((p) => `${p.where}: ${p.problem}`)).toEqual([])
    expect(programs.length).toBeGreaterThanOrEqual(20)
    // What the FENCING.md compile test checked before it moved here: its examples, the service's among them.
    expect(programs.filter((b) => b.doc === 'docs/FENCING.md').length).toBeGreaterThanOrEqual(9)
    expect(programs.some((b) => b.doc === 'docs/FENCING.md' && b.code.includes('fencingMiddleware('))).toBe(true)
  })

  it('every given a block assumes is one the test knows, and a block that runs can be given it', () => {
    const unknown = programs.flatMap((b) => b.assumes.filter((n) => GIVEN[n] === undefined || (b.mode === 'runs' && GIVEN[n].define === undefined)).map((n) => `${where(b)}: ${n}`))
    expect(unknown).toEqual([])
  })

  it('every TypeScript block type-checks with tsc --strict against the packed packages', () => {
    expect(compileErrors.filter((e) => !e.startsWith('control.md:'))).toEqual([])
  })

  it('control: a type error in a block is reported at its line in the doc', () => {
    expect(compileErrors.filter((e) => e.startsWith('control.md:'))).toEqual(["control.md:1002: TS2322: Type 'string' is not assignable to type 'number'."])
  })
})

describe.each(listed.map((b) => [`${where(b)} (${b.kind})`, b] as const))('listed, not a program: %s', (_name, b) => {
  it('is a kind the test knows', () => {
    expect(['sh', 'sql', 'yaml', 'prisma', 'text']).toContain(b.kind)
  })
  if (b.kind === 'prisma') {
    it('declares each of its models as the test schema has it (the examples run against that schema)', () => {
      const schema = readFileSync(join(fixtures, 'schema.prisma'), 'utf8')
      const models = [...b.code.matchAll(/^model (\w+) \{[\s\S]*?^\}/gm)]
      expect(models.length).toBeGreaterThan(0)
      for (const [text, name] of models) expect(normalized(text), name).toBe(normalized(new RegExp(`^model ${name} \\{[\\s\\S]*?^\\}`, 'm').exec(schema)?.[0] ?? `(no model ${name})`))
    })
  }
})

/** A model block without comments, one space between words. */
function normalized(block: string): string {
  return block
    .replace(/\/\/.*$/gm, '')
    .split('\n')
    .map((line) => line.trim().replace(/\s+/g, ' '))
    .filter((line) => line !== '')
    .join('\n')
}

/**
 * Blocks of the same text run once (the quick start's program is the same in three READMEs): the
 * first of them, its test named after all.
 */
function distinct(list: readonly Block[]): [string, Block][] {
  const byCode = new Map<string, Block[]>()
  for (const b of list) byCode.set(`${b.assumes.join(',')}\n${b.code}`, [...(byCode.get(`${b.assumes.join(',')}\n${b.code}`) ?? []), b])
  return [...byCode.values()].map((same) => [same.map(where).join(', '), same[0] as Block])
}

const fencingBlocks = runs.filter((b) => b.doc === 'docs/FENCING.md' && b.assumes.includes('lock'))
// The pay program and the Drizzle and Kysely blocks run to exit 0 in their scenarios below.
const plainRuns = runs.filter((b) => !pays.includes(b) && !fencingBlocks.includes(b))

// Each run has services of its own, so runs overlap (vitest's maxConcurrency, 5): mostly process
// start-up and Prisma's, not CPU.
describe.concurrent('the blocks that run', () => {
  it.for(distinct(plainRuns))('%s runs to exit 0 against its own Redis and PostgreSQL', async ([, b], { expect }) => {
    const s = await services(b)
    try {
      const outcome = await start(compiled(b), s.env).done
      expect(outcome, `${outcome.stdout}\n${outcome.stderr}`).toMatchObject({ timedOut: false, code: 0 })
    } finally {
      await s.close()
    }
  })

  it('control: a program that never quits its client is reported as a hang, not passed', async ({ expect }) => {
    const s = await services(HANGS)
    try {
      const outcome = await start(compiled(HANGS, 'control-hangs'), s.env, undefined, { afterOutputMs: 3_000 }).done
      expect(outcome).toMatchObject({ timedOut: true, stdout: 'PONG\n' })
    } finally {
      await s.close()
    }
  })

  // Redis down (issue 35): a block must end with the lock's typed error, not hang on a client
  // that waits for a connection that never comes (ioredis queues `quit()`), and not pass silently.
  // The bound is the harness's, with room for a loaded machine: that acquire fails at once rather
  // than after `waitMs` is the lock's own test (packages/lock), where the timing is controlled.
  it.for(distinct(runs.filter((b) => b.code.includes('REDIS_URL'))))('%s exits with LockUnavailableError when Redis is down', async ([, b], { expect }) => {
    const s = await services(b)
    try {
      const down = async () => `redis://127.0.0.1:${await freePort()}` // nothing listens there
      const env: NodeJS.ProcessEnv = { ...s.env, REDIS_URL: await down() }
      if (s.env.REDIS_URLS !== undefined) env.REDIS_URLS = [await down(), await down(), await down()].join(',')
      const outcome = await start(compiled(b), env, 45_000).done
      expect(outcome.timedOut, `${outcome.stdout}\n${outcome.stderr}`).toBe(false)
      expect(outcome.code, outcome.stdout).not.toBe(0)
      expect(outcome.stderr).toMatch(/LockUnavailableError: .*(the connection to Redis is down|did not answer)/)
    } finally {
      await s.close()
    }
  })

  // 15 s, not the blocks' 45: past the lock's whole default wait (10 s) and past the slowest block's
  // exit with Redis down (about 3 s quiet, 11 s loaded), it still runs — it never ends by itself
  // (ioredis queues the quit() for a connection that never comes); 45 s cost 30 s of every npm test.
  it('control: with Redis down, a program that quit()s its client after the lock’s error is reported as a hang', async ({ expect }) => {
    const outcome = await start(compiled(QUITS, 'control-quits'), { REDIS_URL: `redis://127.0.0.1:${await freePort()}` }, 15_000).done
    expect(outcome.timedOut, outcome.stderr).toBe(true)
  })

  it.for(scripts.map((b) => [where(b), b] as const))('%s (CommonJS) runs to exit 0', async ([, b], { expect }) => {
    const outcome = await start(join('docs', `${slug(b)}.cjs`), {}).done
    expect(outcome, `${outcome.stdout}\n${outcome.stderr}`).toMatchObject({ timedOut: false, code: 0 })
  })
})

describe.concurrent('the pay-an-invoice program of the quick starts, as the failure it must survive', () => {
  it('is in the root README and in each package README', ({ expect }) => {
    expect(pays.map((b) => b.doc).sort()).toEqual(['README.md', ...PACKAGES.map((p) => `packages/${p}/README.md`)].sort())
  })

  /**
   * Holder A charges invoice 42 and freezes (SIGSTOP) before it hears back; its lease runs out (the
   * lock's key deleted, as its TTL would); holder B — a newer token — pays the invoice again; A wakes.
   */
  async function chargeFreezePayAgain(b: Block, file: string) {
    const s = await services(b)
    const admin = new Redis(s.redis.url)
    let a: ReturnType<typeof start> | undefined
    try {
      const frozen = new Promise<void>((resolve) => {
        s.provider.onNextCharge(() => {
          process.kill((a as { pid: number }).pid, 'SIGSTOP')
          resolve()
        })
      })
      a = start(file, s.env, 90_000)
      const early = a.done.then((o) => {
        throw new Error(`holder A exited before it charged: ${o.stdout}${o.stderr}`)
      })
      early.catch(() => {})
      await Promise.race([frozen, early])
      const deleted = await admin.del(resourceKeys(LOCK_DEFAULTS.prefix, 'invoice:42').lock)
      const holderB = await start(file, s.env).done
      signal(a.pid, 'SIGCONT')
      const holderA = await a.done
      const invoice = await queryOne<{ chargeId: string | null; fenceToken: string }>(s.env.DATABASE_URL as string, 'SELECT "chargeId", "fenceToken"::text FROM "Invoice" WHERE id = 42')
      return { deleted, holderA, holderB, invoice, charges: [...s.provider.charges], replays: s.provider.replays }
    } finally {
      if (a !== undefined) signal(a.pid, 'SIGCONT')
      admin.disconnect()
      await s.close()
    }
  }

  it.for(distinct(pays))('%s: one charge at the provider (B’s call replays A’s), B records it, A is refused by the fence', async ([, b], { expect }) => {
    const r = await chargeFreezePayAgain(b, compiled(b))
    expect(r.deleted).toBe(1)
    expect(r.holderB, r.holderB.stderr).toMatchObject({ code: 0, timedOut: false })
    expect(r.holderB.stdout).toMatch(/^invoice 42 paid by ch_1\n/)
    expect(r.charges).toEqual([{ chargeId: 'ch_1', amountCents: 1999, idempotencyKey: 'invoice:42' }])
    expect(r.replays).toBe(1)
    expect(r.invoice.chargeId).toBe('ch_1')
    // A wakes up and records nothing: its fenced write is refused.
    expect(r.holderA.timedOut).toBe(false)
    expect(r.holderA.code).toBe(1)
    expect(r.holderA.stderr).toContain('StaleFencingTokenError')
  })

  // The control: the first of the programs (the others differ in what they count, not in what they charge).
  it.for(distinct(pays).slice(0, 1))('%s with the token as the idempotency key (the unprotected variant): two charges', async ([, b], { expect }) => {
    const r = await chargeFreezePayAgain(b, compiled(b, `${slug(b)}-token-key`))
    expect(r.holderB.code, r.holderB.stderr).toBe(0)
    expect(r.charges).toHaveLength(2)
    expect(r.replays).toBe(0)
    // The invoice's row looks right (one charge recorded, B's) while the buyer paid twice.
    expect(r.invoice.chargeId).toBe('ch_2')
    expect(r.holderA.stderr).toContain('StaleFencingTokenError')
  })
})

describe.concurrent('docs/FENCING.md: the blocks without Prisma (Drizzle, Kysely), under a current and an older token', () => {
  it('are the Drizzle and the Kysely examples', ({ expect }) => {
    expect(fencingBlocks.map((b) => (b.code.includes('drizzle-orm') ? 'drizzle' : b.code.includes('kysely') ? 'kysely' : '?'))).toEqual(['drizzle', 'kysely'])
  })

  it.for(fencingBlocks.map((b) => [where(b), b] as const))('%s sells under token 11, is refused under 10, and exits 0 each time', async ([, b], { expect }) => {
    const s = await services(b)
    try {
      const current = await start(compiled(b), { ...s.env, DOCS_TOKEN: '11' }).done
      expect(current, current.stderr).toMatchObject({ code: 0, stdout: 'sold\n' })
      const stale = await start(compiled(b), { ...s.env, DOCS_TOKEN: '10' }).done
      expect(stale, stale.stderr).toMatchObject({ code: 0 })
      expect(stale.stdout).toMatch(/^refused/)
      expect(await queryOne(s.env.DATABASE_URL as string, `SELECT stock, "fenceToken"::text AS fence FROM "Product" WHERE sku = 'A-1'`)).toEqual({ stock: 9, fence: '11' })
    } finally {
      await s.close()
    }
  })
})

describe('the package READMEs stand alone in their tarballs', () => {
  const homepage = 'https://github.com/fencelock/fencelock'

  it.each(PACKAGES)('packages/%s/README.md links only to absolute URLs, and those into the repository name files and headings that exist', (name) => {
    const text = readFileSync(join(repoRoot, 'packages', name, 'README.md'), 'utf8')
    const links = [...text.matchAll(/\]\(([^)\s]+)\)/g)].map((m) => m[1] as string)
    expect(links.filter((l) => !/^https?:\/\//.test(l) && !l.startsWith('#'))).toEqual([])
    for (const link of links.filter((l) => l.startsWith(`${homepage}/blob/main/`) || l.startsWith(`${homepage}/tree/main/`))) {
      const [path, anchor] = link.slice(`${homepage}/blob/main/`.length).split('#') as [string, string | undefined]
      const file = join(repoRoot, path)
      expect(() => readFileSync(file.endsWith('/') ? `${file}README.md` : file), link).not.toThrow()
      if (anchor !== undefined) expect(headingsOf(readFileSync(file, 'utf8')), link).toContain(anchor)
    }
  })

  it('@fencelock/lock: every option of LOCK_DEFAULTS, every error class and every event type in its tables', async () => {
    const text = readFileSync(join(repoRoot, 'packages', 'lock', 'README.md'), 'utf8')
    const lock = await import('@fencelock/lock')
    for (const option of Object.keys(LOCK_DEFAULTS)) expect(text, option).toMatch(row(option))
    for (const error of Object.keys(lock).filter((k) => /^[A-Z]\w*Error$/.test(k))) expect(text, error).toMatch(row(error))
    const events = readFileSync(join(repoRoot, 'packages', 'lock', 'src', 'events.ts'), 'utf8')
    for (const [, type = '?'] of events.matchAll(/type: '([\w-]+)'/g)) expect(text, type).toMatch(row(type))
  })

  it('@fencelock/fencing and @fencelock/metrics: every error class in their tables', async () => {
    for (const [name, module] of [
      ['fencing', await import('@fencelock/fencing')],
      ['metrics', await import('@fencelock/metrics')],
    ] as const) {
      const text = readFileSync(join(repoRoot, 'packages', name, 'README.md'), 'utf8')
      for (const error of Object.keys(module).filter((k) => /^[A-Z]\w*Error$/.test(k))) expect(text, `${name}: ${error}`).toMatch(row(error))
    }
  })
})

/** A table row whose first cell is `name` in backticks (padded or not). */
function row(name: string): RegExp {
  return new RegExp(`^\\|\\s*\`${name}\`\\s*\\|`, 'm')
}

/** GitHub's anchors of a Markdown file's headings. */
function headingsOf(markdown: string): string[] {
  return [...markdown.matchAll(/^#{1,6} (.+)$/gm)].map((m) =>
    (m[1] as string)
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\s_-]/gu, '')
      .replace(/\s/g, '-'),
  )
}
