/**
 * Fencing over HTTP: the client's headers, the server's reading of them, the fenced-resource
 * core and the express middleware, on a real express server and the real database. The service
 * here is a small ledger (the demo gateway's tables: `GatewayFence` per resource, `GatewayCharge`
 * rows) so every assertion counts rows where the effect lands.
 */
import { connect, type AddressInfo } from 'node:net'
import { databaseTarget } from '@fencelock/devkit/database-url'
import { PrismaPg } from '@prisma/adapter-pg'
import express from 'express'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import {
  fencing,
  fencingErrorHandler,
  fencingHeaders,
  fencingMiddleware,
  InvalidFenceTokenError,
  InvalidFencingHeaderError,
  InvalidFencingOptionError,
  MissingFenceTokenError,
  readFencingHeaders,
  StaleFencingTokenError,
  withFencedResource,
  withFenceToken,
  type FencedRequest,
} from '../src/index.js'
import { BAD_TOKENS } from './support/bad-tokens.js'
import { createTestDatabase, gate, PrismaClient, settle, waitForLockWait, type TestDatabase } from './support/database.js'

let t: TestDatabase
let service: ReturnType<typeof serviceClient>
let server: ReturnType<express.Express['listen']>
let url: string

/** The service's own client: only its resource model is fenced. */
function serviceClient(base: PrismaClient) {
  return base.$extends(fencing({ models: { GatewayFence: 'fenceToken' } }))
}

let charges = 0
/** Requests held in their handler, by token, until the test opens the gate. */
const pauses = new Map<bigint, ReturnType<typeof gate>>()
/** A service that records a charge per request, under the request's fencing claim when it has one. */
function serviceApp(db: ReturnType<typeof serviceClient>) {
  const app = express()
  app.use(express.json())
  app.post('/charges', fencingMiddleware({ db, model: 'GatewayFence', recordBeforeHandler: false }), async (req, res, next) => {
    try {
      const fencing = res.locals.fencing as FencedRequest<typeof db> | undefined
      const write = (tx: Pick<typeof db, 'gatewayCharge'>) =>
        tx.gatewayCharge.create({ data: { chargeId: `ch_test_${++charges}_${process.pid}`, orderId: Number(req.body.orderId), amountCents: 100 } })
      const charge = fencing === undefined ? await write(db) : await fencing.transaction((tx) => write(tx))
      res.status(201).json({ chargeId: charge.chargeId })
    } catch (error) {
      next(error)
    }
  })
  app.post('/strict', fencingMiddleware({ db, model: 'GatewayFence', required: true }), (_req, res) => {
    res.json({ ok: true })
  })
  // A handler that may be held (a pause: GC, SIGSTOP) after the middleware, before its write: with
  // the default check only (recordBeforeHandler), its plain write; and the fenced-write pattern.
  const charge = (tx: Pick<typeof db, 'gatewayCharge'>, orderId: number, token: bigint) =>
    tx.gatewayCharge.create({ data: { chargeId: `ch_paused_${orderId}_${token}`, orderId, amountCents: 1, fencingToken: token } })
  app.post('/paused-check', fencingMiddleware({ db, model: 'GatewayFence' }), async (req, res, next) => {
    try {
      const fencing = res.locals.fencing as FencedRequest<typeof db>
      await pauses.get(fencing.token)?.promise
      res.status(201).json({ chargeId: (await charge(db, Number(req.body.orderId), fencing.token)).chargeId })
    } catch (error) {
      next(error)
    }
  })
  app.post('/paused-fenced', fencingMiddleware({ db, model: 'GatewayFence', recordBeforeHandler: false }), async (req, res, next) => {
    try {
      const fencing = res.locals.fencing as FencedRequest<typeof db>
      await pauses.get(fencing.token)?.promise
      res.status(201).json({ chargeId: (await fencing.transaction((tx) => charge(tx, Number(req.body.orderId), fencing.token))).chargeId })
    } catch (error) {
      next(error)
    }
  })
  app.use(fencingErrorHandler())
  return app
}

