/**
 * Reads the database address the scripts and tests use, once, the same way everywhere.
 *
 * Prisma's convention `?schema=<name>` in the URL selects the PostgreSQL schema. `pg` ignores
 * that parameter and `@prisma/adapter-pg` takes the schema as an option instead, so we split
 * it off here and hand it to each explicitly.
 */
import { CannotStartError } from './cli.js'

/** Used when `DATABASE_URL` is not set: the machine's PostgreSQL (trust auth), database `test`. */
export const DEFAULT_DATABASE_URL = 'postgresql://postgres@127.0.0.1:5432/test'

/** A connection string without `schema`, and the schema it named (`public` when none). */
export interface DatabaseTarget {
  readonly connectionString: string
  readonly schema: string
}

/**
 * Splits `url` (default: `DATABASE_URL`, else {@link DEFAULT_DATABASE_URL}) into a connection
 * string for `pg` and the schema named by its `schema` parameter.
 *
 * @example
 * ```ts
 * const { connectionString, schema } = databaseTarget()
 * const db = new PrismaClient({ adapter: new PrismaPg({ connectionString }, { schema }) })
 * ```
 */
export function databaseTarget(url: string = process.env.DATABASE_URL || DEFAULT_DATABASE_URL): DatabaseTarget {
  let parsed: URL
  try {
    parsed = new URL(url)
  } catch (cause) {
    throw new Error(`DATABASE_URL is not a valid URL (got ${JSON.stringify(redact(url))})`, { cause })
  }
  if (parsed.protocol !== 'postgresql:' && parsed.protocol !== 'postgres:') {
    throw new Error(`DATABASE_URL must be a postgresql:// URL (got ${JSON.stringify(redact(url))})`)
  }
  const schema = parsed.searchParams.get('schema') || 'public'
  parsed.searchParams.delete('schema')
  return { connectionString: parsed.toString(), schema }
}

/** The URL with its password replaced, for messages. */
export function redact(url: string): string {
  try {
    const parsed = new URL(url)
    if (parsed.password !== '') parsed.password = '***'
    return parsed.toString()
  } catch {
    return '(unparseable URL)'
  }
}

/**
 * Connects `client` (a `pg.Client`, or anything with `connect()`), or throws
 * {@link CannotStartError} naming the address (password hidden), the server's answer and what to
 * do: a command that cannot reach its database could not start, it did not fail.
 *
 * @example
 * ```ts
 * const client = new pg.Client({ connectionString })
 * await connectDatabase(client, connectionString)
 * ```
 */
export async function connectDatabase(client: { connect(): Promise<unknown> }, connectionString: string): Promise<void> {
  try {
    await client.connect()
  } catch (cause) {
    const why = cause instanceof Error ? cause.message : String(cause)
    throw new CannotStartError(
      `PostgreSQL at ${redact(connectionString)} cannot be reached (${why}). Start it or set DATABASE_URL; with the default address, \`npm test\` says what is missing (scripts/ensure-system.mjs).`,
      { cause },
    )
  }
}
