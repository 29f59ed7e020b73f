// The HTTP API on real dependencies (Redis, PostgreSQL, the lock and fencing): bad input gets
// a 4xx and never a 500, and 200 concurrent connections are all answered.
import { request as httpRequest } from 'node:http'
import { brotliCompressSync, deflateSync, gzipSync } from 'node:zlib'
import type { AddressInfo } from 'node:net'
import type { Server } from 'node:http'
import { Locker } from '@fencelock/lock'
import { Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createPrisma, dropShopSchema, prepareShopSchema } from '../src/database.js'
import { buildInstance, type Instance } from '../src/instance.js'
import { readInstanceConfig } from '../src/instance-config.js'
import { lockPrefixOf, lockResource } from '../src/shop-keys.js'
import { startTestGateway, type TestGateway } from './gateway-server.js'
import { REDIS_URL, testDatabase, uniqueRun } from './services.js'

const { runId, schema } = uniqueRun('app')
const database = testDatabase(schema)
let instance: Instance
let gateway: TestGateway
let server: Server
let base: string

interface Answer {
  status: number
  body: Record<string, unknown>
  headers: Record<string, string | string[] | undefined>
}

/** One request on its own connection (no keep-alive pooling), so concurrency means connections. */
function call(method: string, path: string, body?: string | Buffer, contentType = 'application/json', headers: Record<string, string> = {}): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(`${base}${path}`, { method, agent: false, headers: { ...(body === undefined ? {} : { 'content-type': contentType }), ...headers } }, (res) => {
      const chunks: Buffer[] = []
      res.on('data', (c: Buffer) => chunks.push(c))
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8')
        let parsed: Record<string, unknown> = {}
        try {
          parsed = JSON.parse(text) as Record<string, unknown>
        } catch {
          parsed = { text }
        }
        resolve({ status: res.statusCode ?? 0, body: parsed, headers: res.headers })
      })
    })
    req.on('error', reject)
    if (body !== undefined) req.write(body)
    req.end()
  })
}
const post = (path: string, json: unknown) => call('POST', path, JSON.stringify(json))

beforeAll(async () => {
  await prepareShopSchema(database, [
    { sku: 'flash-1', name: 'Flash one', priceCents: 1999, stock: 5 },
    { sku: 'crowd', name: 'Crowd', priceCents: 500, stock: 20 },
    { sku: 'gone', name: 'Gone', priceCents: 100, stock: 0 },
    { sku: 'held', name: 'Held', priceCents: 700, stock: 1 },
  ])
  gateway = await startTestGateway(database)
  const config = readInstanceConfig({
    REDIS_URL,
    DATABASE_URL: `${database.connectionString}${database.connectionString.includes('?') ? '&' : '?'}schema=${schema}`,
    SHOP_INSTANCE_ID: 'shop-test',
    SHOP_MODE: 'fenced',
    SHOP_RUN_ID: runId,
    SHOP_GATEWAY_URL: gateway.url,
    SHOP_DB_POOL_SIZE: '5',
    SHOP_LOCK_TTL_MS: '2000',
  })
  instance = await buildInstance(config)
  server = instance.app.listen(0, '127.0.0.1')
  await new Promise<void>((r) => server.once('listening', () => r()))
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
})

afterAll(async () => {
  server?.closeAllConnections()
  await new Promise((r) => server?.close(r))
  await instance?.close()
  await gateway?.close()
  await dropShopSchema(database)
})

