/**
 * Generates the Prisma client of a test fixture schema (test/fixtures/<name>/schema.prisma) into
 * its own `generated/` folder (gitignored), offline as the root setup does (scripts/prisma-engine.mjs:
 * the schema engine stub where the real engine is absent). A hash of the schema and the Prisma
 * versions, kept beside the output, makes a second run a no-op. Run by the global setup, before any
 * test file imports a fixture client.
 */
import { spawnSync } from 'node:child_process'
import { createHash } from 'node:crypto'
import { existsSync, readFileSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

const fixtures = join(dirname(fileURLToPath(import.meta.url)), '..', 'fixtures')
const require = createRequire(import.meta.url)
const versionOf = (name: string) => (JSON.parse(readFileSync(require.resolve(`${name}/package.json`), 'utf8')) as { version: string }).version

/** Generates `test/fixtures/<name>/generated` from its schema.prisma unless it is current. */
export async function generateFixtureClient(name: string): Promise<void> {
  const dir = join(fixtures, name)
  const schema = join(dir, 'schema.prisma')
  const output = join(dir, 'generated')
  const hashFile = join(output, '.schema-hash')
  const hash = createHash('sha256')
    .update(readFileSync(schema))
    .update(`\0prisma@${versionOf('prisma')}\0@prisma/client@${versionOf('@prisma/client')}`)
    .digest('hex')
  if (existsSync(join(output, 'client.ts')) && existsSync(hashFile) && readFileSync(hashFile, 'utf8').trim() === hash) return
  const env = { ...process.env, CHECKPOINT_DISABLE: '1', PRISMA_HIDE_UPDATE_MESSAGE: '1' }
  // The repository's own switch (plain JavaScript, so imported by its path at run time).
  const engine = new URL('../../../../scripts/prisma-engine.mjs', import.meta.url).href
  const { useSchemaEngineStubIfAbsent } = (await import(engine)) as { useSchemaEngineStubIfAbsent(env: NodeJS.ProcessEnv): boolean }
  useSchemaEngineStubIfAbsent(env)
  const cli = join(dirname(require.resolve('prisma/package.json')), 'build', 'index.js')
  // cwd: the fixture's folder, so the repository's prisma.config.ts (the demo's schema) is not read.
  const result = spawnSync(process.execPath, [cli, 'generate', '--schema', schema], { cwd: dir, env, encoding: 'utf8' })
  if (result.status !== 0) throw new Error(`prisma generate of ${schema} failed (exit ${result.status ?? result.signal}):\n${result.stdout}\n${result.stderr}`)
  writeFileSync(hashFile, `${hash}\n`)
}
