/**
 * `fencing<typeof prisma>({ models })` is typed from the client: fixtures compiled with the
 * TypeScript compiler, with the repository's strict settings. A model or field name the schema
 * does not have, or a fence column that is not BigInt, is a type error; correct names compile.
 */
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

describe('fencing<typeof prisma>({ models })', () => {
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
})