describe('bad input never gives a 500', () => {
  it('answers 404 for an unknown sku, and for one that cannot be a sku', async () => {
    expect((await post('/api/products/nope/purchase', { buyerId: 'b1' })).status).toBe(404)
    const weird = await post(`/api/products/${encodeURIComponent('a b;DROP TABLE')}/purchase`, { buyerId: 'b1' })
    expect(weird.status).toBe(404)
    expect(weird.body.error).toBe('unknown_product')
  })

  it('answers 400 for malformed JSON, a missing or bad buyerId, or a non-JSON body', async () => {
    for (const body of ['{"buyerId": ', '{buyerId: 1}', '"just a string"', 'nul']) {
      const answer = await call('POST', '/api/products/flash-1/purchase', body)
      expect(answer.status, body).toBe(400)
    }
    for (const json of [{}, { buyerId: 42 }, { buyerId: '' }, { buyerId: 'x'.repeat(65) }, { buyerId: ['b'] }, [1, 2], { buyerId: 'a b' }]) {
      const answer = await post('/api/products/flash-1/purchase', json)
      expect(answer.status, JSON.stringify(json)).toBe(400)
      expect(answer.body.error).toBe('invalid_buyer_id')
    }
    expect((await call('POST', '/api/products/flash-1/purchase', 'buyerId=b1', 'application/x-www-form-urlencoded')).status).toBe(400)
  })

  it('answers 400 for a body its Content-Encoding cannot decode, or a coding or charset it does not know; reads a well-compressed one', async () => {
    const json = JSON.stringify({ buyerId: 'b1' })
    const cases: [string, Buffer, string, Record<string, string>, string][] = [
      ['gzip garbage', Buffer.from(json), 'application/json', { 'content-encoding': 'gzip' }, 'unreadable_body'],
      ['truncated gzip', gzipSync(json).subarray(0, 12), 'application/json', { 'content-encoding': 'gzip' }, 'unreadable_body'],
      ['deflate garbage', Buffer.from('not deflate'), 'application/json', { 'content-encoding': 'deflate' }, 'unreadable_body'],
      ['br garbage', Buffer.from('not brotli'), 'application/json', { 'content-encoding': 'br' }, 'unreadable_body'],
      ['unknown encoding', Buffer.from(json), 'application/json', { 'content-encoding': 'compress' }, 'unsupported_encoding'],
      ['charset outside utf-*', Buffer.from(json), 'application/json; charset=latin1', {}, 'unsupported_encoding'],
      ['unknown charset', Buffer.from(json), 'application/json; charset=utf-99', {}, 'unsupported_encoding'],
    ]
    for (const [name, body, contentType, headers, error] of cases) {
      const answer = await call('POST', '/api/products/gone/purchase', body, contentType, headers)
      expect.soft(answer.status, `${name}: ${JSON.stringify(answer.body)}`).toBe(400)
      expect.soft(answer.body.error, name).toBe(error)
    }
    const big = gzipSync(JSON.stringify({ buyerId: 'b1', pad: 'x'.repeat(16 * 1024) }))
    expect((await call('POST', '/api/products/gone/purchase', big, 'application/json', { 'content-encoding': 'gzip' })).body.error, 'decompressed past 16 KiB').toBe('body_too_large')
    // 409 sold out: the body was read (the product 'gone' has no stock, so nothing is sold).
    for (const [encoding, compress] of [['gzip', gzipSync], ['deflate', deflateSync], ['br', brotliCompressSync]] as const) {
      expect((await call('POST', '/api/products/gone/purchase', compress(json), 'application/json', { 'content-encoding': encoding })).status, encoding).toBe(409)
    }
  })

  it('answers 413 for a body over 16 KiB, and accepts one just under it', async () => {
    const big = JSON.stringify({ buyerId: 'b1', pad: 'x'.repeat(16 * 1024) })
    const answer = await call('POST', '/api/products/flash-1/purchase', big)
    expect(answer.status).toBe(413)
    expect(answer.body.error).toBe('body_too_large')
    const small = JSON.stringify({ buyerId: 'b1', pad: 'x'.repeat(16 * 1024 - 40) })
    expect((await call('POST', '/api/products/gone/purchase', small)).status).toBe(409)
  })

  it('answers 400 for a malformed order id or path and 404 for an unknown order', async () => {
    for (const id of ['abc', '0', '-1', '1.5', '99999999999', '2147483648', '%E0', '%']) {
      expect((await post(`/api/orders/${id}/pay`, {})).status, id).toBe(400)
    }
    expect((await post('/api/products/%E0/purchase', { buyerId: 'b1' })).status).toBe(400)
    expect((await post('/api/orders/2147483647/pay', {})).status).toBe(404)
    expect((await call('GET', '/no/such/route')).status).toBe(404)
  })
})

