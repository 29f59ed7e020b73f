import { describe, expect, it } from 'vitest'
import { gzipBytes, initialChunks, type ChunkLike } from '../initial-js-budget'

const chunk = (fileName: string, imports: string[], isEntry = false): ChunkLike => ({ type: 'chunk', fileName, code: `/*${fileName}*/`, isEntry, imports })

describe('initial JS budget', () => {
  it('counts the entry and what it imports statically, not lazy chunks or assets', () => {
    const bundle = {
      'index.js': chunk('index.js', ['vendor.js']),
      'vendor.js': chunk('vendor.js', ['shared.js']),
      'shared.js': chunk('shared.js', []),
      'lazy.js': chunk('lazy.js', ['shared.js']),
      'index.css': { type: 'asset' as const },
    }
    bundle['index.js'] = { ...bundle['index.js'], isEntry: true }
    expect(initialChunks(bundle).map((c) => c.fileName).sort()).toEqual(['index.js', 'shared.js', 'vendor.js'])
  })

  it('measures gzip bytes', () => {
    const text = 'const a = 1;\n'.repeat(1000)
    expect(gzipBytes(text)).toBeLessThan(text.length / 20)
    expect(gzipBytes(text)).toBeGreaterThan(0)
  })
})
