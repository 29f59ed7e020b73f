/**
 * `fencelock-guard`: the database guard for a Prisma Migrate project, from the command line. It
 * prints the migration SQL of `fenceGuardSql` (or `fenceGuardUpgradeSql` with `--upgrade`), or with
 * `--prisma-model` the tombstone table's model for schema.prisma; it does no I/O but reading the
 * schema file. Exit codes: 0 printed; 2 a bad command line (the message names the flag and the rule)
 * or a schema file it cannot read.
 */
import { readFileSync } from 'node:fs'
import { parseArgs } from 'node:util'
import { FencingError, InvalidFencingOptionError } from './errors.js'
import { fenceGuardSql, fenceGuardUpgradeSql, type FenceGuardOptions } from './fence-guard.js'
import { fenceGuardPrismaModel } from './tombstone-model.js'

const USAGE = `Usage: fencelock-guard --table <table> --column <fence column> --key <column>[,<column>...] [options]

Prints the SQL that installs the FenceLock database guard on one table, for a migration:
  npx fencelock-guard --table Invoice --column fenceToken --key id > prisma/migrations/<timestamp>_fence_guard/migration.sql

Names are the database's: a model's @@map and a field's @map, else the Prisma names.

Options:
  --table <name>         the fenced table (required)
  --column <name>        its fence column, BIGINT NOT NULL (required)
  --key <names>          the column, or comma-separated columns, that name a row across its deletion:
                         the primary key or the unique key your lock names follow (required)
  --schema <name>        the table's schema; default none: the schema the migration runs in
  --name <prefix>        prefix of the guard's objects; default <table>_fence
  --upgrade              print fenceGuardUpgradeSql instead: brings a guard installed by an earlier
                         version up to date, tombstones kept (for a new migration)
  --prisma-model         print the tombstone table's model for schema.prisma instead of SQL
  --schema-file <path>   the schema --prisma-model reads the table's model from; default prisma/schema.prisma
  --help                 this text

Exit codes: 0 printed; 2 a bad command line, or a schema file it cannot read.
`

const FLAGS = {
  table: { type: 'string' },
  column: { type: 'string' },
  key: { type: 'string' },
  schema: { type: 'string' },
  name: { type: 'string' },
  upgrade: { type: 'boolean' },
  'prisma-model': { type: 'boolean' },
  'schema-file': { type: 'string' },
  help: { type: 'boolean' },
} as const

/** Runs the command with `argv` (without node and the script); returns the exit code and what to print. */
export function runGuardCli(argv: readonly string[], readFile: (path: string) => string = (p) => readFileSync(p, 'utf8')): { code: number; stdout: string; stderr: string } {
  let values: { [K in keyof typeof FLAGS]?: (typeof FLAGS)[K]['type'] extends 'string' ? string : boolean }
  try {
    values = parseArgs({ args: [...argv], options: FLAGS, strict: true, allowPositionals: false }).values
  } catch (error) {
    return usage((error as Error).message)
  }
  if (values.help === true) return { code: 0, stdout: USAGE, stderr: '' }
  for (const flag of ['table', 'column', 'key'] as const) if (values[flag] === undefined) return usage(`--${flag} is required`)
  if (values.upgrade === true && values['prisma-model'] === true) return usage('--upgrade and --prisma-model do not go together')
  if (values['schema-file'] !== undefined && values['prisma-model'] !== true) return usage('--schema-file goes with --prisma-model')
  const key = (values.key as string).split(',').map((k) => k.trim())
  const options: FenceGuardOptions = { table: values.table as string, column: values.column as string, key: key.length === 1 ? (key[0] as string) : key }
  if (values.schema !== undefined) options.schema = values.schema
  if (values.name !== undefined) options.name = values.name
  try {
    if (values['prisma-model'] === true) {
      const path = values['schema-file'] ?? 'prisma/schema.prisma'
      let text: string
      try {
        text = readFile(path)
      } catch (error) {
        return { code: 2, stdout: '', stderr: `fencelock-guard: cannot read the schema file ${path} (${(error as Error).message}); give its path with --schema-file\n` }
      }
      return { code: 0, stdout: fenceGuardPrismaModel(text, options), stderr: '' }
    }
    return { code: 0, stdout: values.upgrade === true ? fenceGuardUpgradeSql(options) : fenceGuardSql(options), stderr: '' }
  } catch (error) {
    if (error instanceof InvalidFencingOptionError) return usage(`invalid --${flagOf(error.field)}: ${error.rule}`)
    if (error instanceof FencingError) return usage(error.message)
    throw error
  }
}

/** The flag of an option field (`key[1]` → `key`, the schema text → `schema-file`). */
function flagOf(field: string): string {
  return field === 'schemaText' ? 'schema-file' : field.replace(/\[\d+\]$/, '')
}

function usage(message: string): { code: number; stdout: string; stderr: string } {
  return { code: 2, stdout: '', stderr: `fencelock-guard: ${message}\nRun fencelock-guard --help for the flags.\n` }
}
