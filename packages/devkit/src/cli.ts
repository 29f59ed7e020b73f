/**
 * The command lines of the project (`npm run <script> -- ...`), parsed the same way everywhere:
 * `node:util`'s parseArgs in strict mode (an unknown flag or a missing value is an error), a
 * generated `--help`, every bad value refused with a message that names the flag and the rule,
 * and one set of exit codes.
 */
import { parseArgs } from 'node:util'

/**
 * The exit codes of every command: 0 it did what was asked; 1 it ran and found a failure (a
 * violation where none is promised, a failed migration, a test of a claim that did not hold); 2 a
 * bad command line, or a run that could not start (a service it needs does not answer, a program
 * it runs is missing: {@link CannotStartError}), so that 1 always means the run itself failed;
 * 130 interrupted (Ctrl-C, SIGINT) and 143 terminated (SIGTERM), the shell's 128 + signal number.
 */
export const EXIT_CODES = Object.freeze({ ok: 0, failed: 1, usage: 2, cannotStart: 2, interrupted: 130, terminated: 143 })

/**
 * The closing block of every usage text: the exit codes of {@link EXIT_CODES}, one per line (so a
 * narrow terminal cuts none of them); `failure` says what exit 1 means for the command.
 */
export function exitCodesNote(failure: string): string {
  return [
    'Exit codes:',
    '  0    done',
    `  1    ${failure}`,
    '  2    a bad command line, or a run that could not start (a service it needs does not answer)',
    '  130  interrupted (Ctrl-C)',
    '  143  terminated (SIGTERM)',
  ].join('\n')
}

/** A bad command line: the command prints the message and its usage, and exits 2. */
export class UsageError extends Error {
  constructor(message: string) {
    super(message)
    this.name = 'UsageError'
  }
}

/**
 * A run that could not start: a service it needs does not answer (Redis, PostgreSQL), a program
 * it spawns is missing. The message says what to do; {@link runCommand} prints it (no stack) and
 * exits {@link EXIT_CODES}.cannotStart.
 */
export class CannotStartError extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options)
    this.name = 'CannotStartError'
  }
}

/** One flag of a command. */
export interface CliFlag {
  readonly type: 'string' | 'boolean'
  /** What the value is, in the usage text: `<n>`, `<name>`. */
  readonly value?: string
  readonly description: string
  /** Shown as the default in the usage text. */
  readonly default?: string | number | boolean
  readonly short?: string
}

/** A command: its name as typed, what it does, its flags (`--help` is added), and a closing note. */
export interface CliSpec {
  /** As the user types it, e.g. `npm run flash-sale --`. */
  readonly command: string
  readonly summary: string
  readonly flags: Readonly<Record<string, CliFlag>>
  /** Environment variables, examples: printed after the flags. */
  readonly notes?: string
  /**
   * What exit 1 means for this command (`a scenario failed its acceptance`); when given, the usage
   * ends with every exit code ({@link exitCodesNote}).
   */
  readonly failure?: string
}

/** The usage text of `spec`, each line cut to `width` columns. */
export function usageOf(spec: CliSpec, width = Number.POSITIVE_INFINITY): string {
  const flags: [string, CliFlag][] = [...Object.entries(spec.flags), ['help', { type: 'boolean', short: 'h', description: 'this text' }]]
  const left = flags.map(([name, f]) => `  ${f.short ? `-${f.short}, ` : ''}--${name}${f.type === 'string' ? ` ${f.value ?? '<value>'}` : ''}`)
  const pad = Math.max(...left.map((l) => l.length)) + 2
  const lines = [
    `Usage: ${spec.command} [options]`,
    '',
    spec.summary,
    '',
    ...flags.map(([, f], i) => `${(left[i] as string).padEnd(pad)}${f.description}${f.default === undefined ? '' : ` (default ${String(f.default)})`}`),
  ]
  if (spec.notes) lines.push('', spec.notes)
  if (spec.failure) lines.push('', exitCodesNote(spec.failure))
  return lines.map((l) => (l.length > width ? `${l.slice(0, Math.max(1, width - 1))}…` : l)).join('\n')
}

/** The values of a parsed command line: strings for string flags, `true` for boolean flags given. */
export type CliValues = Record<string, string | boolean | undefined>

/**
 * Parses `argv` (the arguments after the script) strictly against `spec`; `--help` gives
 * `{ help: true }`. Throws {@link UsageError} for an unknown flag, a missing value, a flag given
 * twice, or a positional argument.
 */
export function parseCommandLine(spec: CliSpec, argv: readonly string[]): CliValues {
  const options: Record<string, { type: 'string' | 'boolean'; short?: string }> = { help: { type: 'boolean', short: 'h' } }
  for (const [name, f] of Object.entries(spec.flags)) options[name] = f.short === undefined ? { type: f.type } : { type: f.type, short: f.short }
  let parsed: ReturnType<typeof parseArgs>
  try {
    parsed = parseArgs({ args: [...argv], options, strict: true, allowPositionals: false, tokens: true })
  } catch (error) {
    throw new UsageError(usageMessage(error as Error & { code?: string }))
  }
  const seen = new Set<string>()
  for (const token of parsed.tokens ?? []) {
    if (token.kind !== 'option') continue
    if (seen.has(token.name)) throw new UsageError(`--${token.name} is given twice`)
    seen.add(token.name)
    if (options[token.name]?.type === 'string' && (token.value === undefined || token.value === '')) throw new UsageError(`--${token.name} needs a value`)
  }
  return parsed.values as CliValues
}

