// A fresh clone gets its Prisma clients before any test imports them, also when Vitest runs
// without `npm test` (which runs the root setup first): the demo's, and the adversarial test
// fixture's. Quiet when they are current.
import { execFileSync } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { generateFixtureClient } from './support/generate-fixture-client.js'

export default async function setup(): Promise<void> {
  const hook = fileURLToPath(new URL('../../../scripts/setup-hooks/20-prisma.mjs', import.meta.url))
  execFileSync(process.execPath, [hook], { stdio: 'inherit' })
  await generateFixtureClient('adversarial')
}
