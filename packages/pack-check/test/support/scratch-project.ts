/**
 * The packages as a user gets them, installed once per test run and shared by every test file of
 * this package (the global setup makes it): `npm pack` of @fencelock/lock, fencing and metrics (built
 * first by turbo), installed with their peers — and what the docs' examples import besides (express,
 * Drizzle, Kysely, the OpenTelemetry SDK) — into a scratch project outside the workspace, where no workspace link and no
 * hoisted module can help; then `prisma generate` of the user's schema (fixtures/schema.prisma).
 */
import { spawnSync } from 'node:child_process'
import { copyFileSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

const here = dirname(fileURLToPath(import.meta.url))
export const repoRoot = join(here, '..', '..', '..', '..')
export const PACKAGES = ['lock', 'fencing', 'metrics'] as const
// The versions the workspace is tested with (root and package manifests); etcd3 is the lock's
// optional peer for etcd (docs/LOCK.md's etcd section imports it), @valkey/valkey-glide for GLIDE (its
// "Which client" section does).
const PEERS = ['ioredis@6.0.0', 'etcd3@1.1.2', 'redis@6.3.1', 'iovalkey@0.4.0', '@valkey/valkey-glide@2.5.2', 'prom-client@15.1.3', '@opentelemetry/api@1.9.1', '@prisma/client@7.10.0', '@prisma/adapter-pg@7.10.1', 'pg@8.23.1', 'prisma@7.10.1', 'typescript@5.9.3', '@types/node@20']
// What the doc blocks import besides the packages and their peers (the versions the workspace has):
// docs/METRICS.md's OpenTelemetry section sets up the SDK, as an application does.
const DOC_IMPORTS = [
  'express@5.3.0',
  '@types/express@5.0.6',
  'drizzle-orm@0.45.4',
  'kysely@0.28.19',
  '@types/pg@8.23.1',
  '@opentelemetry/context-async-hooks@2.12.0',
  '@opentelemetry/exporter-prometheus@0.223.0',
  '@opentelemetry/sdk-metrics@2.12.0',
  '@opentelemetry/sdk-trace-base@2.12.0',
]

/** The scratch project: its folder and the three tarballs installed in it. */
export interface ScratchProject {
  readonly dir: string
  readonly tarballs: readonly string[]
}

/** Runs a command to completion; throws with its output when it fails. */
export function run(command: string, args: readonly string[], cwd: string, env: NodeJS.ProcessEnv = {}): string {
  const result = spawnSync(command, args, { cwd, encoding: 'utf8', env: { ...process.env, ...env }, maxBuffer: 64 * 1024 * 1024 })
  if (result.status !== 0) throw new Error(`${command} ${args.join(' ')} failed (${result.status ?? result.signal}):\n${result.stdout}\n${result.stderr}`)
  return result.stdout
}

/** Packs, installs and generates the scratch project (about 20-40 s, mostly `npm install`). */
export function createScratchProject(): ScratchProject {
  const dir = mkdtempSync(join(tmpdir(), 'fencelock-consumer-'))
  const tarballs: string[] = []
  for (const name of PACKAGES) {
    const out = run('npm', ['pack', '--silent', '--pack-destination', dir], join(repoRoot, 'packages', name))
    tarballs.push(join(dir, out.trim().split('\n').at(-1) as string))
  }
  // An ES-module project, as the docs' examples are (top-level await); the consumer checks name
  // their module system by extension (esm.mjs, cjs.cjs).
  writeFileSync(join(dir, 'package.json'), `${JSON.stringify({ name: 'fencelock-consumer', private: true, type: 'module' }, null, 2)}\n`)
  copyFileSync(join(here, '..', 'fixtures', 'schema.prisma'), join(dir, 'schema.prisma'))
  for (const file of readdirSync(join(here, '..', 'consumer'))) copyFileSync(join(here, '..', 'consumer', file), join(dir, file))
  mkdirSync(join(dir, 'docs'))
  run('npm', ['install', '--no-audit', '--no-fund', '--prefer-offline', '--loglevel=error', ...tarballs, ...PEERS, ...DOC_IMPORTS], dir)
  // Prisma's schema engine is not needed to generate a client; where it could not be downloaded,
  // the repository's stub stands in (as scripts/prisma-engine.mjs does for the workspace).
  run('npx', ['prisma', 'generate', '--schema', 'schema.prisma'], dir, {
    CHECKPOINT_DISABLE: '1',
    PRISMA_HIDE_UPDATE_MESSAGE: '1',
    PRISMA_SCHEMA_ENGINE_BINARY: process.env.PRISMA_SCHEMA_ENGINE_BINARY ?? join(repoRoot, 'scripts', 'schema-engine-stub.sh'),
  })
  return { dir, tarballs }
}

export function removeScratchProject(project: ScratchProject | undefined): void {
  if (project !== undefined) rmSync(project.dir, { recursive: true, force: true })
}

/** The database URL for the scratch project's programs: no `?schema=` (they make or get their own). */
export function databaseUrl(): string {
  const url = new URL(process.env.DATABASE_URL || 'postgresql://postgres@127.0.0.1:5432/test')
  url.searchParams.delete('schema')
  return url.toString()
}
