/**
 * The repository's dependency rules, checked on every import of every source file:
 * - a workspace reaches another only by its package name, never by a relative path;
 * - no package (packages/*) imports or depends on an app (apps/*);
 * - no source (src/) imports test code;
 * - the benchmarks and the scripts import workspaces by name too.
 * The one shared file outside the workspaces is the Prisma client generated from the root schema
 * (`generated/prisma`), imported by path.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs'
import { dirname, join, relative, resolve, sep } from 'node:path'
import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../../..')
const SKIP = new Set(['node_modules', 'dist', '.turbo', 'coverage'])
const SOURCE = /\.(ts|tsx|mts|js|mjs|cjs)$/

function files(dir: string): string[] {
  const out: string[] = []
  for (const name of readdirSync(dir)) {
    if (SKIP.has(name)) continue
    const path = join(dir, name)
    if (statSync(path).isDirectory()) out.push(...files(path))
    else if (SOURCE.test(name) && !name.endsWith('.d.ts')) out.push(path)
  }
  return out
}

/** Every module specifier of a file: static imports and exports, side-effect imports, import(). */
function specifiers(text: string): string[] {
  const found: string[] = []
  for (const m of text.matchAll(/(?:^|[\s;])(?:import|export)\s[^'"`;]*?from\s*['"]([^'"]+)['"]/gm)) found.push(m[1]!)
  for (const m of text.matchAll(/(?:^|[\s;])import\s*['"]([^'"]+)['"]/gm)) found.push(m[1]!)
  for (const m of text.matchAll(/\bimport\(\s*['"]([^'"]+)['"]\s*\)/g)) found.push(m[1]!)
  return found
}

interface Workspace {
  readonly dir: string
  readonly name: string
  readonly kind: 'package' | 'app' | 'root-tool'
}

const workspaces: Workspace[] = [
  ...['packages', 'apps'].flatMap((group) =>
    readdirSync(join(root, group))
      .filter((name) => statSync(join(root, group, name, 'package.json'), { throwIfNoEntry: false })?.isFile())
      .map((name): Workspace => {
        const manifest = JSON.parse(readFileSync(join(root, group, name, 'package.json'), 'utf8')) as { name: string }
        return { dir: join(root, group, name), name: manifest.name, kind: group === 'apps' ? 'app' : 'package' }
      }),
  ),
  { dir: join(root, 'bench'), name: 'bench', kind: 'root-tool' },
  { dir: join(root, 'scripts'), name: 'scripts', kind: 'root-tool' },
]
const apps = new Set(workspaces.filter((w) => w.kind === 'app').map((w) => w.name))
const generated = join(root, 'generated') + sep

const within = (dir: string, path: string) => path === dir || path.startsWith(dir + sep)

function violations(): string[] {
  const found: string[] = []
  for (const workspace of workspaces) {
    for (const file of files(workspace.dir)) {
      const where = relative(root, file)
      const inSource = within(join(workspace.dir, 'src'), file)
      for (const spec of specifiers(readFileSync(file, 'utf8'))) {
        if (spec.startsWith('.')) {
          const target = resolve(dirname(file), spec)
          if (within(generated.slice(0, -1), target)) continue
          if (!within(workspace.dir, target)) found.push(`${where}: '${spec}' leaves ${relative(root, workspace.dir)}; import it by package name`)
          else if (inSource && within(join(workspace.dir, 'test'), target)) found.push(`${where}: '${spec}' is test code imported by a source file`)
        } else if (workspace.kind === 'package') {
          const name = spec.split('/').slice(0, 2).join('/')
          if (apps.has(name)) found.push(`${where}: '${spec}' is an app imported by a package`)
        }
      }
    }
  }
  return found
}

describe('the dependency direction', () => {
  it('every cross-workspace import goes through a package name; no package imports an app; no source imports tests', () => {
    expect(violations()).toEqual([])
  })

  it('no package lists an app among its dependencies', () => {
    const found: string[] = []
    for (const workspace of workspaces.filter((w) => w.kind === 'package')) {
      const manifest = JSON.parse(readFileSync(join(workspace.dir, 'package.json'), 'utf8')) as Record<string, Record<string, string> | undefined>
      for (const field of ['dependencies', 'devDependencies', 'peerDependencies', 'optionalDependencies']) {
        for (const dep of Object.keys(manifest[field] ?? {})) if (apps.has(dep)) found.push(`${workspace.name} ${field}: ${dep}`)
      }
    }
    expect(found).toEqual([])
  })

  it('control: the checks see the imports they forbid', () => {
    expect(specifiers(`import { a } from '../../apps/x/src/y.js'\nexport type { B } from '../z'\nimport 'side'\nconst m = await import('./lazy.js')`)).toEqual([
      '../../apps/x/src/y.js',
      '../z',
      'side',
      './lazy.js',
    ])
    expect(specifiers("import {\n  a,\n  b,\n} from '@fencelock/demo-shop/database'")).toEqual(['@fencelock/demo-shop/database'])
    expect(workspaces.map((w) => w.name)).toEqual(expect.arrayContaining(['@fencelock/lock', '@fencelock/demo-shop', '@fencelock/chaos', 'bench']))
    expect(apps).toEqual(new Set(['@fencelock/chaos', '@fencelock/dashboard', '@fencelock/demo-shop']))
  })
})
