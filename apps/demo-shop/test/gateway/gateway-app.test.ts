// The payment gateway as a provider's API, on the real database: every assertion counts rows in
// its ledger (GatewayCharge), where the money moves.
import { brotliCompressSync, deflateSync, gzipSync } from 'node:zlib'
import { fencingHeaders } from '@fencelock/fencing'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { dropShopSchema, prepareShopSchema } from '../../src/database.js'
import { startTestGateway, type TestGateway } from '../gateway-server.js'
import { testDatabase, uniqueRun } from '../services.js'

const { schema } = uniqueRun('gateway')
const database = testDatabase(schema)
let gateway: TestGateway

beforeAll(async () => {
  await prepareShopSchema(database, [])
  // Latency long enough for concurrent requests to overlap.
  gateway = await startTestGateway(database, { minMs: 20, maxMs: 40 })
})

afterAll(async () => {
  await gateway?.close()
  await dropShopSchema(database)
})

let nextOrder = 0
const order = () => ++nextOrder
const charge = (body: unknown, headers: Record<string, string> = {}) =>
  fetch(`${gateway.url}/v1/charges`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: typeof body === 'string' ? body : JSON.stringify(body) })
/** A raw body (bytes as sent, e.g. compressed) with its own headers. */
const chargeRaw = (body: Uint8Array, headers: Record<string, string>) =>
  fetch(`${gateway.url}/v1/charges`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body })
const ledger = (orderId: number) => gateway.db.gatewayCharge.count({ where: { orderId } })

describe('Idempotency-Key', () => {
  it('a repeated key returns the first answer (status and body) and charges once', async () => {
    const orderId = order()
    const key = `order:${orderId}`
    const first = await charge({ orderId, amountCents: 4999 }, { 'Idempotency-Key': key })
    expect(first.status).toBe(201)
    const firstBody = await first.json()
    expect(firstBody).toMatchObject({ object: 'charge', orderId, amountCents: 4999, idempotencyKey: key })
    const again = await charge({ amountCents: 4999, orderId }, { 'Idempotency-Key': key })
    expect(again.status).toBe(201)
    expect(again.headers.get('idempotent-replayed')).toBe('true')
    expect(await again.json()).toEqual(firstBody)
    expect(await ledger(orderId)).toBe(1)
  })

  it('the same key with other parameters is refused with 422, and nothing is charged', async () => {
    const orderId = order()
    const key = `order:${orderId}`
    expect((await charge({ orderId, amountCents: 100 }, { 'Idempotency-Key': key })).status).toBe(201)
    const other = await charge({ orderId, amountCents: 200 }, { 'Idempotency-Key': key })
    expect(other.status).toBe(422)
    expect(await other.json()).toMatchObject({ error: { code: 'idempotency_key_reused', param: 'Idempotency-Key' } })
    expect(await ledger(orderId)).toBe(1)
  })

  it('50 concurrent requests with one key make one charge, and all get its answer', async () => {
    const orderId = order()
    const answers = await Promise.all(Array.from({ length: 50 }, () => charge({ orderId, amountCents: 4999 }, { 'Idempotency-Key': `order:${orderId}` })))
    expect(answers.map((a) => a.status)).toEqual(Array(50).fill(201))
    const ids = new Set(await Promise.all(answers.map(async (a) => ((await a.json()) as { id: string }).id)))
    expect(ids.size).toBe(1)
    expect(await ledger(orderId)).toBe(1)
  })

  it('control: the same 50 requests without a key charge 50 times', async () => {
    const orderId = order()
    const answers = await Promise.all(Array.from({ length: 50 }, () => charge({ orderId, amountCents: 4999 })))
    expect(answers.every((a) => a.status === 201)).toBe(true)
    expect(await ledger(orderId)).toBe(50)
  })
})

