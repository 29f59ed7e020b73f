/**
 * lockErrorHandler in a real express app, against real lock failures: a lock held by another
 * Locker for all of `waitMs` (LockTimeoutError) and a redis-server killed under the Locker
 * (LockUnavailableError, fast: the connection is known to be down). Other errors pass on to the
 * next error handler; a response already started is not touched.
 */
import type { AddressInfo } from 'node:net'
import express from 'express'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import {
  InvalidLockOptionError,
  LOCK_ERROR_HANDLER_DEFAULTS,
  LockLostError,
  lockErrorHandler,
  lockErrorResponse,
  LockTimeoutError,
  LockUnavailableError,
  type Locker,
} from '../src/index.js'
import { connect, connectShared, makeLocker, ready, unique } from './support/connections.js'
import { startRedisServer } from './support/redis-server.js'
import { waitUntil } from './support/timing.js'

/** An express app whose POST /work/:name runs under `locker`'s lock `name`, with the handlers under test. */
function appOf(locker: () => Locker) {
  const app = express()
  app.post('/work/:name', async (req, res, next) => {
    try {
      await locker().using(req.params.name, () => undefined, { waitMs: 100 })
      res.json({ done: true })
    } catch (error) {
      next(error)
    }
  })
  app.post('/other', (_req, _res, next) => next(new Error('not a lock error')))
  app.post('/started', (_req, res, next) => {
    res.write('partial')
    next(new LockTimeoutError('started', 5))
  })
  app.use(lockErrorHandler())
  // What the lock's handler passes on lands here.
  app.use((error: Error, _req: express.Request, res: express.Response, _next: express.NextFunction) => {
    if (res.headersSent) {
      res.end(' | passed on')
      return
    }
    res.status(500).json({ passedOn: error.message })
  })
  return app
}

async function listen(app: express.Express): Promise<{ url: string; close(): Promise<void> }> {
  const server = app.listen(0, '127.0.0.1')
  await new Promise<void>((resolve) => server.once('listening', resolve))
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  }
}

describe('lockErrorHandler', () => {
  let holder: Locker
  let waiter: Locker
  let http: { url: string; close(): Promise<void> }

  beforeAll(async () => {
    const prefix = `${unique('handler')}:`
    holder = makeLocker(await connectShared(), { prefix })
    waiter = makeLocker(await connectShared(), { prefix })
    http = await listen(appOf(() => waiter))
  })

  afterAll(async () => {
    await http?.close()
  })

  it('a lock held for all of waitMs: 503 lock_busy with Retry-After 1; free, the work is done', async () => {
    const name = unique('busy')
    const held = await holder.acquire(name)
    const busy = await fetch(`${http.url}/work/${encodeURIComponent(name)}`, { method: 'POST' })
    expect(busy.status).toBe(503)
    expect(busy.headers.get('retry-after')).toBe('1')
    expect(await busy.json()).toEqual({
      error: { code: 'lock_busy', message: expect.stringContaining('retry'), resource: name },
    })
    await held.release()
    const done = await fetch(`${http.url}/work/${encodeURIComponent(name)}`, { method: 'POST' })
    expect([done.status, await done.json()]).toEqual([200, { done: true }])
  })

  it('other errors, and a response already started, pass on to the next handler', async () => {
    const other = await fetch(`${http.url}/other`, { method: 'POST' })
    expect([other.status, await other.json()]).toEqual([500, { passedOn: 'not a lock error' }])
    const started = await fetch(`${http.url}/started`, { method: 'POST' })
    expect([started.status, await started.text()]).toEqual([200, 'partial | passed on'])
  })

  it('Redis down: 503 lock_unavailable with Retry-After 5, fast, without Redis’s address in the body', async () => {
    const server = await startRedisServer()
    const client = connect({ port: server.port })
    await ready(client, server.url)
    const locker = makeLocker(client, { commandTimeoutMs: 250 })
    const app = await listen(appOf(() => locker))
    try {
      await (await locker.acquire(unique('warm'))).release()
      await server.stop()
      await waitUntil(() => client.status !== 'ready', { what: 'the client to see the connection closed' })
      const t = performance.now()
      const down = await fetch(`${app.url}/work/${unique('down')}`, { method: 'POST' })
      // waitMs 100: the acquire fails within it, since the connection is known to be down.
      expect(performance.now() - t).toBeLessThan(1_000)
      expect(down.status).toBe(503)
      expect(down.headers.get('retry-after')).toBe('5')
      const body = (await down.json()) as { error: Record<string, string> }
      expect(body.error.code).toBe('lock_unavailable')
      expect(JSON.stringify(body)).not.toContain(String(server.port))
    } finally {
      await app.close()
    }
  })

  it('lockErrorResponse: the same mapping for other frameworks; options checked, unknown names refused', () => {
    expect(lockErrorResponse(new LockTimeoutError('r', 12), { busyRetryAfterSeconds: 3 })).toEqual({
      status: 503,
      headers: { 'Retry-After': '3' },
      body: { error: { code: 'lock_busy', message: expect.any(String), resource: 'r' } },
    })
    expect(lockErrorResponse(new LockUnavailableError(undefined, 'acquire', 'down'))?.body.error).toEqual({
      code: 'lock_unavailable',
      message: expect.any(String),
    })
    expect(lockErrorResponse(new LockLostError('r', 1n, 'expired'))).toBeUndefined()
    expect(lockErrorResponse(new Error('x'))).toBeUndefined()
    expect(LOCK_ERROR_HANDLER_DEFAULTS).toEqual({ busyRetryAfterSeconds: 1, unavailableRetryAfterSeconds: 5 })
    expect(Object.isFrozen(LOCK_ERROR_HANDLER_DEFAULTS)).toBe(true)
    for (const [options, field] of [
      [{ busyRetryAfterSecs: 1 }, 'options.busyRetryAfterSecs'],
      [{ busyRetryAfterSeconds: 1.5 }, 'busyRetryAfterSeconds'],
      [{ unavailableRetryAfterSeconds: -1 }, 'unavailableRetryAfterSeconds'],
      [null, 'options'],
    ] as const) {
      expect(() => lockErrorHandler(options as never), field).toThrow(InvalidLockOptionError)
      try {
        lockErrorHandler(options as never)
      } catch (error) {
        expect((error as InvalidLockOptionError).field).toBe(field)
      }
    }
  })
})
