// A fresh clone gets its Prisma client before any test imports it, also when Vitest runs
// without `npm test` (which runs the root setup first). Quiet when the client is current.
import { execFileSync } from 'node:child_process'
import { fileURLToPath } from 'node:url'

export default function setup(): void {
  const hook = fileURLToPath(new URL('../../../scripts/setup-hooks/20-prisma.mjs', import.meta.url))
  execFileSync(process.execPath, [hook], { stdio: 'inherit' })
}
