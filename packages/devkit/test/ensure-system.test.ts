/**
 * scripts/ensure-system.mjs, the set-up `npm test` and `npm run demo` run first: quiet when the
 * machine has everything; without root and without the packages, one message naming the packages
 * and the command, exit 1, nothing on stdout.
 */
import { execFileSync, spawnSync } from 'node:child_process'
import { chmodSync, mkdtempSync, rmSync, symlinkSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'

const root = join(import.meta.dirname, '..', '..', '..')
const script = join(root, 'scripts', 'ensure-system.mjs')
// A PATH with node and sh only: none of the Debian packages the tests use.
const bare = mkdtempSync(join(tmpdir(), 'ensure-system-'))
chmodSync(bare, 0o755)
symlinkSync(process.execPath, join(bare, 'node'))
symlinkSync('/bin/sh', join(bare, 'sh'))

afterAll(() => rmSync(bare, { recursive: true, force: true }))

describe('ensure-system', () => {
  it('is quiet and succeeds on this machine (everything installed, Redis and PostgreSQL up)', () => {
    const result = spawnSync(process.execPath, [script, 'test'], { encoding: 'utf8' })
    expect(result.status, result.stderr).toBe(0)
    expect(result.stdout).toBe('')
    expect(result.stderr).toBe('')
  })

  it('refuses an unknown purpose with exit 2', () => {
    expect(spawnSync(process.execPath, [script, 'bogus'], { encoding: 'utf8' }).status).toBe(2)
  })

  it('without root and without the packages: names each package and the apt-get command, exit 1, before anything runs', () => {
    // As root (CI), run it as `nobody`; as anyone else, as ourselves.
    const asRoot = process.getuid?.() === 0
    const uid = asRoot ? { uid: Number(execFileSync('id', ['-u', 'nobody'], { encoding: 'utf8' }).trim()) } : {}
    const result = spawnSync(join(bare, 'node'), [script, 'test'], { encoding: 'utf8', ...uid, env: { PATH: bare } })
    expect(result.status).toBe(1)
    expect(result.stdout).toBe('')
    for (const pkg of ['redis-server', 'prometheus', 'chromium', 'docker-compose']) expect(result.stderr).toContain(pkg)
    expect(result.stderr).toMatch(/sudo apt-get update && sudo apt-get install -y --no-install-recommends redis-server prometheus chromium docker-compose/)
  })
})
