// Makes a fresh clone ready for `npm test` / `npm run demo`: installs dependencies when
// they are missing or older than the lock file, and generates what the packages need.
// Idempotent and quiet when there is nothing to do.
import { execSync } from 'node:child_process'
import { existsSync, statSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

const root = join(dirname(fileURLToPath(import.meta.url)), '..')
process.env.TURBO_TELEMETRY_DISABLED ??= '1'
process.env.CHECKPOINT_DISABLE ??= '1'

// Its output goes to stderr: stdout belongs to the command that ran the setup (e.g. --json).
const run = (cmd) => execSync(cmd, { cwd: root, stdio: ['ignore', process.stderr, process.stderr], env: process.env })

const lock = join(root, 'package-lock.json')
const marker = join(root, 'node_modules', '.package-lock.json')
const stale = !existsSync(marker) || (existsSync(lock) && statSync(lock).mtimeMs > statSync(marker).mtimeMs + 1000)
if (stale) {
  console.error('[setup] installing dependencies')
  run(existsSync(lock) ? 'npm ci --no-audit --no-fund' : 'npm install --no-audit --no-fund')
}

const hooks = join(root, 'scripts', 'setup-hooks')
if (existsSync(hooks)) {
  const { readdirSync } = await import('node:fs')
  for (const f of readdirSync(hooks).filter((n) => n.endsWith('.mjs')).sort()) {
    await import(join(hooks, f))
  }
}
