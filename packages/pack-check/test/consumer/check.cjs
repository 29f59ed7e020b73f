// What a user's program does with the three packages, written once and run twice: from an ES
// module (esm.mjs, `import`) and from CommonJS (cjs.cjs, `require`), each handing in the modules
// it loaded. Talks to the real Redis and PostgreSQL; prints what it saw as JSON.
'use strict'

exports.check = async function check({ lock, fencing, metrics, Redis, promClient, PrismaClient, PrismaPg, pg }) {
  const id = `${process.pid}_${Date.now().toString(36)}`
  const seen = {}
  const redis = new Redis(process.env.REDIS_URL || 'redis://127.0.0.1:6379')
  const registry = new promClient.Registry()
  const locker = new lock.Locker(redis, { prefix: `pack-check:${id}:` })
  metrics.instrument(locker, { registry })
  const schema = `pack_check_${id}`
  const connectionString = process.env.PACK_CHECK_DATABASE_URL
  const admin = new pg.Client({ connectionString })
  await admin.connect()
  let prisma
  try {
    // The lock: tokens are bigints, strictly increasing per resource.
    const first = await locker.acquire('widget:1')
    await first.release()
    const second = await locker.using('widget:1', async (held) => held.token)
    seen.tokenType = typeof first.token
    seen.tokensIncrease = second > first.token
    seen.metricsExported = (await registry.metrics()).includes('fencelock_acquire_total{group="widget",outcome="acquired"} 2')

    // The database guard, installed with the SQL the package generates.
    await admin.query(`CREATE SCHEMA "${schema}"`)
    await admin.query(`CREATE TABLE "${schema}"."Widget" (id integer PRIMARY KEY, qty integer NOT NULL, "fenceToken" bigint NOT NULL DEFAULT 0)`)
    await admin.query(`BEGIN; ${fencing.fenceGuardSql({ table: 'Widget', column: 'fenceToken', key: 'id', schema })}; COMMIT`)
    await admin.query(`INSERT INTO "${schema}"."Widget" (id, qty) VALUES (1, 10)`)

    // The Prisma extension: the newer token writes, the older one is refused.
    prisma = new PrismaClient({ adapter: new PrismaPg({ connectionString }, { schema }) })
    const db = prisma.$extends(fencing.fencing({ models: { Widget: 'fenceToken' } }))
    const written = await db.$fenced(second).widget.update({ where: { id: 1 }, data: { qty: 9 } })
    seen.fencedWrite = written.fenceToken === second && written.qty === 9
    try {
      await db.$fenced(first.token).widget.update({ where: { id: 1 }, data: { qty: 0 } })
      seen.staleRefused = false
    } catch (error) {
      seen.staleRefused = error instanceof fencing.StaleFencingTokenError && error.storedToken === second
    }
    try {
      await admin.query(`UPDATE "${schema}"."Widget" SET "fenceToken" = 0`)
      seen.guardRefused = false
    } catch (error) {
      seen.guardRefused = fencing.isFenceGuardError(error)
    }

    // Fencing over HTTP: the headers round-trip.
    const headers = fencing.fencingHeaders({ token: second, resource: 'widget:1' })
    const claim = fencing.readFencingHeaders((name) => headers[Object.keys(headers).find((k) => k.toLowerCase() === name.toLowerCase())])
    seen.headersRoundTrip = claim.token === second && claim.resource === 'widget:1'
  } finally {
    await prisma?.$disconnect()
    await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`).catch(() => {})
    await admin.end()
    await locker.close()
    redis.disconnect()
  }
  process.stdout.write(`${JSON.stringify(seen)}\n`)
}
