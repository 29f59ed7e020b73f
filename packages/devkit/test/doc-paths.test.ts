/**
 * Every file the documentation points at exists: in README.md, docs/*.md and each workspace's
 * README.md, a path in backticks that starts at a top-level folder of the repository
 * (`packages/...`, `apps/...`, `scripts/...`, `bench/...`, `docs/...`, `prisma/...`), a
 * `src/...` or `test/...` path in a workspace's README (from that workspace), and every relative
 * link (from the file). Placeholders (`<name>`) and globs (`*`) are not paths and are skipped, and
 * so are fenced code blocks and what a build makes (`dist/`, `generated/`: absent from a clean
 * clone). A file moved or deleted without its mentions fails here.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../../..')

const docs = [
  'README.md',
  ...readdirSync(join(root, 'docs'))
    .filter((name) => name.endsWith('.md'))
    .map((name) => `docs/${name}`),
  ...['packages', 'apps'].flatMap((folder) =>
    readdirSync(join(root, folder))
      .map((workspace) => `${folder}/${workspace}/README.md`)
      .filter((file) => existsSync(join(root, file))),
  ),
]

/** A path of plain segments, optionally ending in `/` or `:<line>` (stripped). */
const PATH = /^[\w.@-]+(?:\/[\w.@-]+)+\/?$/
const FROM_ROOT = /^(?:packages|apps|scripts|bench|docs|prisma)\//
const FROM_WORKSPACE = /^(?:src|test)\//
/** Folders a build or an install makes (git ignores them): not there in a clean clone. */
const BUILT = /(?:^|\/)(?:dist|generated|node_modules|coverage)(?:\/|$)/

interface Mention {
  readonly doc: string
  readonly text: string
  /** Where it must exist, absolute. */
  readonly target: string
}

function mentionsIn(doc: string): Mention[] {
  const text = readFileSync(join(root, doc), 'utf8').replace(/^```[\s\S]*?^```/gm, '')
  const workspace = /^(?:packages|apps)\/[^/]+\/README\.md$/.test(doc) ? dirname(doc) : undefined
  const mentions: Mention[] = []
  for (const [, span = ''] of text.matchAll(/`([^`\n]+)`/g)) {
    const path = span.replace(/:\d+(?:-\d+)?$/, '')
    if (!PATH.test(path) || BUILT.test(path)) continue
    if (FROM_ROOT.test(path)) mentions.push({ doc, text: span, target: join(root, path) })
    else if (workspace !== undefined && FROM_WORKSPACE.test(path)) mentions.push({ doc, text: span, target: join(root, workspace, path) })
  }
  for (const [, link = ''] of text.matchAll(/\]\(([^)\s]+)\)/g)) {
    const path = link.replace(/#.*$/, '')
    if (path === '' || /^[a-z][a-z0-9+.-]*:/i.test(path) || BUILT.test(path)) continue
    mentions.push({ doc, text: link, target: join(root, dirname(doc), path) })
  }
  return mentions
}

const mentions = docs.flatMap(mentionsIn)

describe('paths in the documentation', () => {
  it('control: the documents and their mentions are found', () => {
    expect(docs).toEqual(expect.arrayContaining(['README.md', 'docs/FENCING.md', 'apps/chaos/README.md', 'packages/lock/README.md']))
    expect(mentions.length).toBeGreaterThan(50)
    expect(mentions).toContainEqual(expect.objectContaining({ doc: 'README.md', text: 'packages/devkit/test/every-cli.test.ts' }))
  })

  it('every path and relative link points at a file or folder of the repository', () => {
    const missing = mentions.filter((m) => !existsSync(m.target)).map((m) => `${m.doc}: ${m.text}`)
    expect(missing).toEqual([])
  })
})
