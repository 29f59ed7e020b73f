/**
 * At run time each entry loads its own library alone, the user's copy (a peer): the main entry
 * prom-client, `@fencelock/metrics/opentelemetry` the OpenTelemetry API; neither loads the
 * other's, and the lock only lends types (an optional peer). Checked by loading each entry (its
 * source, through tsx) in a Node process whose module resolution records every package it is
 * asked for.
 */
import { spawnSync } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { pathToFileURL } from 'node:url'
import { describe, expect, it } from 'vitest'
import { SCOPE_VERSION } from '../src/opentelemetry/index.js'

const root = join(import.meta.dirname, '..')

/** A resolve hook (registered with module.register) that prints each bare specifier it resolves. */
const RECORDING_HOOK = `export async function resolve(specifier, context, next) {
  if (!specifier.startsWith('.') && !specifier.startsWith('node:') && !specifier.startsWith('file:') && !specifier.startsWith('data:')) {
    process.stdout.write('package ' + specifier + '\\n')
  }
  return next(specifier, context)
}`

/** The packages that loading `entry` (a source file) asks for, and what it exports. */
function packagesLoadedBy(entry: string): { packages: string[]; exports: string[] } {
  const program = [
    "import { register } from 'node:module'",
    `register('data:text/javascript,' + encodeURIComponent(${JSON.stringify(RECORDING_HOOK)}))`,
    `const m = await import(${JSON.stringify(pathToFileURL(join(root, entry)).href)})`,
    "process.stdout.write('exports ' + Object.keys(m).sort().join(',') + '\\n')",
  ].join('\n')
  const run = spawnSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', program], {
    cwd: root,
    encoding: 'utf8',
    timeout: 30_000,
  })
  if (run.status !== 0) throw new Error(`loading ${entry} failed: ${run.stderr}`)
  const lines = run.stdout.split('\n')
  return {
    packages: [...new Set(lines.filter((l) => l.startsWith('package ')).map((l) => l.slice(8)))].sort(),
    exports: lines
      .find((l) => l.startsWith('exports '))!
      .slice(8)
      .split(','),
  }
}

describe('runtime dependencies', () => {
  it('the main entry loads prom-client alone', () => {
    const { packages, exports } = packagesLoadedBy('src/index.ts')
    expect(packages).toEqual(['prom-client'])
    expect(exports).toContain('instrument')
  })

  it('the opentelemetry entry loads @opentelemetry/api alone (no SDK, no prom-client)', () => {
    const { packages, exports } = packagesLoadedBy('src/opentelemetry/index.ts')
    expect(packages).toEqual(['@opentelemetry/api'])
    expect(exports).toContain('instrumentOpenTelemetry')
  })

  it('declares both libraries as optional peers, each needed by its own entry; the scope version is the package version', () => {
    const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as {
      version: string
      dependencies?: Record<string, string>
      peerDependencies: Record<string, string>
      peerDependenciesMeta: Record<string, { optional?: boolean }>
      exports: Record<string, unknown>
    }
    // One copy of each in the user's process: the registry they scrape and the meter provider
    // they registered are the ones we report to.
    expect(pkg.dependencies).toBeUndefined()
    expect(pkg.peerDependencies).toEqual({
      'prom-client': '^15.0.0',
      '@opentelemetry/api': '^1.9.0',
      // Types only (lockHistogramProducer() is a MetricProducer): never loaded at run time.
      '@opentelemetry/sdk-metrics': '^2.0.0',
      '@fencelock/lock': '^0.1.0',
    })
    expect(pkg.peerDependenciesMeta).toEqual({
      'prom-client': { optional: true },
      '@opentelemetry/api': { optional: true },
      '@opentelemetry/sdk-metrics': { optional: true },
      '@fencelock/lock': { optional: true },
    })
    expect(Object.keys(pkg.exports)).toEqual(['.', './opentelemetry', './package.json'])
    expect(SCOPE_VERSION).toBe(pkg.version)
  })
})