beforeAll(async () => {
  t = await createTestDatabase('http')
  service = serviceClient(t.base)
  server = serviceApp(service).listen(0, '127.0.0.1')
  await new Promise((resolve) => server.once('listening', resolve))
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
})

afterAll(async () => {
  await new Promise((resolve) => server?.close(resolve))
  await t?.close()
})

const post = (path: string, body: unknown, headers: Record<string, string> = {}) =>
  fetch(`${url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) })
const ledger = (orderId: number) => t.base.gatewayCharge.count({ where: { orderId } })
let orders = 0
const nextOrder = () => 900_000 + ++orders

describe('fencingHeaders (client side)', () => {
  it('takes a lock’s token and resource, a token and a resource, or the ambient token', () => {
    expect(fencingHeaders({ token: 9_007_199_254_740_993n, resource: 'order:27' })).toEqual({ 'Fencing-Token': '9007199254740993', 'Fencing-Resource': 'order:27' })
    expect(fencingHeaders('12', 'order:1')).toEqual({ 'Fencing-Token': '12', 'Fencing-Resource': 'order:1' })
    expect(withFenceToken(7n, () => fencingHeaders(undefined, 'order:2'))).toEqual({ 'Fencing-Token': '7', 'Fencing-Resource': 'order:2' })
  })

  it('refuses what it cannot send, before any I/O, with typed errors', () => {
    expect(() => fencingHeaders(undefined, 'order:1')).toThrow(MissingFenceTokenError)
    for (const [, bad] of BAD_TOKENS.filter(([, v]) => typeof v !== 'object' || v === null)) {
      expect(() => fencingHeaders(bad as bigint, 'order:1')).toThrow(InvalidFenceTokenError)
    }
    // A holder must have both.
    expect(() => fencingHeaders({ token: 5n } as never)).toThrow(InvalidFencingOptionError)
    expect(() => fencingHeaders({ token: 5, resource: 'order:1' } as never)).toThrow(InvalidFenceTokenError)
    for (const resource of ['', 'x'.repeat(1025), 'é'.repeat(513), '\ud800', 'a\0b', 7]) {
      expect(() => fencingHeaders(1n, resource as string)).toThrow(InvalidFencingOptionError)
    }
  })

  it('carries every name the lock grants (spaces, non-ASCII, up to 1 024 UTF-8 bytes), percent-encoded, and reads it back (issue 24)', () => {
    // Before: 'order 42', 'ordér:1' and any name over 512 bytes were refused, though the Locker grants them.
    const names = ['order 42', 'ordér:1', 'a\nb', 'r1,r2', '100%', 'x'.repeat(1024), '€'.repeat(341), '日本:注文']
    for (const resource of names) {
      const sent = fencingHeaders(1n, resource)
      expect(sent['Fencing-Resource'], resource).toMatch(/^[\x21-\x7e]+$/)
      expect(sent['Fencing-Resource']).not.toContain(',')
      expect(readFencingHeaders((name) => (name === 'Fencing-Token' ? sent['Fencing-Token'] : sent['Fencing-Resource']))).toEqual({ token: 1n, resource })
    }
    expect(fencingHeaders(1n, 'order 42')['Fencing-Resource']).toBe('order%2042')
    expect(fencingHeaders(1n, 'order:27')['Fencing-Resource']).toBe('order:27')
  })
})

describe('readFencingHeaders (server side)', () => {
  const read = (headers: Record<string, string | string[]>) => readFencingHeaders((name) => headers[name.toLowerCase()])

  it('round-trips what the client sends; no headers is no claim', () => {
    const sent = fencingHeaders(2n ** 63n - 1n, 'order:27')
    const lower = Object.fromEntries(Object.entries(sent).map(([k, v]) => [k.toLowerCase(), v]))
    expect(read(lower)).toEqual({ token: 2n ** 63n - 1n, resource: 'order:27' })
    expect(read({})).toBeUndefined()
  })

  it('names the header and the rule of every bad one', () => {
    const cases: [Record<string, string | string[]>, string][] = [
      [{ 'fencing-token': '5' }, 'Fencing-Resource'],
      [{ 'fencing-resource': 'order:1' }, 'Fencing-Token'],
      [{ 'fencing-token': '-5', 'fencing-resource': 'order:1' }, 'Fencing-Token'],
      [{ 'fencing-token': '1e3', 'fencing-resource': 'order:1' }, 'Fencing-Token'],
      [{ 'fencing-token': '9223372036854775808', 'fencing-resource': 'order:1' }, 'Fencing-Token'],
      [{ 'fencing-token': ['1', '2'], 'fencing-resource': 'order:1' }, 'Fencing-Token'],
      [{ 'fencing-token': '1', 'fencing-resource': '' }, 'Fencing-Resource'],
      [{ 'fencing-token': '1', 'fencing-resource': 'x'.repeat(1025) }, 'Fencing-Resource'],
      // What Node's req.headers makes of the header sent twice, the second one empty: 'r1, '.
      [{ 'fencing-token': '1', 'fencing-resource': 'r1, ' }, 'Fencing-Resource'],
      [{ 'fencing-token': '1', 'fencing-resource': ['r1', ''] }, 'Fencing-Resource'],
      [{ 'fencing-token': '1', 'fencing-resource': 'a%zz' }, 'Fencing-Resource'],
      [{ 'fencing-token': '1', 'fencing-resource': '%C3' }, 'Fencing-Resource'],
      [{ 'fencing-token': '1', 'fencing-resource': 'a%00b' }, 'Fencing-Resource'],
      [{ 'fencing-token': '1', 'fencing-resource': 'a b' }, 'Fencing-Resource'],
      // Not exactly a token or a resource: whitespace of any kind around it (U+00A0 too, which trim() strips).
      ...[' 5', '5 ', '\t5', '5\xA0', '\xA05', '5\u2003', '\uFEFF5', '5\u3000'].map((token) => [{ 'fencing-token': token, 'fencing-resource': 'r' }, 'Fencing-Token'] as [Record<string, string>, string]),
      ...[' r', 'r ', 'r\t', 'r\xA0', '\xA0r', 'r\u2028', '\uFEFFr', 'r\u3000'].map((resource) => [{ 'fencing-token': '5', 'fencing-resource': resource }, 'Fencing-Resource'] as [Record<string, string>, string]),
    ]
    for (const [headers, header] of cases) {
      let error: unknown
      try {
        read(headers)
      } catch (e) {
        error = e
      }
      expect(error, JSON.stringify(headers)).toBeInstanceOf(InvalidFencingHeaderError)
      expect(error).toMatchObject({ header })
    }
  })
})

describe('withFencedResource (the core)', () => {
  it('records the newest token per resource; an older one is refused before its work runs, and the ledger is unchanged', async () => {
    const orderId = nextOrder()
    const resource = `order:${orderId}`
    let ran = 0
    const charge = (token: bigint) =>
      withFencedResource(service, { token, resource }, { model: 'GatewayFence' }, async (tx) => {
        ran++
        return tx.gatewayCharge.create({ data: { chargeId: `ch_core_${orderId}_${token}_${ran}`, orderId, amountCents: 1 } })
      })
    await charge(6n)
    const stale = await settle(charge(5n))
    expect(stale.error).toBeInstanceOf(StaleFencingTokenError)
    expect(stale.error).toMatchObject({ model: 'GatewayFence', token: 5n, storedToken: 6n })
    expect(ran).toBe(1)
    expect(await ledger(orderId)).toBe(1)
    await charge(6n) // the same holder again
    expect(await ledger(orderId)).toBe(2)
    expect(await t.base.gatewayFence.findUniqueOrThrow({ where: { resource } })).toEqual({ resource, fenceToken: 6n })
  })

  it('two requests for one resource do their work one after the other; the older one behind a newer one is refused', async () => {
    const orderId = nextOrder()
    const resource = `order:${orderId}`
    const inside = gate()
    const release = gate()
    // Ordered by events, not by time: limits far above what a loaded machine needs (Prisma's default
    // 5 s for a transaction was once too short), so only a real hang fails the test.
    const limits = { model: 'GatewayFence', maxWaitMs: 60_000, timeoutMs: 120_000 } as const
    const newer = withFencedResource(service, { token: 10n, resource }, limits, async (tx) => {
      inside.open()
      await release.promise
      return tx.gatewayCharge.create({ data: { chargeId: `ch_order_${orderId}`, orderId, amountCents: 1 } })
    })
    // The newer one runs its work: it holds the resource's row lock. Send the older one behind it,
    // and let the newer one finish once the older one waits for that lock.
    await inside.promise
    const older = settle(withFencedResource(service, { token: 9n, resource }, limits, async () => 'ran'))
    try {
      await Promise.race([waitForLockWait(t.admin, t.schema, 60_000), older])
    } finally {
      release.open()
    }
    await newer
    expect((await older).error).toBeInstanceOf(StaleFencingTokenError)
    expect(await ledger(orderId)).toBe(1)
  })

  it('records a claim in one statement for a known resource, two for a new one, three for a refusal (counted on the database)', async () => {
    const logged = new PrismaClient({ adapter: new PrismaPg({ connectionString: databaseTarget().connectionString }, { schema: t.schema }), log: [{ emit: 'event', level: 'query' }] })
    let statements: string[] = []
    logged.$on('query', (event) => statements.push(event.query.replaceAll(`"${t.schema}".`, '').replace(/ (SET|WHERE|VALUES|ON|FROM|RETURNING) .*$/s, '')))
    const db = serviceClient(logged)
    const resource = `order:${nextOrder()}`
    const claim = async (token: bigint) => {
      statements = []
      const outcome = await settle(withFencedResource(db, { token, resource }, { model: 'GatewayFence' }, async () => 'ran'))
      // Prisma's query events show COMMIT (and ROLLBACK) but not BEGIN.
      return { outcome, statements: statements.filter((q) => !/^(COMMIT|ROLLBACK)$/.test(q)) }
    }
    try {
      const created = await claim(3n)
      expect(created.outcome.value).toBe('ran')
      expect(created.statements).toEqual(['UPDATE "GatewayFence"', 'INSERT INTO "GatewayFence" ("resource","fenceToken")'])
      const known = await claim(4n)
      expect(known.outcome.value).toBe('ran')
      expect(known.statements).toEqual(['UPDATE "GatewayFence"'])
      const refused = await claim(2n)
      expect(refused.outcome.error).toMatchObject({ name: 'StaleFencingTokenError', token: 2n, storedToken: 4n })
      expect(refused.statements).toEqual(['UPDATE "GatewayFence"', 'INSERT INTO "GatewayFence" ("resource","fenceToken")', expect.stringMatching(/^SELECT .*"GatewayFence"\."fenceToken"$/)])
      expect(await t.base.gatewayFence.findUniqueOrThrow({ where: { resource } })).toEqual({ resource, fenceToken: 4n })
    } finally {
      await logged.$disconnect()
    }
  })

  it('a resource row deleted under token 8 is not recreated by token 7 (the guard refuses, as StaleFencingTokenError); token 9 recreates it', async () => {
    const orderId = nextOrder()
    const resource = `order:${orderId}`
    const charge = (token: bigint) =>
      withFencedResource(service, { token, resource }, { model: 'GatewayFence' }, (tx) =>
        tx.gatewayCharge.create({ data: { chargeId: `ch_tomb_${orderId}_${token}`, orderId, amountCents: 1 } }),
      )
    await charge(7n)
    await service.$fenced(8n).gatewayFence.delete({ where: { resource } })
    const stale = await settle(charge(7n))
    expect(stale.error).toBeInstanceOf(StaleFencingTokenError)
    expect(stale.error).toMatchObject({ token: 7n, storedToken: 8n })
    expect(await ledger(orderId)).toBe(1)
    await charge(9n)
    expect(await ledger(orderId)).toBe(2)
    expect(await t.base.gatewayFence.findUniqueOrThrow({ where: { resource } })).toEqual({ resource, fenceToken: 9n })
  })

  it('control: the same work without the resource fence charges for the older token too', async () => {
    const orderId = nextOrder()
    for (const token of [6n, 5n]) await service.gatewayCharge.create({ data: { chargeId: `ch_plain_${orderId}_${token}`, orderId, amountCents: 1 } })
    expect(await ledger(orderId)).toBe(2)
  })

  it('checks its claim as the header functions do, before any I/O: typed errors, not P2039/54000 nor TypeError (issue 24 case 7)', async () => {
    const claims: [unknown, string | undefined][] = [
      [undefined, 'claim'],
      [{ token: 1n, resource: '' }, 'claim.resource'],
      [{ token: 1n, resource: 'x'.repeat(10_240) }, 'claim.resource'],
      [{ token: 1n, resource: 'a\0b' }, 'claim.resource'],
      [{ token: 1n }, 'claim.resource'],
    ]
    for (const [claim, field] of claims) {
      const result = await settle(withFencedResource(service, claim as never, { model: 'GatewayFence' }, async () => 1))
      expect(result.error, String(field)).toBeInstanceOf(InvalidFencingOptionError)
      expect(result.error).toMatchObject({ field })
    }
    expect((await settle(withFencedResource(service, { token: 5 } as never, { model: 'GatewayFence' }, async () => 1))).error).toBeInstanceOf(InvalidFenceTokenError)
    // A name the lock grants, non-ASCII, is recorded as it is.
    const resource = `ordér ${nextOrder()}`
    expect(await withFencedResource(service, { token: 3n, resource }, { model: 'GatewayFence' }, async () => 'ran')).toBe('ran')
    expect(await t.base.gatewayFence.findUniqueOrThrow({ where: { resource } })).toEqual({ resource, fenceToken: 3n })
  })

  it('checks its options before any I/O', async () => {
    for (const [options, field] of [
      [{ model: 'Product' }, 'model'],
      [{ model: 'GatewayFence', keyField: 'fenceToken' }, 'keyField'],
      [{ model: 'GatewayFence', keyField: 'no such' }, 'keyField'],
      [{ model: 'GatewayFence', timeoutMs: 0 }, 'timeoutMs'],
    ] as const) {
      const result = await settle(withFencedResource(service, { token: 1n, resource: 'r:1' }, options as never, async () => 1))
      expect(result.error, field).toBeInstanceOf(InvalidFencingOptionError)
      expect(result.error).toMatchObject({ field })
    }
    expect(() => fencingMiddleware({ db: t.base as never, model: 'GatewayFence' })).toThrow(InvalidFencingOptionError)
  })
})

describe('fencingMiddleware (express)', () => {
  it('an older token is refused with 409 and a machine-readable code, and the ledger is unchanged', async () => {
    const orderId = nextOrder()
    const resource = `order:${orderId}`
    expect((await post('/charges', { orderId }, fencingHeaders(8n, resource))).status).toBe(201)
    const stale = await post('/charges', { orderId }, fencingHeaders(7n, resource))
    expect(stale.status).toBe(409)
    expect(await stale.json()).toEqual({
      error: expect.objectContaining({ code: 'stale_fencing_token', resource, token: '7', storedToken: '8' }) as unknown,
    })
    expect(await ledger(orderId)).toBe(1)
    expect((await post('/charges', { orderId }, fencingHeaders(9n, resource))).status).toBe(201)
    expect(await ledger(orderId)).toBe(2)
  })

  it('bad fencing headers get 400 naming the header, never a 500; a request without them passes (unless required)', async () => {
    const orderId = nextOrder()
    const bad: Record<string, string>[] = [
      { 'Fencing-Token': 'abc', 'Fencing-Resource': 'order:1' },
      { 'Fencing-Token': '1' },
      { 'Fencing-Resource': 'order:1' },
      { 'Fencing-Token': '99999999999999999999', 'Fencing-Resource': 'order:1' },
    ]
    for (const headers of bad) {
      const res = await post('/charges', { orderId }, headers)
      expect(res.status, JSON.stringify(headers)).toBe(400)
      expect(await res.json()).toMatchObject({ error: { code: 'invalid_fencing_header' } })
    }
    expect(await ledger(orderId)).toBe(0)
    expect((await post('/charges', { orderId })).status).toBe(201)
    const strict = await post('/strict', {})
    expect(strict.status).toBe(400)
    expect(await strict.json()).toMatchObject({ error: { code: 'missing_fencing_header' } })
    const early = await post('/strict', {}, fencingHeaders(1n, `order:${orderId}`))
    expect(early.status).toBe(200)
    const refusedEarly = await post('/strict', {}, fencingHeaders(0n, `order:${orderId}`))
    expect(refusedEarly.status).toBe(409)
  })

  /** Sends a request with raw header lines (fetch cannot send a header twice). */
  function rawPost(path: string, headerLines: string[], body: unknown): Promise<{ status: number; body: string }> {
    const { port } = server.address() as AddressInfo
    const payload = JSON.stringify(body)
    return new Promise((resolve, reject) => {
      const socket = connect(port, '127.0.0.1', () => {
        // latin1: a header line's character U+00A0 goes as the one byte 0xA0, as Node reads it back.
        socket.end(
          Buffer.from(
            [`POST ${path} HTTP/1.1`, 'Host: 127.0.0.1', 'Content-Type: application/json', `Content-Length: ${Buffer.byteLength(payload)}`, 'Connection: close', ...headerLines, '', payload].join('\r\n'),
            'latin1',
          ),
        )
      })
      let response = ''
      socket.on('data', (chunk) => (response += chunk.toString()))
      socket.on('end', () => resolve({ status: Number(/^HTTP\/1\.1 (\d+)/.exec(response)?.[1]), body: response.slice(response.indexOf('\r\n\r\n') + 4) }))
      socket.on('error', reject)
    })
  }

  it('a Fencing-Resource sent twice, the second one empty, gets 400 and charges nothing (issue 24 case 7)', async () => {
    const orderId = nextOrder()
    const sent = await rawPost('/charges', ['Fencing-Token: 5', `Fencing-Resource: order:${orderId}`, 'Fencing-Resource: '], { orderId })
    expect(sent.status).toBe(400)
    expect(JSON.parse(sent.body)).toMatchObject({ error: { code: 'invalid_fencing_header', header: 'Fencing-Resource' } })
    expect(await ledger(orderId)).toBe(0)
    // The unprotected variant: Node's req.headers joins the two as "order:N, ", which the old rule
    // (visible ASCII after trimming) read as the resource "order:N,".
    const joined = `order:${orderId}, `
    expect(/^[\x21-\x7e]+$/.test(joined.trim())).toBe(true)
  })

  it('a header value with a no-break space (U+00A0) after the token or the resource gets 400 and charges nothing (issue 32 item 9)', async () => {
    const orderId = nextOrder()
    for (const lines of [
      ['Fencing-Token: 5', `Fencing-Resource: order:${orderId}\xA0`],
      ['Fencing-Token: 5\xA0', `Fencing-Resource: order:${orderId}`],
    ]) {
      const sent = await rawPost('/charges', lines, { orderId })
      expect(sent.status, JSON.stringify(sent)).toBe(400)
      expect(JSON.parse(sent.body)).toMatchObject({ error: { code: 'invalid_fencing_header' } })
    }
    expect(await ledger(orderId)).toBe(0)
    // The unprotected variant: the old rule trimmed first, and trim() strips U+00A0: 'order:N\xA0' read as 'order:N'.
    expect(`order:${orderId}\xA0`.trim()).toBe(`order:${orderId}`)
  })

  it('a resource with a space and non-ASCII letters travels encoded and is recorded as the lock names it', async () => {
    const orderId = nextOrder()
    const resource = `ordér ${orderId}`
    expect((await post('/charges', { orderId }, fencingHeaders(4n, resource))).status).toBe(201)
    expect(await t.base.gatewayFence.findUniqueOrThrow({ where: { resource } })).toEqual({ resource, fenceToken: 4n })
    expect((await post('/charges', { orderId }, fencingHeaders(3n, resource))).status).toBe(409)
    expect(await ledger(orderId)).toBe(1)
  })

  it('recordBeforeHandler (the default) checks the token but does not fence the handler’s writes: 500, paused after the check, writes after 501', async () => {
    const orderId = nextOrder()
    const resource = `order:${orderId}`
    pauses.set(500n, gate())
    const older = post('/paused-check', { orderId }, fencingHeaders(500n, resource))
    await waitFor(async () => (await t.base.gatewayFence.findUnique({ where: { resource } }))?.fenceToken === 500n)
    expect((await post('/paused-check', { orderId }, fencingHeaders(501n, resource))).status).toBe(201)
    pauses.get(500n)?.open()
    expect((await older).status).toBe(201)
    // Both charged, committed in the order 501, 500.
    expect((await t.base.gatewayCharge.findMany({ where: { orderId }, orderBy: { id: 'asc' } })).map((c) => c.fencingToken)).toEqual([501n, 500n])
    pauses.delete(500n)
  })

  it('the fenced-write pattern (the writes in fencing.transaction): the paused 500 is refused with 409 once 501 went through', async () => {
    const orderId = nextOrder()
    const resource = `order:${orderId}`
    pauses.set(600n, gate())
    const older = post('/paused-fenced', { orderId }, fencingHeaders(600n, resource))
    // Held in its handler, before its transaction.
    await new Promise((resolve) => setImmediate(resolve))
    expect((await post('/paused-fenced', { orderId }, fencingHeaders(601n, resource))).status).toBe(201)
    pauses.get(600n)?.open()
    expect((await older).status).toBe(409)
    expect((await t.base.gatewayCharge.findMany({ where: { orderId } })).map((c) => c.fencingToken)).toEqual([601n])
    pauses.delete(600n)
  })

  it('under contention a fenced transaction that cannot start in time is 503 with Retry-After, not 500 (issue 24 case 8)', async () => {
    // One connection, held by a request for the resource: the next one cannot start its transaction within maxWaitMs.
    const small = new PrismaClient({ adapter: new PrismaPg({ connectionString: databaseTarget().connectionString, max: 1 }, { schema: t.schema }) })
    const db = serviceClient(small)
    const app = express()
    app.post('/busy', fencingMiddleware({ db, model: 'GatewayFence', maxWaitMs: 50 }), (_req, res) => void res.status(201).json({}))
    app.use(fencingErrorHandler())
    const busy = app.listen(0, '127.0.0.1')
    await new Promise((resolve) => busy.once('listening', resolve))
    const held = gate()
    const resource = `order:${nextOrder()}`
    let holding = false
    const holder = withFencedResource(db, { token: 1n, resource }, { model: 'GatewayFence' }, () => {
      holding = true
      return held.promise
    })
    try {
      await waitFor(async () => holding)
      const res = await fetch(`http://127.0.0.1:${(busy.address() as AddressInfo).port}/busy`, { method: 'POST', headers: fencingHeaders(2n, resource) })
      expect(res.status).toBe(503)
      expect(res.headers.get('retry-after')).toBe('1')
      expect(await res.json()).toMatchObject({ error: { code: 'fencing_busy', resource } })
    } finally {
      held.open()
      await holder
      await new Promise((resolve) => busy.close(resolve))
      await small.$disconnect()
    }
  })
})

/** Polls `check` until it holds (a state another request reaches), at most 10 s. */
async function waitFor(check: () => Promise<boolean>): Promise<void> {
  const deadline = performance.now() + 10_000
  while (!(await check())) {
    if (performance.now() > deadline) throw new Error('condition not reached within 10 s')
    await new Promise((resolve) => setTimeout(resolve, 5))
  }
}