describe('fencing headers', () => {
  it('a token older than the newest seen for the resource is refused with 409 and a machine-readable code; the ledger is unchanged', async () => {
    const orderId = order()
    const resource = `order:${orderId}`
    expect((await charge({ orderId, amountCents: 1 }, fencingHeaders(6n, resource))).status).toBe(201)
    const stale = await charge({ orderId, amountCents: 1 }, fencingHeaders(5n, resource))
    expect(stale.status).toBe(409)
    expect(await stale.json()).toMatchObject({ error: { code: 'stale_fencing_token', resource, token: '5', storedToken: '6' } })
    expect(await ledger(orderId)).toBe(1)
    // An older holder does not get the replay of a newer one's charge either: it is refused.
    const withKey = await charge({ orderId, amountCents: 1 }, { 'Idempotency-Key': `k:${orderId}`, ...fencingHeaders(5n, resource) })
    expect(withKey.status).toBe(409)
    expect(await ledger(orderId)).toBe(1)
    const row = await gateway.db.gatewayCharge.findFirstOrThrow({ where: { orderId } })
    expect(row).toMatchObject({ fencingResource: resource, fencingToken: 6n })
  })
})

describe('idempotency key and fencing headers together', () => {
  it('a newer holder repeating the key gets the first charge, and its token is recorded: the older holder is refused from then on', async () => {
    const orderId = order()
    const resource = `order:${orderId}`
    const key = `order:${orderId}`
    const first = await charge({ orderId, amountCents: 700 }, { 'Idempotency-Key': key, ...fencingHeaders(5n, resource) })
    expect(first.status).toBe(201)
    const firstBody = await first.json()
    const replay = await charge({ orderId, amountCents: 700 }, { 'Idempotency-Key': key, ...fencingHeaders(6n, resource) })
    expect(replay.status).toBe(201)
    expect(replay.headers.get('idempotent-replayed')).toBe('true')
    expect(await replay.json()).toEqual(firstBody)
    expect(await ledger(orderId)).toBe(1)
    expect(await gateway.db.gatewayFence.findUniqueOrThrow({ where: { resource } })).toMatchObject({ fenceToken: 6n })
    const older = await charge({ orderId, amountCents: 700 }, { 'Idempotency-Key': key, ...fencingHeaders(5n, resource) })
    expect(older.status).toBe(409)
    expect(await ledger(orderId)).toBe(1)
  })

  it('20 concurrent holders with one key and rising tokens: one charge, and the newest token is the resource\'s fence', async () => {
    const orderId = order()
    const resource = `order:${orderId}`
    const answers = await Promise.all(
      Array.from({ length: 20 }, (_, i) => charge({ orderId, amountCents: 700 }, { 'Idempotency-Key': `order:${orderId}`, ...fencingHeaders(BigInt(100 + i), resource) })),
    )
    // An older token that arrives after a newer one was recorded is refused (409); every other answer is the one charge.
    const statuses = answers.map((a) => a.status)
    expect(statuses.every((s) => s === 201 || s === 409)).toBe(true)
    const ids = new Set(await Promise.all(answers.filter((a) => a.status === 201).map(async (a) => ((await a.json()) as { id: string }).id)))
    expect(ids.size).toBe(1)
    expect(await ledger(orderId)).toBe(1)
    expect(await gateway.db.gatewayFence.findUniqueOrThrow({ where: { resource } })).toMatchObject({ fenceToken: 119n })
  })
})

