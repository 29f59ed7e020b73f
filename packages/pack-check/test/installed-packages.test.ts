/**
 * The packages as a user gets them: `npm pack` of @fencelock/lock, fencing and metrics (built
 * first by turbo), the tarballs linted (publint, @arethetypeswrong/cli), then installed with their
 * peers into a scratch project outside the workspace — no workspace link, no hoisted module can
 * help — and run from an ES module and from a CommonJS file against the real Redis and
 * PostgreSQL, and type-checked by a TypeScript consumer with skipLibCheck: false.
 */
import { execFileSync, spawnSync } from 'node:child_process'
import { copyFileSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'

const here = dirname(fileURLToPath(import.meta.url))
const root = join(here, '..', '..', '..')
const PACKAGES = ['lock', 'fencing', 'metrics'] as const
// The versions the workspace is tested with (root and package manifests).
const PEERS = ['ioredis@6.0.0', 'prom-client@15.1.3', '@prisma/client@7.10.0', '@prisma/adapter-pg@7.10.1', 'pg@8.23.1', 'prisma@7.10.1', 'typescript@5.9.3', '@types/node@20']

let scratch: string
const tarballs: string[] = []

const databaseUrl = () => {
  // The scratch project has no `?schema=`: it makes a schema of its own.
  const url = new URL(process.env.DATABASE_URL || 'postgresql://postgres@127.0.0.1:5432/test')
  url.searchParams.delete('schema')
  return url.toString()
}

function run(command: string, args: string[], cwd: string, env: NodeJS.ProcessEnv = {}) {
  const result = spawnSync(command, args, { cwd, encoding: 'utf8', env: { ...process.env, ...env } })
  if (result.status !== 0) throw new Error(`${command} ${args.join(' ')} failed (${result.status}):\n${result.stdout}\n${result.stderr}`)
  return result.stdout
}

beforeAll(() => {
  scratch = mkdtempSync(join(tmpdir(), 'fencelock-consumer-'))
  for (const name of PACKAGES) {
    const out = run('npm', ['pack', '--silent', '--pack-destination', scratch], join(root, 'packages', name))
    tarballs.push(join(scratch, out.trim().split('\n').at(-1)!))
  }
  writeFileSync(join(scratch, 'package.json'), JSON.stringify({ name: 'fencelock-consumer', private: true }, null, 2))
  // The user's Prisma schema; prisma-client-js generates plain JavaScript, loadable from both module systems.
  writeFileSync(
    join(scratch, 'schema.prisma'),
    'generator client {\n  provider = "prisma-client-js"\n}\n\ndatasource db {\n  provider = "postgresql"\n}\n\nmodel Widget {\n  id         Int    @id\n  qty        Int\n  fenceToken BigInt @default(0)\n}\n',
  )
  for (const file of readdirSync(join(here, 'consumer'))) copyFileSync(join(here, 'consumer', file), join(scratch, file))
  run('npm', ['install', '--no-audit', '--no-fund', '--prefer-offline', '--loglevel=error', ...tarballs, ...PEERS], scratch)
  // Prisma's schema engine is not needed to generate a client; where it could not be downloaded,
  // the repository's stub stands in (as scripts/prisma-engine.mjs does for the workspace).
  run('npx', ['prisma', 'generate', '--schema', 'schema.prisma'], scratch, {
    CHECKPOINT_DISABLE: '1',
    PRISMA_HIDE_UPDATE_MESSAGE: '1',
    PRISMA_SCHEMA_ENGINE_BINARY: process.env.PRISMA_SCHEMA_ENGINE_BINARY ?? join(root, 'scripts', 'schema-engine-stub.sh'),
  })
})

afterAll(() => {
  if (scratch !== undefined) rmSync(scratch, { recursive: true, force: true })
})

const EXPECTED = {
  tokenType: 'bigint',
  tokensIncrease: true,
  metricsExported: true,
  fencedWrite: true,
  staleRefused: true,
  guardRefused: true,
  headersRoundTrip: true,
}

describe('the packed packages', () => {
  it('ship a README, the LICENSE, dist and the sources their maps point at, and nothing of the tests', () => {
    for (const tarball of tarballs) {
      const files = execFileSync('tar', ['tzf', tarball], { encoding: 'utf8' }).split('\n')
      for (const file of ['package/README.md', 'package/LICENSE', 'package/package.json', 'package/dist/index.js', 'package/dist/index.d.ts', 'package/src/index.ts']) {
        expect(files, `${tarball}: ${file}`).toContain(file)
      }
      expect(files.filter((f) => f.includes('/test/'))).toEqual([])
    }
  })

  it('ship only what they mean to support: no @internal member in a declaration file (stripInternal)', () => {
    const declared = execFileSync('tar', ['xzOf', tarballs[0]!, '--wildcards', 'package/dist/*.d.ts'], { encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 })
    expect(declared).not.toContain('@internal')
    expect(declared).not.toContain('releaseOnClose')
    // A Lock is granted by a Locker, never built by hand: no constructor in its declaration.
    expect(declared).toMatch(/export declare class Lock \{/)
    expect(declared.slice(declared.indexOf('export declare class Lock {')).split('\n}')[0]).not.toContain('constructor(')
  })

  it.each(PACKAGES)('@fencelock/%s passes publint', (name) => {
    const out = run('npx', ['publint', '--strict'], join(root, 'packages', name))
    expect(out).toContain('All good!')
  })

  it('pass @arethetypeswrong/cli: types resolve for node10, node16 and bundlers', () => {
    // cjs-resolves-to-esm is the design: the packages are ES modules, and Node 20.19+ (their
    // `engines`) loads them from require() through the `default` condition — tested below.
    for (const tarball of tarballs) run('npx', ['attw', tarball, '--ignore-rules', 'cjs-resolves-to-esm', '--format', 'table-flipped'], root)
  })

  it('run from an ES module against the real Redis and PostgreSQL', () => {
    const out = run(process.execPath, ['esm.mjs'], scratch, { PACK_CHECK_DATABASE_URL: databaseUrl() })
    expect(JSON.parse(out)).toEqual(EXPECTED)
  })

  it('run from a CommonJS file (require) against the real Redis and PostgreSQL', () => {
    const out = run(process.execPath, ['cjs.cjs'], scratch, { PACK_CHECK_DATABASE_URL: databaseUrl() })
    expect(JSON.parse(out)).toEqual(EXPECTED)
  })

  it('type-check in a TypeScript project with skipLibCheck: false', () => {
    run(join(scratch, 'node_modules', '.bin', 'tsc'), ['-p', 'tsconfig.json'], scratch)
  })
})
