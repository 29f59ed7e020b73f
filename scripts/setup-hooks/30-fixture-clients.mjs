// Setup hook (run by scripts/setup.mjs): generates the Prisma clients of the test fixture schemas
// (packages/*/test/fixtures/*/schema.prisma, each into its own ./generated, gitignored), as
// 20-prisma.mjs does for the demo's schema, so that a fresh clone typechecks before any test has
// run (the fencing tests' global setup generates them too). Idempotent: a hash of the schema and
// the Prisma versions beside the output makes a second run a no-op. Offline: scripts/prisma-engine.mjs.
import { spawnSync } from 'node:child_process'
import { createHash } from 'node:crypto'
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, join, relative } from 'node:path'
import { fileURLToPath } from 'node:url'
import { useSchemaEngineStubIfAbsent } from '../prisma-engine.mjs'

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..')
const require = createRequire(join(root, 'package.json'))
const versionOf = (name) => JSON.parse(readFileSync(require.resolve(`${name}/package.json`), 'utf8')).version
const versions = `\0prisma@${versionOf('prisma')}\0@prisma/client@${versionOf('@prisma/client')}`

const schemas = []
for (const pkg of readdirSync(join(root, 'packages'))) {
  const fixtures = join(root, 'packages', pkg, 'test', 'fixtures')
  if (!existsSync(fixtures)) continue
  for (const name of readdirSync(fixtures)) {
    const schema = join(fixtures, name, 'schema.prisma')
    if (existsSync(schema) && /output\s*=\s*"\.\/generated"/.test(readFileSync(schema, 'utf8'))) schemas.push(schema)
  }
}

for (const schema of schemas) {
  const dir = dirname(schema)
  const output = join(dir, 'generated')
  const hashFile = join(output, '.schema-hash')
  const hash = createHash('sha256').update(readFileSync(schema)).update(versions).digest('hex')
  if (existsSync(join(output, 'client.ts')) && existsSync(hashFile) && readFileSync(hashFile, 'utf8').trim() === hash) continue
  const env = { ...process.env, CHECKPOINT_DISABLE: '1', PRISMA_HIDE_UPDATE_MESSAGE: '1' }
  const stub = useSchemaEngineStubIfAbsent(env)
  const cli = join(dirname(require.resolve('prisma/package.json')), 'build', 'index.js')
  // cwd: the fixture's folder, so the repository's prisma.config.ts (the demo's schema) is not read.
  const result = spawnSync(process.execPath, [cli, 'generate', '--schema', schema], { cwd: dir, env, encoding: 'utf8' })
  if (result.status !== 0) {
    process.stderr.write(result.stdout ?? '')
    process.stderr.write(result.stderr ?? '')
    throw new Error(`[setup] prisma generate of ${relative(root, schema)} failed (exit ${result.status ?? result.signal})`)
  }
  writeFileSync(hashFile, `${hash}\n`)
  console.error(`[setup] generated the fixture client ${relative(root, output)}${stub ? ' (offline: schema engine stub)' : ''}`)
}
