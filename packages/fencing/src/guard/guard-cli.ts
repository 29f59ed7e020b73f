/**
 * `fencelock-guard`: the database guard for a Prisma Migrate project, from the command line. It
 * prints the migration SQL of `fenceGuardSql` (or `fenceGuardUpgradeSql` with `--upgrade`), or with
 * `--prisma-model` the tombstone table's model for schema.prisma; with `--migration <name>` it writes
 * the SQL into the project's migrations folder itself, and with `--prisma-model --write` appends the
 * model to the schema file. Every name is checked against the schema file first (in every mode, when
 * there is one); it does no I/O but the schema file and the migrations folder. Exit codes: 0 done;
 * 2 a bad command line (the message names the flag and the rule), a name the schema does not have,
 * or a file it cannot read or write.
 */
import { existsSync, mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs'
import { join, resolve } from 'node:path'
import { parseArgs } from 'node:util'
import { FencingError, InvalidFencingOptionError } from '../shared/errors.js'
import { fenceGuardSql, fenceGuardUpgradeSql, type FenceGuardOptions } from './fence-guard.js'
import { fenceGuardPrismaModel } from './tombstone-model.js'

const USAGE = `Usage: fencelock-guard --table <table> --column <fence column> --key <column>[,<column>...] [options]

Prints the SQL that installs the FenceLock database guard on one table, or writes it as a migration:
  npx fencelock-guard --table Invoice --column fenceToken --key id --prisma-model --write
  npx fencelock-guard --table Invoice --column fenceToken --key id --migration fence_guard
  npx prisma migrate dev

Names are the database's: a model's @@map and a field's @map, else the Prisma names. They are checked
against the schema file (--schema-file, default prisma/schema.prisma) whenever there is one: the
table must be a model's, the key its columns, the fence column a BigInt column of it.

Options:
  --table <name>         the fenced table (required)
  --column <name>        its fence column, BIGINT NOT NULL (required)
  --key <names>          the column, or comma-separated columns, that name a row across its deletion:
                         the primary key or the unique key your lock names follow (required)
  --schema <name>        the table's schema; default none: the schema the migration runs in
  --name <prefix>        prefix of the guard's objects; default <table>_fence
  --upgrade              print fenceGuardUpgradeSql instead: brings a guard installed by an earlier
                         version up to date, tombstones kept (for a new migration)
  --migration <name>     write the SQL to <migrations>/<folder>/migration.sql instead of printing it:
                         into the newest folder when it is <timestamp>_<name> (the one
                         \`prisma migrate dev --create-only --name <name>\` made, not yet applied),
                         else into a new folder <timestamp>_<name>; prints what it wrote
  --migrations-dir <path>  the migrations folder; default prisma/migrations
  --strict               the strict guard: a write of the table that carries no fencing token is
                         refused (with --upgrade: made strict; an upgrade without it is not strict)
  --no-token-path        for a table written only through the Prisma extension (or by SQL that sets
                         the fence itself): no token path, so no BEFORE row trigger, and an UPDATE or
                         DELETE costs what it costs unguarded; a write under a transaction's token
                         (withFence, raw SQL on a $fenced view) is refused (FL005). With --upgrade:
                         the upgraded guard has no token path (an upgrade without it has one)
  --prisma-model         print the tombstone table's model for schema.prisma instead of SQL
  --write                with --prisma-model: append the model to the schema file (after a blank
                         line), once; prints what it did
  --schema-file <path>   the schema the names are checked against and the model is read off;
                         default prisma/schema.prisma (without it, and no such file: names unchecked)
  --help                 this text

Exit codes: 0 done; 2 a bad command line, a name the schema does not have, or a file it cannot
read or write.
`

const FLAGS = {
  table: { type: 'string' },
  column: { type: 'string' },
  key: { type: 'string' },
  schema: { type: 'string' },
  name: { type: 'string' },
  upgrade: { type: 'boolean' },
  strict: { type: 'boolean' },
  'no-token-path': { type: 'boolean' },
  'prisma-model': { type: 'boolean' },
  write: { type: 'boolean' },
  migration: { type: 'string' },
  'migrations-dir': { type: 'string' },
  'schema-file': { type: 'string' },
  help: { type: 'boolean' },
} as const

type Outcome = { code: number; stdout: string; stderr: string }

/** A migration folder's name as Prisma Migrate makes it: `<UTC yyyyMMddHHmmss>_<name>`. */
const MIGRATION_FOLDER = /^(\d{14})_(.+)$/
/** A migration name Prisma accepts and a folder name needs: letters, digits, `_`. */
const MIGRATION_NAME = /^[A-Za-z0-9_]{1,200}$/

/**
 * Runs the command with `argv` (without node and the script) in `cwd` (default: the process's);
 * returns the exit code and what to print.
 */
export function runGuardCli(argv: readonly string[], cwd: string = process.cwd()): Outcome {
  let values: { [K in keyof typeof FLAGS]?: (typeof FLAGS)[K]['type'] extends 'string' ? string : boolean }
  try {
    values = parseArgs({ args: [...argv], options: FLAGS, strict: true, allowPositionals: false }).values
  } catch (error) {
    return usage((error as Error).message)
  }
  if (values.help === true) return { code: 0, stdout: USAGE, stderr: '' }
  for (const flag of ['table', 'column', 'key'] as const) if (values[flag] === undefined) return usage(`--${flag} is required`)
  if (values.upgrade === true && values['prisma-model'] === true) return usage('--upgrade and --prisma-model do not go together')
  if (values.migration !== undefined && values['prisma-model'] === true) return usage('--migration and --prisma-model do not go together: the model goes into the schema (--write), the SQL into a migration')
  if (values.write === true && values['prisma-model'] !== true) return usage('--write goes with --prisma-model (the SQL is written with --migration <name>)')
  if (values['migrations-dir'] !== undefined && values.migration === undefined) return usage('--migrations-dir goes with --migration <name>')
  if (values.migration !== undefined && !MIGRATION_NAME.test(values.migration)) return usage(`invalid --migration: must be 1-200 letters, digits or _ (got ${JSON.stringify(values.migration)})`)
  if (values.strict === true && values['prisma-model'] === true) return usage('--strict and --prisma-model do not go together')
  if (values['no-token-path'] === true && values['prisma-model'] === true) return usage('--no-token-path and --prisma-model do not go together: the model is the same either way')
  const key = (values.key as string).split(',').map((k) => k.trim())
  const options: FenceGuardOptions = { table: values.table as string, column: values.column as string, key: key.length === 1 ? (key[0] as string) : key }
  if (values.schema !== undefined) options.schema = values.schema
  if (values.name !== undefined) options.name = values.name
  if (values.strict === true) options.strict = true
  if (values['no-token-path'] === true) options.tokenPath = false
  try {
    // The schema: required for --prisma-model, and the names are checked against it in every mode.
    const schemaPath = resolve(cwd, values['schema-file'] ?? 'prisma/schema.prisma')
    const shownSchema = values['schema-file'] ?? 'prisma/schema.prisma'
    let schemaText: string | undefined
    if (values['schema-file'] !== undefined || values['prisma-model'] === true || existsSync(schemaPath)) {
      try {
        schemaText = readFileSync(schemaPath, 'utf8')
      } catch (error) {
        return { code: 2, stdout: '', stderr: `fencelock-guard: cannot read the schema file ${shownSchema} (${(error as Error).message}); give its path with --schema-file\n` }
      }
    }
    // Reading the model off the schema checks the table, the key and the column; the column's type too.
    const model = schemaText === undefined ? undefined : fenceGuardPrismaModel(schemaText, options)
    const unchecked = schemaText === undefined ? `fencelock-guard: no ${shownSchema}: the names were not checked against a schema (give --schema-file)\n` : ''
    if (values['prisma-model'] === true) {
      const text = `\n${model as string}`
      if (values.write !== true) return { code: 0, stdout: text, stderr: '' }
      const modelName = /^model (\w+) \{/m.exec(model as string)?.[1] as string
      if (new RegExp(`^model ${modelName} \\{`, 'm').test(schemaText as string)) {
        return { code: 2, stdout: '', stderr: `fencelock-guard: ${shownSchema} already has model ${modelName}; nothing written\n` }
      }
      writeFileSync(schemaPath, `${(schemaText as string).replace(/\n*$/, '\n')}${text}`)
      return { code: 0, stdout: `fencelock-guard: appended model ${modelName} to ${shownSchema}\n`, stderr: '' }
    }
    const sql = values.upgrade === true ? fenceGuardUpgradeSql(options) : fenceGuardSql(options)
    if (values.migration === undefined) return { code: 0, stdout: sql, stderr: unchecked }
    return writeMigration(resolve(cwd, values['migrations-dir'] ?? 'prisma/migrations'), values['migrations-dir'] ?? 'prisma/migrations', values.migration, sql, unchecked)
  } catch (error) {
    if (error instanceof InvalidFencingOptionError) {
      // The value said too (`(got "fenceTokn")`), but never a whole schema file.
      return usage(error.field === 'schemaText' ? `invalid --schema-file: ${error.rule}` : `invalid --${flagOf(error.field)}: ${error.message.slice(`invalid ${error.field}: `.length)}`)
    }
    if (error instanceof FencingError) return usage(error.message)
    throw error
  }
}

/**
 * Writes `sql` as the migration `name`: into the newest folder when it is `<timestamp>_<name>` (made
 * by `prisma migrate dev --create-only`), else into a new `<timestamp>_<name>` folder whose timestamp
 * is now, or one second after the newest folder's when the clock is behind it.
 */
function writeMigration(dir: string, shown: string, name: string, sql: string, note: string): Outcome {
  let folders: string[]
  try {
    folders = existsSync(dir) ? readdirSync(dir).filter((f) => MIGRATION_FOLDER.test(f) && statSync(join(dir, f)).isDirectory()).sort() : []
  } catch (error) {
    return { code: 2, stdout: '', stderr: `fencelock-guard: cannot read the migrations folder ${shown} (${(error as Error).message}); give its path with --migrations-dir\n` }
  }
  const newest = folders.at(-1)
  const named = folders.filter((f) => MIGRATION_FOLDER.exec(f)?.[2] === name)
  let folder: string
  let what: string
  if (newest !== undefined && MIGRATION_FOLDER.exec(newest)?.[2] === name) {
    folder = newest
    what = 'replaced the migration.sql of'
  } else if (named.length > 0) {
    return { code: 2, stdout: '', stderr: `fencelock-guard: invalid --migration: ${shown}/${named.at(-1)} has that name and is not the newest migration (it may be applied); give another name\n` }
  } else {
    const now = new Date().toISOString().replace(/\D/g, '').slice(0, 14)
    const after = newest === undefined ? now : String(BigInt((MIGRATION_FOLDER.exec(newest) as RegExpExecArray)[1] as string) + 1n)
    folder = `${now > after || newest === undefined ? now : after}_${name}`
    what = 'wrote'
  }
  try {
    mkdirSync(join(dir, folder), { recursive: true })
    writeFileSync(join(dir, folder, 'migration.sql'), sql)
  } catch (error) {
    return { code: 2, stdout: '', stderr: `fencelock-guard: cannot write ${shown}/${folder}/migration.sql (${(error as Error).message})\n` }
  }
  return { code: 0, stdout: `fencelock-guard: ${what} ${shown}/${folder}/migration.sql\n`, stderr: note }
}

/** The flag of an option field (`key[1]` → `key`, the schema text → `schema-file`). */
function flagOf(field: string): string {
  return field === 'schemaText' ? 'schema-file' : field.replace(/\[\d+\]$/, '')
}

function usage(message: string): Outcome {
  return { code: 2, stdout: '', stderr: `fencelock-guard: ${message}\nRun fencelock-guard --help for the flags.\n` }
}