describe('bad input gets 400 (or 404, 413, 422), never a 500', () => {
  it('bad headers, bodies and routes', async () => {
    const orderId = order()
    const cases: [Promise<Response>, number, string][] = [
      [charge({ orderId, amountCents: 1 }, { 'Idempotency-Key': 'x'.repeat(256) }), 400, 'Idempotency-Key'],
      [charge({ orderId, amountCents: 1 }, { 'Idempotency-Key': 'has space' }), 400, 'Idempotency-Key'],
      [charge({ orderId, amountCents: 1 }, { 'Fencing-Token': 'abc', 'Fencing-Resource': 'order:1' }), 400, 'invalid_fencing_header'],
      [charge({ orderId, amountCents: 1 }, { 'Fencing-Token': '1' }), 400, 'invalid_fencing_header'],
      [charge({ orderId: 'one', amountCents: 1 }), 400, 'orderId'],
      [charge({ orderId: 1.5, amountCents: 1 }), 400, 'orderId'],
      [charge({ orderId: 2 ** 31, amountCents: 1 }), 400, 'orderId'],
      [charge({ amountCents: 1 }), 400, 'orderId'],
      [charge({ orderId, amountCents: -1 }), 400, 'amountCents'],
      [charge({ orderId, amountCents: 1, currency: 'eur' }), 400, 'currency'],
      [charge([orderId]), 400, 'body'],
      [charge('{"orderId": '), 400, 'invalid_request'],
      [charge({ orderId, amountCents: 1, pad: 'x'.repeat(20_000) }), 413, 'body_too_large'],
      // A body its Content-Encoding cannot decode, a coding or a charset the gateway does not
      // know: the request's fault, so 400 naming what to fix, like any other bad request.
      [chargeRaw(Buffer.from(JSON.stringify({ orderId, amountCents: 1 })), { 'content-encoding': 'gzip' }), 400, 'invalid_request'],
      [chargeRaw(gzipSync(JSON.stringify({ orderId, amountCents: 1 })).subarray(0, 12), { 'content-encoding': 'gzip' }), 400, 'invalid_request'],
      [chargeRaw(Buffer.from('not deflate'), { 'content-encoding': 'deflate' }), 400, 'invalid_request'],
      [chargeRaw(Buffer.from('not brotli'), { 'content-encoding': 'br' }), 400, 'invalid_request'],
      [chargeRaw(Buffer.from(JSON.stringify({ orderId, amountCents: 1 })), { 'content-encoding': 'compress' }), 400, 'Content-Encoding'],
      [chargeRaw(Buffer.from(JSON.stringify({ orderId, amountCents: 1 })), { 'content-type': 'application/json; charset=latin1' }), 400, 'Content-Type'],
      [chargeRaw(Buffer.from(JSON.stringify({ orderId, amountCents: 1 })), { 'content-type': 'application/json; charset=utf-99' }), 400, 'Content-Type'],
      // Decompressed past the limit: still too large.
      [chargeRaw(gzipSync(JSON.stringify({ orderId, amountCents: 1, pad: 'x'.repeat(20_000) })), { 'content-encoding': 'gzip' }), 413, 'body_too_large'],
      [fetch(`${gateway.url}/v1/charges?orderId=abc`), 400, 'orderId'],
      [fetch(`${gateway.url}/v1/charges?orderId=%E0`), 400, 'orderId'],
      [fetch(`${gateway.url}/v1/refunds`, { method: 'POST' }), 404, 'not_found'],
      [fetch(`${gateway.url}/v1/authorizations`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"buyerId":"a b","amountCents":1}' }), 400, 'buyerId'],
    ]
    // Soft: a failure names every case that fails (by its index), not just the first.
    for (const [i, [pending, status, mention]] of cases.entries()) {
      const res = await pending
      const text = await res.text()
      expect.soft(res.status, `case ${i}: ${text}`).toBe(status)
      expect.soft(text, `case ${i}`).toContain(mention)
    }
    expect(await ledger(orderId)).toBe(0)
  })

  it('reads a body compressed with gzip, deflate or br', async () => {
    for (const [encoding, compress] of [['gzip', gzipSync], ['deflate', deflateSync], ['br', brotliCompressSync]] as const) {
      const orderId = order()
      const res = await chargeRaw(compress(JSON.stringify({ orderId, amountCents: 3 })), { 'content-encoding': encoding })
      expect(res.status, encoding).toBe(201)
      expect(await ledger(orderId)).toBe(1)
    }
  })

  it('lists an order’s charges; authorizes without moving money', async () => {
    const orderId = order()
    await charge({ orderId, amountCents: 7 })
    const list = await fetch(`${gateway.url}/v1/charges?orderId=${orderId}`)
    expect(await list.json()).toMatchObject({ object: 'list', data: [{ orderId, amountCents: 7 }] })
    const auth = await fetch(`${gateway.url}/v1/authorizations`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ buyerId: 'b-1', amountCents: 5 }) })
    expect(auth.status).toBe(201)
    expect(await auth.json()).toMatchObject({ object: 'authorization', amountCents: 5 })
  })
})
