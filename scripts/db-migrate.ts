/**
 * `npm run db:migrate [-- --schema <name>] [-- --dir <folder>]`: applies the SQL migrations in
 * prisma/migrations to DATABASE_URL (default postgresql://postgres@127.0.0.1:5432/test), with the
 * runner of `@fencelock/devkit/migrations` (what it promises is written there). The schema is
 * `--schema`, else `?schema=` in the URL, else `public`. Prints one line per migration applied and
 * a summary on stdout; exit 1 when a migration fails (it is rolled back), 2 on a bad command line
 * or a database it cannot reach.
 */
import { resolve } from 'node:path'
import { EXIT_CODES, runCommand, stringFlag, type CliSpec } from '@fencelock/devkit/cli'
import { connectDatabase, databaseTarget, redact } from '@fencelock/devkit/database-url'
import { applyMigrations, DEFAULT_MIGRATIONS_DIR, readMigrations } from '@fencelock/devkit/migrations'
import pg from 'pg'

const CLI: CliSpec = {
  command: 'npm run db:migrate --',
  summary: "Applies the SQL migrations of prisma/migrations that the schema has not had yet, each in its own transaction; a second run applies nothing.",
  flags: {
    schema: { type: 'string', value: '<name>', description: 'the PostgreSQL schema (created when missing)', default: '?schema= of DATABASE_URL, else public' },
    dir: { type: 'string', value: '<folder>', description: 'the migrations folder', default: 'prisma/migrations' },
  },
  notes: 'DATABASE_URL: default postgresql://postgres@127.0.0.1:5432/test.',
  failure: 'a migration failed (it is rolled back)',
}

await runCommand(CLI, process.argv.slice(2), async (values) => {
  const target = databaseTarget()
  const schema = stringFlag(values, 'schema') ?? target.schema
  const dir = stringFlag(values, 'dir')
  const migrations = await readMigrations(dir === undefined ? DEFAULT_MIGRATIONS_DIR : resolve(dir))
  const client = new pg.Client({ connectionString: target.connectionString })
  await connectDatabase(client, target.connectionString)
  try {
    const report = await applyMigrations(client, { schema, migrations, log: (line) => console.log(`[db:migrate] ${line}`) })
    console.log(`[db:migrate] ${redact(target.connectionString)} schema ${schema}: ${report.applied.length} applied, ${report.alreadyApplied.length} already applied`)
    return EXIT_CODES.ok
  } finally {
    await client.end()
  }
})
