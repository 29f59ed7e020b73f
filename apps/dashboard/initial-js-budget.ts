/**
 * A Vite plugin that measures the JavaScript a browser must load before the dashboard starts —
 * the entry chunk and every chunk it imports statically, gzipped — prints it, and fails the
 * build above the budget. Lazy chunks (dynamic imports) are not counted: they load later.
 */
import { gzipSync } from 'node:zlib'
import type { Plugin } from 'vite'

/** The budget of initial JavaScript, gzipped: 250 kB (1 kB = 1000 bytes, as Vite prints sizes). */
export const INITIAL_JS_BUDGET_BYTES = 250_000

/** What the plugin reads of an output chunk (a subset of Rollup's / Rolldown's OutputChunk). */
export interface ChunkLike {
  readonly type: 'chunk'
  readonly fileName: string
  readonly code: string
  readonly isEntry: boolean
  readonly imports: readonly string[]
}

/** The chunks loaded at start: entries and, transitively, their static imports. */
export function initialChunks(bundle: Readonly<Record<string, ChunkLike | { readonly type: 'asset' }>>): ChunkLike[] {
  const chunks = new Map<string, ChunkLike>()
  for (const item of Object.values(bundle)) if (item.type === 'chunk') chunks.set(item.fileName, item)
  const seen = new Set<string>()
  const visit = (name: string) => {
    if (seen.has(name)) return
    const chunk = chunks.get(name)
    if (chunk === undefined) return
    seen.add(name)
    for (const imported of chunk.imports) visit(imported)
  }
  for (const chunk of chunks.values()) if (chunk.isEntry) visit(chunk.fileName)
  return [...seen].map((name) => chunks.get(name) as ChunkLike)
}

/** Gzipped size of `code`, in bytes (level 9, as a static server precompressing would). */
export function gzipBytes(code: string): number {
  return gzipSync(code, { level: 9 }).length
}

/**
 * The plugin.
 * @example
 * ```ts
 * export default defineConfig({ plugins: [react(), initialJsBudget()] })
 * ```
 */
export function initialJsBudget(limitBytes: number = INITIAL_JS_BUDGET_BYTES, log: (line: string) => void = console.log): Plugin {
  return {
    name: 'fencelock:initial-js-budget',
    apply: 'build',
    generateBundle(_options, bundle) {
      const initial = initialChunks(bundle as unknown as Record<string, ChunkLike | { type: 'asset' }>)
      const gzip = initial.reduce((sum, chunk) => sum + gzipBytes(chunk.code), 0)
      const raw = initial.reduce((sum, chunk) => sum + Buffer.byteLength(chunk.code), 0)
      const kB = (n: number) => `${(n / 1000).toFixed(1)} kB`
      log(`initial JS: ${kB(gzip)} gzip (${kB(raw)} raw, ${initial.length} chunk${initial.length === 1 ? '' : 's'}); budget ${kB(limitBytes)} gzip`)
      if (gzip > limitBytes) this.error(`initial JS is ${kB(gzip)} gzip, over the budget of ${kB(limitBytes)}`)
    },
  }
}
