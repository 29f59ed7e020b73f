// Setup hook (run by scripts/setup.mjs, and by the fencing tests' global setup): generates the
// Prisma client into generated/prisma when it is missing or older than the schema. A hash of
// the schema and the Prisma versions, kept in the generated folder, makes a second run a no-op;
// when it does generate it prints one line. Runs offline: see scripts/prisma-engine.mjs.
import { spawnSync } from 'node:child_process'
import { createHash } from 'node:crypto'
import { existsSync, readFileSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, join, relative } from 'node:path'
import { fileURLToPath } from 'node:url'
import { useSchemaEngineStubIfAbsent } from '../prisma-engine.mjs'

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..')
const schema = join(root, 'prisma', 'schema.prisma')
// Must match the generator's `output` in prisma/schema.prisma.
const output = join(root, 'generated', 'prisma')
const hashFile = join(output, '.schema-hash')

const require = createRequire(join(root, 'package.json'))
const versionOf = (name) => JSON.parse(readFileSync(require.resolve(`${name}/package.json`), 'utf8')).version

const hash = createHash('sha256')
  .update(readFileSync(schema))
  .update(`\0prisma@${versionOf('prisma')}\0@prisma/client@${versionOf('@prisma/client')}`)
  .digest('hex')

const upToDate = existsSync(join(output, 'client.ts')) && existsSync(hashFile) && readFileSync(hashFile, 'utf8').trim() === hash
if (!upToDate) {
  process.env.CHECKPOINT_DISABLE ??= '1'
  process.env.PRISMA_HIDE_UPDATE_MESSAGE ??= '1'
  const stub = useSchemaEngineStubIfAbsent()
  const cli = join(dirname(require.resolve('prisma/package.json')), 'build', 'index.js')
  const result = spawnSync(process.execPath, [cli, 'generate', '--schema', schema], { cwd: root, env: process.env, encoding: 'utf8' })
  if (result.status !== 0) {
    process.stderr.write(result.stdout ?? '')
    process.stderr.write(result.stderr ?? '')
    throw new Error(`[setup] prisma generate failed (exit ${result.status ?? result.signal})`)
  }
  writeFileSync(hashFile, `${hash}\n`)
  console.error(
    `[setup] generated the Prisma client: ${relative(root, schema)} -> ${relative(root, output)}${stub ? ' (offline: schema engine stub)' : ''}`,
  )
}