/** parseArgs' errors, said the way every other message of the command line is. */
function usageMessage(error: Error & { code?: string }): string {
  const flag = /Option '(-{1,2}[A-Za-z0-9-]+)/.exec(error.message)?.[1] ?? /'(-{1,2}[A-Za-z0-9-]+)'/.exec(error.message)?.[1]
  switch (error.code) {
    case 'ERR_PARSE_ARGS_UNKNOWN_OPTION':
      return `unknown option ${flag ?? error.message}`
    case 'ERR_PARSE_ARGS_UNEXPECTED_POSITIONAL':
      return `${error.message.replace(/\. This command.*$/s, '')}: this command takes only --options`
    case 'ERR_PARSE_ARGS_INVALID_OPTION_VALUE':
      if (/does not take an argument/.test(error.message)) return `${flag} takes no value`
      // Missing, or the next word is another flag ("ambiguous").
      return `${flag} needs a value${/ambiguous/.test(error.message) ? ` (a value starting with "-" goes as ${flag}=-...)` : ''}`
    default:
      return error.message
  }
}

/** An integer flag from `min` to `max`; `fallback` when not given. */
export function integerFlag(values: CliValues, name: string, fallback: number, min: number, max: number): number {
  const raw = values[name]
  if (raw === undefined) return fallback
  if (typeof raw !== 'string' || !/^\d+$/.test(raw) || Number(raw) < min || Number(raw) > max) {
    throw new UsageError(`--${name} must be an integer from ${min} to ${max} (got ${JSON.stringify(raw)})`)
  }
  return Number(raw)
}

/** A flag whose value is one of `choices`; `fallback` when not given. */
export function choiceFlag<T extends string>(values: CliValues, name: string, fallback: T, choices: readonly T[]): T {
  const raw = values[name]
  if (raw === undefined) return fallback
  if (typeof raw !== 'string' || !(choices as readonly string[]).includes(raw)) {
    throw new UsageError(`--${name} must be one of ${choices.join(', ')} (got ${JSON.stringify(raw)})`)
  }
  return raw as T
}

/** A string flag; `fallback` when not given. */
export function stringFlag(values: CliValues, name: string, fallback: string): string
export function stringFlag(values: CliValues, name: string): string | undefined
export function stringFlag(values: CliValues, name: string, fallback?: string): string | undefined {
  const raw = values[name]
  return typeof raw === 'string' ? raw : fallback
}

const commandName = (spec: CliSpec) => spec.command.replace(/^npm run /, '').replace(/ --$/, '')
const widthOf = (stream: NodeJS.WriteStream) => (stream.isTTY ? stream.columns : Number.POSITIVE_INFINITY)

/** Parses `argv`; on `--help`, prints the usage (stdout) and exits 0. */
function valuesOrHelp(spec: CliSpec, argv: readonly string[]): CliValues {
  const values = parseCommandLine(spec, argv)
  if (values.help === true) {
    process.stdout.write(`${usageOf(spec, widthOf(process.stdout))}\n`)
    process.exit(EXIT_CODES.ok)
  }
  return values
}

/** Prints a bad command line's message and the usage (stderr); the caller exits 2. */
function reportUsageError(spec: CliSpec, error: UsageError): void {
  process.stderr.write(`${commandName(spec)}: ${error.message}\n\n${usageOf(spec, widthOf(process.stderr))}\n`)
}

/**
 * For a script whose work runs at the top level: parses `argv` against `spec` and reads its
 * values with `read` (which may throw {@link UsageError}); prints the usage and exits 0 on
 * `--help`, prints the message and exits 2 on a bad command line; else returns what `read` made.
 */
export function commandLineOrExit<T>(spec: CliSpec, argv: readonly string[], read: (values: CliValues) => T): T {
  try {
    return read(valuesOrHelp(spec, argv))
  } catch (error) {
    if (!(error instanceof UsageError)) throw error
    reportUsageError(spec, error)
    process.exit(EXIT_CODES.usage)
  }
}

/**
 * What a long-running command's `main` returns once it is up (a server, the live demo): the
 * process keeps running, and the command exits by itself later (on Ctrl-C, with
 * {@link EXIT_CODES}.interrupted).
 */
export const KEEP_RUNNING: unique symbol = Symbol('keep running')

/**
 * Runs a command: parses `argv` against `spec`, prints the usage on `--help` (stdout, exit 0) or
 * with the message of a bad command line (stderr, exit 2), else runs `main` and exits with what
 * it returns. An error `main` throws is printed (stderr) and exits 1; a {@link UsageError} it
 * throws (a bad value found later) exits 2, and so does a {@link CannotStartError} (its message,
 * without a stack). A `main` that returns {@link KEEP_RUNNING} leaves the process running.
 *
 * @example
 * ```ts
 * await runCommand(SPEC, process.argv.slice(2), async (values) => {
 *   const rounds = integerFlag(values, 'rounds', 3, 1, 100)
 *   ...
 *   return EXIT_CODES.ok
 * })
 * ```
 */
export async function runCommand(spec: CliSpec, argv: readonly string[], main: (values: CliValues) => Promise<number | typeof KEEP_RUNNING>): Promise<void> {
  let code: number | typeof KEEP_RUNNING
  try {
    code = await main(valuesOrHelp(spec, argv))
  } catch (error) {
    if (error instanceof UsageError) {
      reportUsageError(spec, error)
      code = EXIT_CODES.usage
    } else if (error instanceof CannotStartError) {
      process.stderr.write(`${commandName(spec)}: could not start: ${error.message}\n`)
      code = EXIT_CODES.cannotStart
    } else {
      process.stderr.write(`${commandName(spec)}: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`)
      code = EXIT_CODES.failed
    }
  }
  if (code !== KEEP_RUNNING) process.exit(code)
}
