/**
 * `fencing<typeof prisma>({ models })` is typed from the client: fixtures compiled with the
 * TypeScript compiler, with the repository's strict settings. A model or field name the schema
 * does not have, or a fence column that is not BigInt, is a type error; correct names compile; a
 * model without any BigInt column gets a type whose text names the problem. `fencedTransaction`
 * takes fenced models only (transaction-model.ts: its `@ts-expect-error` lines must each meet an
 * error, or the file does not compile).
 */
import { readFileSync, rmSync, writeFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import ts from 'typescript'
import { describe, expect, it } from 'vitest'

const here = dirname(fileURLToPath(import.meta.url))
const fixtures = join(here, 'fixtures', 'typed-models')

/** The errors of compiling `file` with the package's compiler options. */
function errorsOf(file: string): string[] {
  const configPath = join(here, '..', 'tsconfig.json')
  const config = ts.readConfigFile(configPath, (p) => ts.sys.readFile(p))
  const parsed = ts.parseJsonConfigFileContent(config.config, ts.sys, dirname(configPath))
  const program = ts.createProgram([join(fixtures, file)], { ...parsed.options, noEmit: true })
  return ts
    .getPreEmitDiagnostics(program)
    .filter((d) => d.file?.fileName.startsWith(fixtures))
    .map((d) => ts.flattenDiagnosticMessageText(d.messageText, '\n'))
}

// Each case runs the TypeScript compiler over the fixture and Prisma's generated client: 15-35 s of CPU
// on a loaded 2-CPU machine. The outcome does not depend on time, so the deadline is generous.
const COMPILE_TIMEOUT_MS = 240_000

describe('fencing<typeof prisma>({ models })', { timeout: COMPILE_TIMEOUT_MS }, () => {
  it('compiles with the schema’s models and BigInt fields (and loose without a client type)', () => {
    expect(errorsOf('good.ts')).toEqual([])
  })

  it.each([
    ['typo-model.ts', /Prodcut/],
    ['typo-field.ts', /fenceTokne/],
    ['not-bigint.ts', /"stock"/],
  ])('%s is a type error', (file, mentions) => {
    const errors = errorsOf(file)
    expect(errors.length).toBeGreaterThan(0)
    expect(errors.join('\n')).toMatch(mentions)
  })

  it('a model without a BigInt column: the error names the model and what it lacks (not "not assignable to type \'undefined\'")', () => {
    const errors = errorsOf('no-fence-column.ts')
    expect(errors).toEqual([`Type '"fenceToken"' is not assignable to type '"Payment has no BigInt column to fence with (add one: fenceToken BigInt @default(0))"'.`])
  })
})

describe('fencedTransaction(db, token, { model })', { timeout: COMPILE_TIMEOUT_MS }, () => {
  it('takes the models db fences, on the client and on a transaction client; an unfenced or unknown model is a type error', () => {
    expect(errorsOf('transaction-model.ts')).toEqual([])
  })

  it('control: without the @ts-expect-error lines each refused call is an error about its model', () => {
    const text = readFileSync(join(fixtures, 'transaction-model.ts'), 'utf8')
    const copy = `.unchecked-${process.pid}.ts`
    writeFileSync(join(fixtures, copy), text.replace(/^\s*\/\/ @ts-expect-error.*\n/gm, ''))
    try {
      const errors = errorsOf(copy)
      expect(errors.map((e) => /^Type '"(\w+)"' is not assignable to type/.exec(e)?.[1])).toEqual(['Payment', 'Payment', 'Order', 'Prodcut'])
    } finally {
      rmSync(join(fixtures, copy), { force: true })
    }
  })
})
