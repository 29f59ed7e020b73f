/**
 * Every TypeScript example of docs/FENCING.md compiles against this package's sources, with its
 * tsconfig (strict): an example that stops compiling — the API moved, or the doc was edited —
 * fails here rather than in a reader's editor.
 *
 * Each ```ts block is compiled as it stands, as a module of its own placed (in memory, nothing is
 * written) in docs/, so its relative imports resolve as they read there (`../generated/prisma/
 * client.js` is the repository's Prisma client). `@fencelock/fencing` resolves to `src/`, not to a
 * build. What a block takes as given (`prisma`, `locker`, `sku`, ...) is declared in GIVEN, a global
 * `declare global` of a module: a block that declares the same name shadows it. A block that cannot compile on its own
 * is opted out with `<!-- no-typecheck -->` on the line before its fence (none is, today).
 *
 * Blocks marked `<!-- runs -->` on the line before their fence (the Drizzle and Kysely examples) also
 * run, as they stand, to exit: each written to a scratch file beside this test with its given values
 * (`connectionString`, `schema`, `lock`, `sku`) defined first and `@fencelock/fencing` pointed at
 * `src/`, run with tsx against a freshly migrated schema, twice — with a current token (it writes) and
 * an older one (it reports the refusal) — and the row counted in the database.
 *
 * The service examples name their models generically (`FencedResource`, `entry`); the repository's
 * schema has models of the same shape under the demo gateway's names, so those names are mapped
 * (SAME_SHAPE) before compiling.
 */
