// Lets `prisma generate` run without network. Prisma's CLI insists on a native schema engine,
// downloaded at install; offline that download fails (silently at install, loudly at
// `prisma generate`). Generate itself only asks the engine for `--version`, so a stub does.
// Used by scripts/setup-hooks/20-prisma.mjs and prisma.config.ts.
import { existsSync, readdirSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

const root = join(dirname(fileURLToPath(import.meta.url)), '..')

/** The stub executable (answers `--version`, refuses everything else). */
export const SCHEMA_ENGINE_STUB = join(root, 'scripts', 'schema-engine-stub.sh')

/** True when Prisma's install put a real schema engine next to @prisma/engines. */
export function realSchemaEngineInstalled() {
  const dir = join(root, 'node_modules', '@prisma', 'engines')
  if (!existsSync(dir)) return false
  return readdirSync(dir).some((name) => name.startsWith('schema-engine') && !name.endsWith('.gz') && !name.endsWith('.sha256'))
}

/**
 * Points PRISMA_SCHEMA_ENGINE_BINARY at the stub when nobody set it and the real engine is
 * absent; a user with network keeps the real engine. Returns whether it did.
 */
export function useSchemaEngineStubIfAbsent(env = process.env) {
  if (env.PRISMA_SCHEMA_ENGINE_BINARY || realSchemaEngineInstalled()) return false
  env.PRISMA_SCHEMA_ENGINE_BINARY = SCHEMA_ENGINE_STUB
  return true
}
