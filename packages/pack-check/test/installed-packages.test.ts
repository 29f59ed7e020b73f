/**
 * The packages as a user gets them: `npm pack` of @fencelock/lock, fencing and metrics (built
 * first by turbo), the tarballs linted (publint, @arethetypeswrong/cli), then installed with their
 * peers into a scratch project outside the workspace (support/scratch-project.ts, made once by the
 * global setup) — no workspace link, no hoisted module can help — and run from an ES module and from
 * a CommonJS file against the real Redis and PostgreSQL, and type-checked by a TypeScript consumer
 * with skipLibCheck: false.
 */
import { execFileSync } from 'node:child_process'
import { join } from 'node:path'
import { describe, expect, inject, it } from 'vitest'
import { databaseUrl, PACKAGES, repoRoot as root, run } from './support/scratch-project.js'

const { dir: scratch, tarballs } = inject('scratch')

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
    expect(declared).toMatch(/export declare class Lock (implements [\w, ]+ )?\{/)
    expect(declared.slice(declared.indexOf('export declare class Lock ')).split('\n}')[0]).not.toContain('constructor(')
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

  it('install the fencing package’s bin: npx fencelock-guard prints the guard’s SQL', () => {
    const sql = run(join(scratch, 'node_modules', '.bin', 'fencelock-guard'), ['--table', 'Widget', '--column', 'fenceToken', '--key', 'id'], scratch)
    expect(sql).toMatch(/^-- FenceLock database guard for "Widget"\."fenceToken" \(key: "id"\)\./)
    expect(run('npx', ['--no-install', 'fencelock-guard', '--help'], scratch)).toMatch(/^Usage: fencelock-guard/)
  })
})