describe('the shop', () => {
  it('sells, refuses a sold-out product, pays once and answers a repeated payment idempotently', async () => {
    expect((await post('/api/products/gone/purchase', { buyerId: 'b1' })).body.error).toBe('sold_out')
    const bought = await post('/api/products/flash-1/purchase', { buyerId: 'buyer-1' })
    expect(bought.status).toBe(201)
    expect(bought.body).toMatchObject({ result: 'ordered', sku: 'flash-1', stockLeft: 4, instance: 'shop-test' })
    expect(typeof bought.body.token).toBe('string')
    const orderId = bought.body.orderId as number
    const paid = await post(`/api/orders/${orderId}/pay`, {})
    expect(paid.status).toBe(200)
    expect(paid.body).toMatchObject({ result: 'paid', orderId, amountCents: 1999 })
    expect((await post(`/api/orders/${orderId}/pay`, {})).body.result).toBe('already_paid')
  })

  it('answers a payment whose order another delivery is paying (its lock held elsewhere) 202 in_progress with when to deliver it again, charging nothing; then pays it', async () => {
    const bought = await post('/api/products/held/purchase', { buyerId: 'buyer-2' })
    const orderId = bought.body.orderId as number
    const ledger = createPrisma(database, 1)
    const charges = (id: number) => ledger.gatewayCharge.count({ where: { orderId: id } })
    // Another instance's delivery of the same payment, inside its hold.
    const redis = new Redis(REDIS_URL)
    const other = new Locker(redis, { prefix: lockPrefixOf(runId) })
    try {
      const lock = await other.acquire(lockResource.order(orderId), { ttlMs: 10_000 })
      const meanwhile = await post(`/api/orders/${orderId}/pay`, {})
      expect(meanwhile.status).toBe(202)
      // Half the lease (SHOP_LOCK_TTL_MS 2000); Retry-After in whole seconds.
      expect(meanwhile.body).toMatchObject({ result: 'in_progress', orderId, retryAfterMs: 1000 })
      expect(meanwhile.headers['retry-after']).toBe('1')
      expect(await charges(orderId)).toBe(0)
      await lock.release()
      expect((await post(`/api/orders/${orderId}/pay`, {})).body).toMatchObject({ result: 'paid', orderId })
      expect(await charges(orderId)).toBe(1)
    } finally {
      await other.close()
      redis.disconnect()
      await ledger.$disconnect()
    }
  })

  it('reports state counted from the database, and serves /metrics', async () => {
    const state = await call('GET', '/api/state')
    expect(state.status).toBe(200)
    expect(state.body).toMatchObject({ instance: 'shop-test', mode: 'fenced', violations: { total: 0 } })
    const flash = (state.body.products as Array<Record<string, unknown>>).find((p) => p.sku === 'flash-1')
    expect(flash).toMatchObject({ initialStock: 5, stock: 4, unitsSold: 1, lostUpdates: 0, oversoldUnits: 0 })
    expect(Array.isArray(state.body.locks)).toBe(true)
    const metrics = await call('GET', '/metrics')
    expect(metrics.status).toBe(200)
    expect(String(metrics.body.text)).toContain('fencelock_acquire_total')
  })
})

describe('200 concurrent connections', () => {
  it('answers every one of 200 concurrent purchases (each on its own connection) without a 5xx, selling exactly the stock', async () => {
    const answers = await Promise.all(Array.from({ length: 200 }, (_, i) => post('/api/products/crowd/purchase', { buyerId: `crowd-${i}` })))
    const statuses = answers.map((a) => a.status)
    expect(statuses.filter((s) => s >= 500)).toEqual([])
    expect(statuses.filter((s) => s === 201)).toHaveLength(20)
    expect(statuses.filter((s) => s === 409)).toHaveLength(180)
  })

  it('answers 200 concurrent state reads', async () => {
    const answers = await Promise.all(Array.from({ length: 200 }, () => call('GET', '/api/state')))
    expect(answers.every((a) => a.status === 200)).toBe(true)
  })
})
