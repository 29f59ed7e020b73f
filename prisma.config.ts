// Prisma 7 reads the CLI's settings from here; the schema's datasource block no longer holds a
// URL. Only the CLI uses this file: the application passes its URL to the driver adapter.
import { defineConfig } from 'prisma/config'
import { useSchemaEngineStubIfAbsent } from './scripts/prisma-engine.mjs'

// So a plain `npx prisma generate` works offline too, not only through `npm run setup`.
useSchemaEngineStubIfAbsent()

export default defineConfig({
  schema: 'prisma/schema.prisma',
  migrations: { path: 'prisma/migrations' },
  // Read by `prisma migrate deploy` / `studio` where the real engine exists. The default is the
  // machine's PostgreSQL, the same default as `npm run db:migrate`.
  datasource: { url: process.env.DATABASE_URL || 'postgresql://postgres@127.0.0.1:5432/test' },
})
