/** At run time the package loads prom-client alone, the user's copy (a peer): the lock only lends types (an optional peer). */
import { readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'

const src = join(import.meta.dirname, '..', 'src')

describe('runtime dependencies', () => {
  it('imports nothing at run time but prom-client and its own modules', () => {
    const runtime = new Set<string>()
    for (const file of readdirSync(src).filter((f) => f.endsWith('.ts'))) {
      const text = readFileSync(join(src, file), 'utf8')
      for (const m of text.matchAll(/^(import|export)\s+(type\s+)?[^;]*?from\s+'([^']+)'/gms)) {
        if (m[2] === undefined && !m[3]!.startsWith('.')) runtime.add(m[3]!)
      }
    }
    expect([...runtime]).toEqual(['prom-client'])
    const pkg = JSON.parse(readFileSync(join(src, '..', 'package.json'), 'utf8')) as {
      dependencies?: Record<string, string>
      peerDependencies: Record<string, string>
      peerDependenciesMeta: Record<string, { optional?: boolean }>
    }
    // One prom-client in the user's process: the registry they scrape is the one we register in.
    expect(pkg.dependencies).toBeUndefined()
    expect(pkg.peerDependencies).toEqual({ 'prom-client': '^15.0.0', '@fencelock/lock': '^0.1.0' })
    expect(pkg.peerDependenciesMeta).toEqual({ '@fencelock/lock': { optional: true } })
  })
})
