/**
 * The fenced code blocks of the repository's Markdown, with what the docs test does with each:
 *
 * - a TypeScript block (```ts, ```typescript) is a program. The line before its fence says which
 *   kind, and every TypeScript block must say: `<!-- runs -->` (type-checked, then run to exit
 *   against the real services) or `<!-- compile-only: <why> -->` (type-checked only; the reason is
 *   required, e.g. "a fragment of the program above" or "serves requests until stopped").
 * - a JavaScript block (```js, ```cjs) is CommonJS and says `<!-- runs -->`: run with node as a
 *   .cjs file in the scratch project.
 * - a block a TypeScript block takes as given says so in a comment line of its own:
 *   `// Assumes: \`db\` (the fenced client of Set-up), \`lock\`, \`sku\`.` — the names in backticks are
 *   declared for it (compile-only) or defined (runs) by the test, from its catalogue of givens.
 * - every other block is listed by kind: `sh`, `sql`, `yaml`, `prisma` (its models must be the
 *   test schema's, see the test) and `text` (no language: diagrams, sample output). Any other
 *   language fails the test until it is given a rule here.
 */

/** What the test does with a block. */
export type BlockMode = 'runs' | 'compile-only' | 'listed'

export interface Block {
  /** The Markdown file, relative to the repository's root. */
  readonly doc: string
  /** Line of the doc where the code starts (1-based; the fence is the line before). */
  readonly line: number
  /** `ts`, `js`, `sh`, `sql`, `yaml`, `prisma`, `text`, or the unknown language as written. */
  readonly kind: string
  readonly code: string
  readonly mode: BlockMode
  /** Why a TypeScript block is compile-only. */
  readonly reason?: string
  /** The names it takes as given (its `// Assumes:` line). */
  readonly assumes: readonly string[]
}

/** A block that breaks the rules above, as `doc:line: what`. */
export interface BlockProblem {
  readonly where: string
  readonly problem: string
}

const KINDS: Readonly<Record<string, string>> = {
  ts: 'ts',
  typescript: 'ts',
  js: 'js',
  javascript: 'js',
  cjs: 'js',
  sh: 'sh',
  bash: 'sh',
  shell: 'sh',
  sql: 'sql',
  yaml: 'yaml',
  yml: 'yaml',
  prisma: 'prisma',
  '': 'text',
  text: 'text',
}
const RUNS = /^<!--\s*runs\s*-->$/
const COMPILE_ONLY = /^<!--\s*compile-only(?::\s*(.*?))?\s*-->$/
const ANY_MARKER = /^<!--\s*(runs|compile-only|no-typecheck)\b/
const ASSUMES = /^\s*\/\/\s*Assumes:(.*)$/

/** Every fenced block of `markdown` (the file `doc`), and the problems of those that break the rules. */
export function blocksOf(doc: string, markdown: string): { blocks: Block[]; problems: BlockProblem[] } {
  const lines = markdown.split('\n')
  const blocks: Block[] = []
  const problems: BlockProblem[] = []
  for (let i = 0; i < lines.length; i++) {
    const open = /^(\s*)(`{3,}|~{3,})\s*([^\s`]*)/.exec(lines[i] as string)
    if (open === null) continue
    const [, indent, fence, language] = open as unknown as [string, string, string, string]
    const end = lines.findIndex((line, j) => j > i && line.trim().startsWith(fence) && line.trim().replace(/[`~]/g, '') === '')
    const where = `${doc}:${i + 1}`
    if (end < 0) {
      problems.push({ where, problem: 'a code block that never closes' })
      break
    }
    const code = lines
      .slice(i + 1, end)
      .map((line) => (line.startsWith(indent) ? line.slice(indent.length) : line))
      .join('\n')
    let before = i - 1
    while (before >= 0 && (lines[before] as string).trim() === '') before--
    const marker = before >= 0 ? (lines[before] as string).trim() : ''
    const kind = KINDS[language.toLowerCase()] ?? language
    const assumes = [...code.split('\n').filter((line) => ASSUMES.test(line))].flatMap((line) => [...(ASSUMES.exec(line)?.[1] ?? '').matchAll(/`([A-Za-z_$][\w$]*)`/g)].map((m) => m[1] as string))
    let mode: BlockMode = 'listed'
    let reason: string | undefined
    if (kind === 'ts' || kind === 'js') {
      const compileOnly = COMPILE_ONLY.exec(marker)
      if (RUNS.test(marker)) mode = 'runs'
      else if (compileOnly !== null && kind === 'ts') {
        mode = 'compile-only'
        reason = compileOnly[1]
        if (reason === undefined || reason === '') problems.push({ where, problem: '<!-- compile-only --> needs its reason: <!-- compile-only: why it cannot run -->' })
      } else {
        // Reported, and still type-checked (a JavaScript block still run).
        mode = kind === 'ts' ? 'compile-only' : 'runs'
        problems.push({ where, problem: `a ${kind} block without <!-- runs -->${kind === 'ts' ? ' or <!-- compile-only: why -->' : ''} on the line before its fence` })
      }
      if (kind === 'js' && assumes.length > 0) problems.push({ where, problem: 'a JavaScript block runs as it stands: no // Assumes:' })
    } else {
      if (!Object.values(KINDS).includes(kind)) problems.push({ where, problem: `a block of language "${language}": the docs test has no rule for it (see support/markdown-blocks.ts)` })
      if (ANY_MARKER.test(marker)) problems.push({ where, problem: `a ${kind} block marked ${marker}: only TypeScript and JavaScript blocks are programs` })
    }
    blocks.push({ doc, line: i + 2, kind, code, mode, ...(reason === undefined ? {} : { reason }), assumes })
    i = end
  }
  return { blocks, problems }
}
