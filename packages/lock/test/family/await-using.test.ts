/**
 * `await using`: a user's program compiled by TypeScript (target ES2022, lib with
 * esnext.disposable) and run by this machine's Node (20), in a process of its own.
 */
import { spawn } from 'node:child_process'
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import ts from 'typescript'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { unique } from '../support/connections.js'
import { startRedisServer, type RedisServer } from '../support/redis-server.js'

const packageDir = resolve(dirname(fileURLToPath(import.meta.url)), '../..')
// Under the package's node_modules: Node finds ioredis from there, and nothing lands in dist/.
const outDir = join(packageDir, 'node_modules', '.cache', `await-using-${process.pid}`)

let server: RedisServer
beforeAll(async () => {
  server = await startRedisServer()
})
afterAll(() => {
  rmSync(outDir, { recursive: true, force: true })
})

/**
 * Compiles the fixture and the sources it imports with TypeScript, file by file (the package is
 * `isolatedModules`, so that is what tsc emits too; the types are checked by the package's
 * `typecheck`, whose tsconfig includes the fixture): target ES2022, so `await using` is lowered
 * to TypeScript's helpers.
 */
function compile(): string {
  const files = [
    join('test', 'fixtures', 'await-using.ts'),
    ...readdirSync(join(packageDir, 'src'), { recursive: true, encoding: 'utf8' })
      .filter((f) => f.endsWith('.ts'))
      .map((f) => join('src', f)),
  ]
  for (const file of files) {
    const { outputText, diagnostics } = ts.transpileModule(readFileSync(join(packageDir, file), 'utf8'), {
      fileName: file,
      reportDiagnostics: true,
      compilerOptions: {
        target: ts.ScriptTarget.ES2022,
        lib: ['lib.es2023.d.ts', 'lib.esnext.disposable.d.ts'],
        module: ts.ModuleKind.ESNext,
        verbatimModuleSyntax: true,
      },
    })
    expect(diagnostics ?? []).toEqual([])
    const out = join(outDir, file.replace(/\.ts$/, '.js'))
    mkdirSync(dirname(out), { recursive: true })
    writeFileSync(out, outputText)
  }
  // Node decides ESM by the nearest package.json, and does not look past node_modules for it.
  writeFileSync(join(outDir, 'package.json'), '{ "type": "module" }\n')
  return join(outDir, 'test', 'fixtures', 'await-using.js')
}

function run(file: string, env: Record<string, string>): Promise<{ code: number | null; out: string; err: string }> {
  return new Promise((done, fail) => {
    const child = spawn(process.execPath, [file], { env: { ...process.env, ...env } })
    let out = ''
    let err = ''
    child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()))
    child.stderr.on('data', (chunk: Buffer) => (err += chunk.toString()))
    child.on('error', fail)
    child.on('close', (code) => done({ code, out, err }))
  })
}

it('await using releases the lock at the end of the block, when it throws, and never throws for a lost lock', async () => {
  const file = compile()
  // tsc lowered the statement (Node 20 has no `await using` syntax): the helpers it emitted run here.
  expect(readFileSync(file, 'utf8')).toContain('__addDisposableResource')
  const { code, out, err } = await run(file, { REDIS_PORT: String(server.port), RESOURCE: unique('await-using') })
  expect({ code, err }).toEqual({ code: 0, err: '' })
  const seen = JSON.parse(out) as Record<string, unknown>
  expect(seen).toMatchObject({
    heldInside: true,
    heldAfterBlock: false,
    thrown: 'boom',
    heldAfterThrow: false,
    disposeThrew: false,
    // The lost lock's release is reported, with outcome `expired`.
    released: ['released', 'released', 'expired', 'released', 'released'],
    setHeldInside: true,
    setHeldAfter: 0,
  })
  expect(String(seen['node'])).toMatch(/^v\d+\./)
}, 60_000)
