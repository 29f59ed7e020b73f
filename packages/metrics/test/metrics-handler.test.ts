/** The /metrics handler, mounted in a real Express app and in a plain node:http server. */
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import express from 'express'
import { Registry } from 'prom-client'
import { afterAll, describe, expect, it } from 'vitest'
import { instrument, metricsHandler } from '../src/index.js'
import { connectShared, makeLocker, resourceIn, uniqueGroup } from './support/redis.js'

const redis = await connectShared()
const servers: Server[] = []
afterAll(async () => {
  await Promise.all(servers.map((s) => new Promise((resolve) => s.close(resolve))))
})

async function listen(server: Server): Promise<string> {
  servers.push(server)
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`
}

describe('metricsHandler', () => {
  it('serves the registry at /metrics in an Express app, with the registry\'s content type', async () => {
    const registry = new Registry()
    const locker = makeLocker(redis)
    instrument(locker, { registry })
    const group = uniqueGroup('http')
    await (await locker.acquire(resourceIn(group))).release()
    const app = express()
    app.get('/metrics', metricsHandler(registry))
    const base = await listen(createServer(app))
    const res = await fetch(`${base}/metrics`)
    expect(res.status).toBe(200)
    expect(res.headers.get('content-type')).toBe(registry.contentType)
    expect(res.headers.get('cache-control')).toBe('no-store')
    const body = await res.text()
    expect(body).toContain('# TYPE fencelock_acquire_total counter')
    expect(body).toContain(`fencelock_acquire_total{group="${group}",outcome="acquired"} 1`)
    expect(body).toContain('# TYPE fencelock_wait_seconds histogram')
    expect(body).toContain(`fencelock_wait_seconds_bucket{le="0.0005",group="${group}"}`)
    const head = await fetch(`${base}/metrics`, { method: 'HEAD' })
    expect(head.status).toBe(200)
    expect(await head.text()).toBe('')
  })

  it('serves an OpenMetrics registry with the OpenMetrics content type', async () => {
    const registry = new Registry<typeof Registry.OPENMETRICS_CONTENT_TYPE>()
    registry.setContentType(Registry.OPENMETRICS_CONTENT_TYPE)
    instrument(makeLocker(redis), { registry })
    const base = await listen(createServer(metricsHandler(registry)))
    const res = await fetch(`${base}/metrics`)
    expect(res.headers.get('content-type')).toBe(Registry.OPENMETRICS_CONTENT_TYPE)
    expect(await res.text()).toMatch(/# EOF\n$/)
  })

  it('hands a collection failure to Express\'s error handling, or answers 500 on its own', async () => {
    const failing = { contentType: 'text/plain', metrics: () => Promise.reject(new Error('collect failed')) }
    const app = express()
    app.get('/metrics', metricsHandler(failing))
    let seen: unknown
    app.use((error: unknown, _req: express.Request, res: express.Response, _next: express.NextFunction) => {
      seen = error
      res.status(503).end()
    })
    const viaExpress = await fetch(`${await listen(createServer(app))}/metrics`)
    expect(viaExpress.status).toBe(503)
    expect((seen as Error).message).toBe('collect failed')
    const plain = await fetch(`${await listen(createServer(metricsHandler(failing)))}/metrics`)
    expect(plain.status).toBe(500)
    expect(await plain.text()).toContain('collect failed')
  })
})
