// The real services the tests use (never mocked, never skipped): Redis at REDIS_URL or
// 127.0.0.1:6379, PostgreSQL at DATABASE_URL or 127.0.0.1:5432/test, each test file in a schema
// and a run id of its own so files and other packages' tests can run side by side.
import { randomBytes } from 'node:crypto'
import { sharedRedisUrl } from '@fencelock/devkit/redis-url'
import { databaseTarget } from '../src/database.js'

export const REDIS_URL = sharedRedisUrl()

/** A fresh run id and schema name for one test file or run. */
export function uniqueRun(label: string): { runId: string; schema: string } {
  const suffix = `${process.pid}_${randomBytes(3).toString('hex')}`
  return { runId: `t-${label}-${suffix}`, schema: `shop_${label.replaceAll('-', '_')}_${suffix}` }
}

/** The test database, in `schema`. */
export function testDatabase(schema: string): { connectionString: string; schema: string } {
  return { connectionString: databaseTarget(process.env.DATABASE_URL || undefined).connectionString, schema }
}