import { spawnSync } from 'node:child_process'
import { readFileSync, rmSync, writeFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import ts from 'typescript'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { databaseTarget } from '@fencelock/devkit/database-url'
import { createTestDatabase, seedProduct, type TestDatabase } from '../support/database.js'

const here = dirname(fileURLToPath(import.meta.url))
const packageDir = join(here, '..', '..')
const repoDir = join(packageDir, '..', '..')
const docsDir = join(repoDir, 'docs')
const DOC = 'FENCING.md'
const OPT_OUT = '<!-- no-typecheck -->'
const RUNS = '<!-- runs -->'

/** What the examples take as given, as globals. Paths are from docs/. */
const GIVEN = `export {}
declare global {
const connectionString: string
const schema: string
const metrics: { onFencingRejection(rejection: import('@fencelock/fencing').FencingRejection): void }
const prisma: import('../generated/prisma/client.js').PrismaClient
const db: import('../packages/fencing/test/support/database.js').FencedDb
// A lock of @fencelock/lock, structurally (this package does not depend on it).
interface GivenLock { readonly resource: string; readonly token: bigint; readonly signal: AbortSignal }
const lock: GivenLock
const locker: { using<T>(resource: string, fn: (lock: GivenLock) => Promise<T> | T): Promise<T> }
const sku: string
const buyerId: string
const id: number
const amountCents: number
const ledger: string
const app: import('express').Express
class SoldOutError extends Error { constructor(sku: string) }
function checkout(sku: string): Promise<unknown>
}
`

/**
 * Generic model names of the examples → the repository schema's models of the same shape:
 * `FencedResource { resource String @id  fenceToken BigInt @default(0) }` is `GatewayFence`; an
 * entry the service writes is a `GatewayCharge`.
 */
const SAME_SHAPE: readonly [RegExp, string][] = [
  [/\bFencedResource\b/g, 'GatewayFence'],
  [/\btx\.entry\b/g, 'tx.gatewayCharge'],
]

interface Block {
  /** Line of the doc where the code starts (1-based). */
  readonly line: number
  readonly code: string
  /** Marked to run as well (`<!-- runs -->`). */
  readonly runs?: boolean
}

/** The ```ts blocks of `markdown` but those opted out. */
function tsBlocks(markdown: string): Block[] {
  const lines = markdown.split('\n')
  const blocks: Block[] = []
  for (let i = 0; i < lines.length; i++) {
    if (lines[i]?.trimEnd() !== '```ts') continue
    const end = lines.findIndex((line, j) => j > i && line.trimEnd() === '```')
    if (end < 0) throw new Error(`${DOC}:${i + 1}: a \`\`\`ts block that never closes`)
    if (lines[i - 1]?.trim() !== OPT_OUT) blocks.push({ line: i + 2, code: lines.slice(i + 1, end).join('\n'), runs: lines[i - 1]?.trim() === RUNS })
    i = end
  }
  return blocks
}

/** The compile errors of `blocks` (as `doc:line: message`), each block a module of its own. */
function compileErrors(blocks: readonly Block[]): string[] {
  const configPath = join(packageDir, 'tsconfig.json')
  const config = ts.readConfigFile(configPath, (p) => ts.sys.readFile(p))
  const parsed = ts.parseJsonConfigFileContent(config.config, ts.sys, packageDir)
  const options: ts.CompilerOptions = { ...parsed.options, noEmit: true, paths: { '@fencelock/fencing': [join(packageDir, 'src', 'index.ts')] } }

  const files = new Map<string, string>([[join(docsDir, `${DOC}.given.ts`), GIVEN]])
  const blockOf = new Map<string, Block>()
  for (const block of blocks) {
    const name = join(docsDir, `${DOC}.line-${block.line}.ts`)
    let code = block.code
    for (const [pattern, replacement] of SAME_SHAPE) code = code.replace(pattern, replacement)
    // `export {}`: a module even without imports, so its names shadow GIVEN's instead of clashing.
    files.set(name, `${code}\nexport {}\n`)
    blockOf.set(name, block)
  }

  const host = ts.createCompilerHost(options)
  const { getSourceFile, fileExists, readFile } = host
  host.getSourceFile = (name, language, ...rest) => {
    const text = files.get(name)
    return text === undefined ? getSourceFile.call(host, name, language, ...rest) : ts.createSourceFile(name, text, language)
  }
  host.fileExists = (name) => files.has(name) || fileExists.call(host, name)
  host.readFile = (name) => files.get(name) ?? readFile.call(host, name)

  const program = ts.createProgram([...files.keys()], options, host)
  return ts.getPreEmitDiagnostics(program).flatMap((d) => {
    const message = `TS${d.code}: ${ts.flattenDiagnosticMessageText(d.messageText, '\n')}`
    if (d.file === undefined) return [message]
    const block = blockOf.get(d.file.fileName)
    const { line } = d.file.getLineAndCharacterOfPosition(d.start ?? 0)
    // Errors of other files (the package's own) are the package typecheck's business, but GIVEN's are ours.
    if (block === undefined) return files.has(d.file.fileName) ? [`GIVEN:${line + 1}: ${message}`] : []
    return [`docs/${DOC}:${block.line + line}: ${message}`]
  })
}

describe(`docs/${DOC}`, () => {
  const blocks = tsBlocks(readFileSync(join(docsDir, DOC), 'utf8'))
  // A control compiled with them, in the same program (one program with Prisma's and express's
  // types takes seconds): a type error in an example is reported, at its line.
  const control: Block = { line: 100_000, code: "import { parseFenceToken } from '@fencelock/fencing'\nconst n: number = parseFenceToken(1n)" }
  let errors: string[] | undefined
  const compiled = () => (errors ??= compileErrors([...blocks, control]))
  const isControl = (error: string) => error.startsWith(`docs/${DOC}:${control.line + 1}: `)

  it('has its examples found, the service example among them, and the two that run (Drizzle, Kysely)', () => {
    expect(blocks.length).toBeGreaterThanOrEqual(9)
    expect(blocks.some((b) => b.code.includes('fencingMiddleware('))).toBe(true)
    expect(blocks.filter((b) => b.runs).map((b) => (b.code.includes('drizzle-orm') ? 'drizzle' : b.code.includes('kysely') ? 'kysely' : '?'))).toEqual(['drizzle', 'kysely'])
  })

  it('every TypeScript example compiles', () => {
    expect(compiled().filter((e) => !isControl(e))).toEqual([])
  }, 120_000)

  it('control: an example with a type error is reported, at its line in the doc', () => {
    expect(compiled().filter(isControl)).toEqual([expect.stringMatching(/: TS2322: /)])
  }, 120_000)
})

describe(`docs/${DOC}: the examples that run`, () => {
  const blocks = tsBlocks(readFileSync(join(docsDir, DOC), 'utf8')).filter((b) => b.runs)
  let t: TestDatabase

  beforeAll(async () => {
    t = await createTestDatabase('docs_run')
  })

  afterAll(async () => {
    await t?.close()
  })

  /** Runs `block` as a program with the given values; its exit status and output. */
  function run(block: Block, sku: string, token: bigint): { status: number | null; out: string } {
    const file = join(here, `.run-line-${block.line}-${process.pid}.ts`)
    const prelude = [
      'const connectionString = process.env.DOCS_DATABASE_URL as string',
      'const schema = process.env.DOCS_SCHEMA as string',
      'const sku = process.env.DOCS_SKU as string',
      'const lock = { resource: `product:${sku}`, token: BigInt(process.env.DOCS_TOKEN as string) }',
    ].join('\n')
    const code = block.code.replaceAll("'@fencelock/fencing/pg'", "'../../src/pg.js'").replaceAll("'@fencelock/fencing'", "'../../src/index.js'")
    writeFileSync(file, `${prelude}\n${code}\nexport {}\n`)
    try {
      const result = spawnSync(process.execPath, ['--import', 'tsx', file], {
        cwd: packageDir,
        encoding: 'utf8',
        env: { ...process.env, DOCS_DATABASE_URL: databaseTarget().connectionString, DOCS_SCHEMA: t.schema, DOCS_SKU: sku, DOCS_TOKEN: token.toString() },
        timeout: 60_000,
      })
      return { status: result.status, out: `${result.stdout}${result.stderr}` }
    } finally {
      rmSync(file, { force: true })
    }
  }

  it.each(blocks.map((b) => [b.line, b] as const))('the block at line %i sells under a current token and is refused under an older one, and exits 0', async (_line, block) => {
    const p = await seedProduct(t.base, 10n, 'docs')
    const current = run(block, p.sku, 11n)
    expect(current, current.out).toMatchObject({ status: 0 })
    expect(current.out.trim()).toBe('sold')
    expect(await t.base.product.findUniqueOrThrow({ where: { id: p.id } })).toMatchObject({ stock: 9, fenceToken: 11n })
    const stale = run(block, p.sku, 10n)
    expect(stale, stale.out).toMatchObject({ status: 0 })
    expect(stale.out.trim()).toMatch(/^refused/)
    expect(await t.base.product.findUniqueOrThrow({ where: { id: p.id } })).toMatchObject({ stock: 9, fenceToken: 11n })
  }, 120_000)
})
