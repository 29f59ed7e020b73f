// `npm run demo -- --help` answers with the help alone. The root script builds before it runs the
// demo; with --help (or -h) that build runs quietly, its output shown only when it fails. The
// script's shell part is run here as npm runs it, with a stand-in `turbo` first on PATH that
// prints what a build prints (and fails when told), so no real build runs inside the test suite.
import { spawnSync } from 'node:child_process'
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { afterAll, describe, expect, it } from 'vitest'

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../../..')
const script =
  (JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { scripts: Record<string, string> }).scripts.demo ??
  ''
/** The part after `npm run setup --silent &&`: `sh -c '<inner>' demo`. */
const inner = /sh -c '(.*)' demo$/.exec(script)?.[1] ?? ''

const bin = mkdtempSync(join(tmpdir(), 'demo-help-'))
writeFileSync(
  join(bin, 'turbo'),
  '#!/bin/sh\necho "   • turbo (stand-in) build output"\necho " Tasks:    6 successful, 6 total" >&2\nexit ${STUB_TURBO_EXIT:-0}\n',
)
chmodSync(join(bin, 'turbo'), 0o755)
afterAll(() => rmSync(bin, { recursive: true, force: true }))

function demo(args: string[], turboExit = 0) {
  const env = { ...process.env, PATH: `${bin}:${process.env.PATH ?? ''}`, STUB_TURBO_EXIT: String(turboExit) }
  return spawnSync('sh', ['-c', inner, 'demo', ...args], { cwd: root, env, encoding: 'utf8', timeout: 60_000 })
}

describe('npm run demo -- --help', () => {
  it('control: the script has its shell part', () => {
    expect(inner).toContain('turbo run build')
  })

  it.each([['--help'], ['-h']])('%s: the usage first and alone, no build output, exit 0', (flag) => {
    const result = demo([flag])
    expect(result.status).toBe(0)
    expect(result.stdout).toMatch(/^Usage: npm run demo -- \[options\]/)
    expect(result.stdout + result.stderr).not.toMatch(/stand-in|Tasks:/)
  })

  it('--help with a build that fails: the build output is shown, exit 1', () => {
    const result = demo(['--help'], 1)
    expect(result.status).toBe(1)
    expect(result.stderr).toContain('turbo (stand-in) build output')
    expect(result.stdout).not.toMatch(/Usage:/)
  })
})
