// The command-line module: strict parsing, the usage text, and the exit codes of a real process.
import { spawnSync } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { choiceFlag, EXIT_CODES, exitCodesNote, integerFlag, parseCommandLine, usageOf, UsageError, type CliSpec } from '../src/cli.js'

const SPEC: CliSpec = {
  command: 'npm run example --',
  summary: 'An example command.',
  flags: {
    rounds: { type: 'string', value: '<n>', description: 'rounds, 1-10', default: 3 },
    mode: { type: 'string', value: '<m>', description: 'a or b', default: 'a' },
    json: { type: 'boolean', description: 'print JSON' },
  },
  notes: 'Exit codes: 0 ok, 1 failed, 2 bad command line.',
}

const usageError = (argv: string[]) => {
  try {
    const values = parseCommandLine(SPEC, argv)
    integerFlag(values, 'rounds', 3, 1, 10)
    choiceFlag(values, 'mode', 'a', ['a', 'b'])
  } catch (error) {
    return error
  }
  return undefined
}

describe('parseCommandLine', () => {
  it('reads flags, inline values and --help', () => {
    const values = parseCommandLine(SPEC, ['--rounds', '5', '--mode=b', '--json'])
    expect(integerFlag(values, 'rounds', 3, 1, 10)).toBe(5)
    expect(choiceFlag(values, 'mode', 'a', ['a', 'b'])).toBe('b')
    expect(values.json).toBe(true)
    expect(parseCommandLine(SPEC, ['-h']).help).toBe(true)
    expect(integerFlag(parseCommandLine(SPEC, []), 'rounds', 3, 1, 10)).toBe(3)
  })

  it.each([
    [['--shrot'], /unknown option --shrot/],
    [['--rounds'], /--rounds/],
    [['--rounds', '0'], /--rounds must be an integer from 1 to 10 \(got "0"\)/],
    [['--rounds', 'x'], /--rounds must be an integer/],
    [['--rounds', '2', '--rounds', '3'], /--rounds is given twice/],
    [['--mode', 'c'], /--mode must be one of a, b \(got "c"\)/],
    [['--json=yes'], /json/],
    [['positional'], /positional/i],
  ])('refuses %j with a UsageError naming the flag', (argv, message) => {
    const error = usageError(argv)
    expect(error).toBeInstanceOf(UsageError)
    expect((error as Error).message).toMatch(message)
  })
})

describe('usageOf', () => {
  it('lists every flag with its default, --help, and the notes; cuts lines to a width', () => {
    const text = usageOf(SPEC)
    expect(text).toContain('Usage: npm run example -- [options]')
    expect(text).toMatch(/--rounds <n>\s+rounds, 1-10 \(default 3\)/)
    expect(text).toMatch(/-h, --help\s+this text/)
    expect(text).toContain('Exit codes: 0 ok')
    for (const line of usageOf(SPEC, 30).split('\n')) expect(line.length).toBeLessThanOrEqual(30)
  })

  it('ends with every exit code of the convention when the command says what 1 means', () => {
    const text = usageOf({ ...SPEC, notes: 'REDIS_URL: the Redis.', failure: 'a scenario failed' })
    expect(text.endsWith(exitCodesNote('a scenario failed'))).toBe(true)
    expect(text).toMatch(/^ {2}1 +a scenario failed$/m)
    // Each code of EXIT_CODES has its line: one convention, generated in one place.
    for (const code of new Set(Object.values(EXIT_CODES))) expect(text).toMatch(new RegExp(`^  ${code} +\\S`, 'm'))
    expect(text).toMatch(/^ {2}2 +a bad command line, or a run that could not start/m)
    expect(usageOf(SPEC)).not.toContain('could not start')
  })
})

describe('runCommand, in a real process', () => {
  const dir = mkdtempSync(join(tmpdir(), 'devkit-cli-'))
  afterAll(() => rmSync(dir, { recursive: true, force: true }))
  const script = join(dir, 'command.mts')
  writeFileSync(
    script,
    `import { runCommand, integerFlag, CannotStartError } from ${JSON.stringify(join(import.meta.dirname, '..', 'src', 'cli.ts'))}
const spec = ${JSON.stringify(SPEC)}
await runCommand(spec, process.argv.slice(2), async (values) => {
  const rounds = integerFlag(values, 'rounds', 3, 1, 10)
  if (rounds === 7) throw new Error('seven fails')
  if (rounds === 8) throw new CannotStartError('nothing answers at REDIS_URL', { cause: new Error('ECONNREFUSED') })
  process.stdout.write('ran ' + rounds + '\\n')
  return 0
})
`,
  )
  const run = (...args: string[]) => spawnSync(process.execPath, ['--import', 'tsx', script, ...args], { encoding: 'utf8' })

  it('--help: the usage on stdout, exit 0', () => {
    const r = run('--help')
    expect(r.status).toBe(0)
    expect(r.stdout).toContain('Usage: npm run example --')
    expect(r.stderr).toBe('')
  })

  it('an unknown flag: the message and the usage on stderr, nothing on stdout, exit 2', () => {
    const r = run('--shrot')
    expect(r.status).toBe(2)
    expect(r.stdout).toBe('')
    expect(r.stderr).toMatch(/^example: unknown option --shrot/)
    expect(r.stderr).toContain('Usage:')
  })

  it('runs, exit 0; a failure inside, exit 1', () => {
    expect(run('--rounds', '4')).toMatchObject({ status: 0, stdout: 'ran 4\n' })
    const failed = run('--rounds', '7')
    expect(failed.status).toBe(1)
    expect(failed.stderr).toContain('seven fails')
  })

  it('a run that could not start: its message (no stack) on stderr, nothing on stdout, exit 2', () => {
    const r = run('--rounds', '8')
    expect(r.status).toBe(EXIT_CODES.cannotStart)
    expect(r.stdout).toBe('')
    expect(r.stderr).toBe('example: could not start: nothing answers at REDIS_URL\n')
  })
})
