/**
 * Every command of the root package.json that runs a TypeScript entry (`node --import tsx <file>`)
 * answers `--help` with its usage and exit 0, and refuses an unknown flag with exit 2 before it
 * starts anything (no Redis, no database, no child process: each answer comes within seconds).
 * The list is read from package.json, so a new command is checked without editing this file.
 */
import { spawnSync } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../../..')
const scripts = (JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { scripts: Record<string, string> }).scripts
const commands = Object.entries(scripts)
  .map(([name, line]) => ({ name, entry: /node --import tsx (\S+\.ts)\b/.exec(line)?.[1] }))
  .filter((c): c is { name: string; entry: string } => c.entry !== undefined)

function run(entry: string, args: string[]) {
  const started = performance.now()
  // No Redis or database addresses: a command that tried to reach one before parsing would hang or fail differently.
  const env = { ...process.env, REDIS_URL: 'redis://127.0.0.1:1', DATABASE_URL: 'postgresql://nobody@127.0.0.1:1/none' }
  const result = spawnSync(process.execPath, ['--import', 'tsx', entry, ...args], { cwd: root, env, encoding: 'utf8', timeout: 30_000 })
  return { ...result, ms: performance.now() - started }
}

describe('every command line', () => {
  it('control: the commands are found in package.json', () => {
    expect(commands.map((c) => c.name)).toEqual(
      expect.arrayContaining(['demo', 'demo:lock', 'flash-sale', 'chaos', 'bench:lock', 'bench:fencing', 'bench:shop', 'bench:metrics', 'db:migrate', 'db:seed']),
    )
  })

  it.each(commands)('$name: --help prints the usage on stdout, exit 0', ({ name, entry }) => {
    const result = run(entry, ['--help'])
    expect(result.stderr).not.toMatch(/Error|at .*\.ts:\d+/)
    expect(result.status).toBe(0)
    expect(result.stdout).toMatch(new RegExp(`^Usage: npm run ${name} -- \\[options\\]`))
    expect(result.stdout).toMatch(/Exit codes?:/)
  })

  it.each(commands)('$name: an unknown flag is refused with exit 2, naming it, before anything starts', ({ name, entry }) => {
    const result = run(entry, ['--shrot'])
    expect(result.status).toBe(2)
    expect(result.stderr).toContain(`${name}: unknown option --shrot`)
    expect(result.stdout).toBe('')
    expect(result.ms).toBeLessThan(20_000)
  })
})
