// The dashboard's HTTP API: starting a run is validated and one at a time, the stream speaks
// server-sent events, the built dashboard is served, a request naming a Host the server is not
// (a DNS-rebinding page) is refused on every route; and the sampler on a real shop instance
// (real Redis and PostgreSQL) turns its /metrics and /api/state into a snapshot.
import { mkdtempSync, writeFileSync } from 'node:fs'
import { request, type IncomingHttpHeaders, type Server } from 'node:http'
import { connect, type AddressInfo } from 'node:net'
import { networkInterfaces, tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createDashboardApp, listenDashboard, MAX_RUN_BODY_BYTES, type DashboardServer } from '../../src/dashboard/dashboard-app.js'
import { DashboardSampler } from '../../src/dashboard/dashboard-sampler.js'
import { FlashSaleRuns, type FlashSaleRunner } from '../../src/dashboard/flash-sale-runs.js'
import type { DashboardSnapshot, RunView } from '../../src/dashboard/wire.js'
import { dropShopSchema, prepareShopSchema } from '../../src/database.js'
import type { FlashSaleReport } from '../../src/flash-sale.js'
import { buildInstance, type Instance } from '../../src/instance.js'
import { readInstanceConfig } from '../../src/instance-config.js'
import { REDIS_URL, testDatabase, uniqueRun } from '../services.js'
import { startTestGateway, type TestGateway } from '../gateway-server.js'

/** A runner that stands in for runFlashSale: each run waits until the test settles it. */
function controllableRunner() {
  const pending: Array<{ options: Parameters<FlashSaleRunner>[0]; resolve: (r: FlashSaleReport) => void; reject: (e: Error) => void; services: Parameters<FlashSaleRunner>[2] }> = []
  const runner: FlashSaleRunner = (options, onProgress, services) =>
    new Promise((resolve, reject) => {
      onProgress({ phase: 'selling', done: 5, buyers: options.buyers, chaosCount: 1, instances: [] })
      pending.push({ options, resolve, reject, services })
    })
  const report = (options: Parameters<FlashSaleRunner>[0], over: Partial<FlashSaleReport>) =>
    ({
      options,
      durationMs: 1234,
      initialStock: options.stock,
      remainingStock: 0,
      sold: options.stock,
      oversoldUnits: 0,
      paidOrders: options.stock,
      payments: options.stock,
      doublePaidOrders: 0,
      gatewayCharges: options.stock,
      doubleChargedOrders: 0,
      extraCharges: 0,
      lostUpdates: 0,
      staleWritesRejected: 0,
      expiredLocks: 0,
      acquireP99Ms: 12,
      chaosEvents: 2,
      incident: { incident: null, reason: 'no pause landed on a lock holder' },
      chargedTwice: { orders: [], total: 0 },
      ...over,
    }) as FlashSaleReport
  return { runner, pending, report }
}

const redis = { url: REDIS_URL, origin: 'test', owned: undefined, stop: async () => {} }
const database = { connectionString: 'postgresql://unused', origin: 'test' }

describe('dashboard API', () => {
  const { runner, pending, report } = controllableRunner()
  const runs = new FlashSaleRuns({ runner, redis, database, limits: { redisRestart: false } })
  const sampler = new DashboardSampler({ runs })
  const dist = mkdtempSync(join(tmpdir(), 'dashboard-dist-'))
  writeFileSync(join(dist, 'index.html'), '<!doctype html><title>FenceLock</title>')
  let server: DashboardServer
  let base: string

  beforeAll(async () => {
    server = await listenDashboard(createDashboardApp({ sampler, runs, staticDir: dist }), { host: '127.0.0.1', port: 0 })
    base = server.url
  })
  afterAll(async () => {
    for (const p of pending) p.reject(new Error('test over'))
    await runs.close()
    await server.close()
  })

  const postRun = (body: string, headers: Record<string, string> = { 'content-type': 'application/json' }) =>
    fetch(`${base}api/runs`, { method: 'POST', headers, body })

  it('refuses what is not a valid run, naming why, before anything starts', async () => {
    const cases: Array<[unknown, number, string]> = [
      [{ mode: 'yolo', chaos: 'none' }, 400, 'invalid_run_request'],
      [{ mode: 'fenced', chaos: 'kill -9' }, 400, 'invalid_run_request'],
      [{ mode: 'fenced' }, 400, 'invalid_run_request'],
      [{ mode: 'fenced', chaos: 'none', buyers: 1e9 }, 400, 'invalid_run_request'],
      [{ mode: 'fenced', chaos: 'none', buyers: 2.5 }, 400, 'invalid_run_request'],
      [{ mode: 'fenced', chaos: 'none', stock: '10' }, 400, 'invalid_run_request'],
      [{ mode: 'fenced', chaos: 'none', instances: 32 }, 400, 'invalid_run_request'],
      [{ mode: 'fenced', chaos: 'none', segments: 3 }, 400, 'invalid_run_request'],
      [{ mode: 'fenced', chaos: 'none', segments: '2' }, 400, 'invalid_run_request'],
      [{ mode: 'fenced', chaos: 'none', resource: 'product:drop-1' }, 400, 'invalid_run_request'],
      [['fenced', 'none'], 400, 'invalid_run_request'],
      [{ mode: 'fenced', chaos: 'redis-restart' }, 422, 'chaos_unavailable'],
    ]
    for (const [body, status, error] of cases) {
      const res = await postRun(JSON.stringify(body))
      expect(res.status, JSON.stringify(body)).toBe(status)
      expect(((await res.json()) as { error: string }).error).toBe(error)
    }
    expect((await postRun('{"mode": ')).status).toBe(400)
    expect((await postRun(JSON.stringify({ mode: 'fenced', chaos: 'none', pad: 'x'.repeat(MAX_RUN_BODY_BYTES) }))).status).toBe(413)
    expect((await postRun('mode=fenced&chaos=none', { 'content-type': 'application/x-www-form-urlencoded' })).status).toBe(415)
    expect((await postRun('{"mode":"fenced","chaos":"none"}', { 'content-type': 'application/json', origin: 'http://evil.example' })).status).toBe(403)
    expect((await postRun('{"mode":"fenced","chaos":"none"}', { 'content-type': 'application/json', 'sec-fetch-site': 'cross-site' })).status).toBe(403)
    expect(pending).toHaveLength(0)
    expect(runs.runs).toHaveLength(0)
  })

  it('starts one run at a time (409 meanwhile), and keeps the finished ones for comparison', async () => {
    const first = await postRun(JSON.stringify({ mode: 'fenced', chaos: 'pause', buyers: 50, stock: 5, segments: 4 }), { 'content-type': 'application/json', origin: base.slice(0, -1) })
    expect(first.status).toBe(202)
    const started = (await first.json()) as RunView
    expect([started.id, started.mode, started.chaos, started.buyers, started.stock, started.segments, started.status]).toEqual([1, 'fenced', 'pause', 50, 5, 4, 'running'])
    // The segments setting reaches the sale (`--segments N`); a sale from the page runs on 4 instances.
    expect(pending[0]?.options).toMatchObject({ mode: 'fenced', chaos: 'pause', buyers: 50, stock: 5, segments: 4, instances: 4 })
    // The demo's Redis is shared by every chaos but redis-restart.
    expect(pending[0]?.services.redis).toBe(redis)

    const second = await postRun(JSON.stringify({ mode: 'unsafe', chaos: 'none' }))
    expect(second.status).toBe(409)
    expect(((await second.json()) as { error: string }).error).toBe('run_in_progress')

    const during = (await (await fetch(`${base}api/runs`)).json()) as { active: RunView; runs: RunView[] }
    expect([during.active.id, during.active.phase, during.active.buyersDone, during.active.chaosEvents]).toEqual([1, 'selling', 5, 1])

    pending[0]?.resolve(report(pending[0].options, { sold: 5, staleWritesRejected: 3 }))
    await runs.settled()
    const third = await postRun(JSON.stringify({ mode: 'unsafe', chaos: 'none' }))
    expect(third.status).toBe(202)
    // A lock-only run's signature: one order charged twice at the gateway, the shop recording one payment of it.
    pending[1]?.resolve(report(pending[1].options, { sold: 40, oversoldUnits: 35, doubleChargedOrders: 1, extraCharges: 1, gatewayCharges: 31, payments: 30, paidOrders: 30 }))
    await runs.settled()

    const after = (await (await fetch(`${base}api/runs`)).json()) as { active: RunView | null; runs: RunView[] }
    expect(after.active).toBeNull()
    expect(after.runs.map((r) => [r.id, r.mode, r.status, r.result?.sold, r.result?.oversold, r.result?.staleWritesRejected])).toEqual([
      [2, 'unsafe', 'done', 40, 35, 0],
      [1, 'fenced', 'done', 5, 0, 3],
    ])
    // A finished run's incident and charged-twice drill-down, kept with it; an unlisted run is a 404.
    expect(await (await fetch(`${base}api/runs/1/incident`)).json()).toEqual({ incident: null, reason: 'no pause landed on a lock holder' })
    expect(await (await fetch(`${base}api/runs/2/charged-twice`)).json()).toEqual({ runId: 2, orders: [], total: 0 })
    for (const path of ['api/runs/99/incident', 'api/runs/x/charged-twice', 'api/runs/0/incident']) expect((await fetch(`${base}${path}`)).status).toBe(404)
    // The double-charge figure is the report's, from the gateway's ledger; charges and payments travel apart.
    expect(after.runs.map((r) => [r.result?.doubleChargedOrders, r.result?.extraCharges, r.result?.gatewayCharges, r.result?.payments, r.result?.paidOrders])).toEqual([
      [1, 1, 31, 30, 30],
      [0, 0, 5, 5, 5],
    ])
  })

  it('records a failed run with its reason, and takes the next', async () => {
    expect((await postRun(JSON.stringify({ mode: 'lock', chaos: 'none' }))).status).toBe(202)
    pending[2]?.reject(new Error('instances not ready within 60000 ms'))
    await runs.settled()
    const failed = runs.runs[0] as RunView
    expect([failed.status, failed.error]).toEqual(['failed', 'instances not ready within 60000 ms'])
  })

  it('streams server-sent events: the history, then snapshots', async () => {
    await sampler.sample()
    const controller = new AbortController()
    const res = await fetch(`${base}api/dashboard/stream`, { signal: controller.signal })
    expect(res.headers.get('content-type')).toMatch(/^text\/event-stream/)
    const reader = (res.body as ReadableStream<Uint8Array>).getReader()
    let text = ''
    while (!/event: snapshot\ndata: .*\n\n/.test(text)) text += new TextDecoder().decode((await reader.read()).value)
    controller.abort()
    expect(text).toMatch(/^retry: 2000\n\nevent: history\ndata: \{"points":\[/)
    const snapshot = JSON.parse(/event: snapshot\ndata: (.*)\n\n/.exec(text)?.[1] ?? '') as DashboardSnapshot
    expect(snapshot.runs.map((r) => r.id)).toEqual([3, 2, 1])
    // The last finished run's final counts stand next to the live shop's.
    expect(snapshot.invariants.map((i) => [i.source, i.kind, i.oversold, i.doubleChargedOrders, i.gatewayCharges, i.payments])).toEqual([['run-2', 'final', 35, 1, 31, 30]])
  })

  it('serves the built dashboard with headers that keep it from being framed, and JSON 404s under /api', async () => {
    const page = await fetch(base)
    expect(page.status).toBe(200)
    expect(await page.text()).toContain('<title>FenceLock</title>')
    expect(page.headers.get('content-security-policy')).toContain("frame-ancestors 'none'")
    const missing = await fetch(`${base}api/locks/release`, { method: 'POST' })
    expect(missing.status).toBe(404)
    expect(((await missing.json()) as { error: string }).error).toBe('not_found')
  })
})

/** What {@link raw} got back: the status, the headers and the start of the body. */
interface RawAnswer {
  readonly status: number
  readonly headers: IncomingHttpHeaders
  readonly body: string
}

/**
 * One HTTP request with the headers given as they are — `Host` included, which fetch will not
 * set — to `address:port`, as a browser whose page name resolved there would send it. A stream is
 * read until its first event, then closed.
 */
function raw(target: { address: string; port: number }, options: { method?: string; path: string; headers: Record<string, string>; body?: string; noHost?: boolean }): Promise<RawAnswer> {
  return new Promise((resolve, reject) => {
    const req = request({ host: target.address, port: target.port, method: options.method ?? 'GET', path: options.path, headers: options.headers, setHost: !options.noHost }, (res) => {
      let body = ''
      res.setEncoding('utf8')
      res.on('data', (chunk: string) => {
        body += chunk
        if (String(res.headers['content-type']).startsWith('text/event-stream') && body.includes('event: snapshot')) res.destroy()
      })
      const done = () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body })
      res.on('end', done)
      res.on('close', done)
    })
    req.on('error', reject)
    req.end(options.body)
  })
}

/** This machine's first address that is not loopback (eth0 here and in CI). */
function outsideAddress(): string {
  const found = Object.values(networkInterfaces())
    .flat()
    .find((i) => i !== undefined && !i.internal && i.family === 'IPv4')
  if (found === undefined) throw new Error('this test needs a network interface other than loopback, to bind the dashboard elsewhere')
  return found.address
}

describe('dashboard API: only the hosts the server is bound to (DNS rebinding)', () => {
  const { runner, pending, report } = controllableRunner()
  const runs = new FlashSaleRuns({ runner, redis, database, limits: { redisRestart: false } })
  const sampler = new DashboardSampler({ runs })
  const dist = mkdtempSync(join(tmpdir(), 'dashboard-dist-'))
  writeFileSync(join(dist, 'index.html'), '<!doctype html><title>FenceLock</title>')
  const servers: DashboardServer[] = []
  const listen = async (host: string) => {
    const server = await listenDashboard(createDashboardApp({ sampler, runs, staticDir: dist }), { host, port: 0 })
    servers.push(server)
    return (server.server.address() as AddressInfo).port
  }
  beforeAll(() => sampler.sample())
  afterAll(async () => {
    for (const p of pending) p.reject(new Error('test over'))
    await runs.close()
    for (const server of servers) await server.close()
  })

  const RUN = JSON.stringify({ mode: 'fenced', chaos: 'none' })
  /** The page, the API, the stream and a run's start, each with `host` and its own Origin where a browser sends one. */
  const everyRoute = (target: { address: string; port: number }, host: string) => {
    const origin = `http://${host}`
    return Promise.all([
      raw(target, { path: '/', headers: { host } }),
      raw(target, { path: '/api/dashboard', headers: { host } }),
      raw(target, { path: '/api/runs', headers: { host } }),
      raw(target, { path: '/api/dashboard/stream', headers: { host } }),
      raw(target, { method: 'POST', path: '/api/runs', headers: { host, origin, 'content-type': 'application/json' }, body: RUN }),
    ])
  }

  it('refuses a page of another name resolved to loopback — with its own Origin, so the origin check alone let it in — on GET, POST and the stream', async () => {
    const port = await listen('127.0.0.1')
    const target = { address: '127.0.0.1', port }
    for (const host of [`evil.example:${port}`, 'evil.example', `localhost.evil.example:${port}`, `127.0.0.1.nip.io:${port}`, `localhost:${port + 1}`, `127.0.0.1:${port + 1}`, `localhost.:${port}`, `user@localhost:${port}`]) {
      const answers = await everyRoute(target, host)
      expect(answers.map((a) => a.status), host).toEqual([403, 403, 403, 403, 403])
      for (const a of answers) expect(JSON.parse(a.body), host).toMatchObject({ error: 'host_not_allowed' })
      // Nothing streamed, nothing about the shop sent; the refusal says where the page is.
      expect(answers[3]?.headers['content-type']).toMatch(/^application\/json/)
      expect(JSON.parse(answers[0]?.body ?? '{}').message).toContain(`http://127.0.0.1:${port}/ or http://localhost:${port}/`)
    }
    // No Host at all: HTTP/1.1 without one is Node's 400; HTTP/1.0 (where it is optional) is our 403.
    expect((await raw(target, { path: '/api/dashboard', headers: {}, noHost: true })).status).toBe(400)
    const http10 = await new Promise<string>((resolve, reject) => {
      const socket = connect(port, '127.0.0.1', () => socket.end('GET /api/dashboard HTTP/1.0\r\n\r\n'))
      let text = ''
      socket.on('data', (d: Buffer) => (text += d.toString()))
      socket.on('end', () => resolve(text))
      socket.on('error', reject)
    })
    expect(http10).toMatch(/^HTTP\/1\.1 403 /)
    expect(http10).toContain('host_not_allowed')
    expect(pending).toHaveLength(0)
  })

  it('serves the names and addresses of loopback on the port it listens on: the page, the API, the stream, and a run started', async () => {
    const port = await listen('127.0.0.1')
    const target = { address: '127.0.0.1', port }
    for (const host of [`127.0.0.1:${port}`, `localhost:${port}`, `LocalHost:${port}`, `[::1]:${port}`, `127.0.0.2:${port}`]) {
      const [page, api, list, stream, post] = await everyRoute(target, host)
      expect([page?.status, api?.status, list?.status, stream?.status], host).toEqual([200, 200, 200, 200])
      expect(stream?.headers['content-type'], host).toMatch(/^text\/event-stream/)
      expect(stream?.body, host).toMatch(/event: snapshot\ndata: \{/)
      // The first start goes through (202); the next are 409: past the host and origin checks, a run is going on.
      expect([202, 409], host).toContain(post?.status)
    }
    expect(pending).toHaveLength(1)
    pending[0]?.resolve(report(pending[0].options, {}))
    await runs.settled()
    // The Origin still has to be the Host's.
    const crossOrigin = await raw(target, { method: 'POST', path: '/api/runs', headers: { host: `localhost:${port}`, origin: `http://127.0.0.1:${port}`, 'content-type': 'application/json' }, body: RUN })
    expect(crossOrigin.status).toBe(403)
    expect(JSON.parse(crossOrigin.body)).toMatchObject({ error: 'cross_origin' })
  })

  it('bound to another address, serves that address too; bound to every address, the one a connection arrives on', async () => {
    const address = outsideAddress()
    const port = await listen(address)
    const served = await everyRoute({ address, port }, `${address}:${port}`)
    expect(served.slice(0, 4).map((a) => a.status)).toEqual([200, 200, 200, 200])
    expect(served[4]?.status).toBe(202)
    pending.at(-1)?.resolve(report((pending.at(-1) as (typeof pending)[number]).options, {}))
    await runs.settled()
    const refused = await everyRoute({ address, port }, `evil.example:${port}`)
    expect(refused.map((a) => a.status)).toEqual([403, 403, 403, 403, 403])
    expect(JSON.parse(refused[0]?.body ?? '{}').message).toContain(`or http://${address}:${port}/`)

    const any = await listen('0.0.0.0')
    for (const [via, host, status] of [
      [address, `${address}:${any}`, 200],
      ['127.0.0.1', `localhost:${any}`, 200],
      ['127.0.0.1', `evil.example:${any}`, 403],
      [address, `evil.example:${any}`, 403],
      // An address of this machine, but not the one this connection came in on.
      ['127.0.0.1', `${address}:${any}`, 403],
    ] as const) {
      expect((await raw({ address: via, port: any }, { path: '/api/dashboard', headers: { host } })).status, `${host} via ${via}`).toBe(status)
    }
  })
})

/**
 * The sampler's deadline per request to an instance in these tests. Its default (800 ms, below the
 * 1 s interval) is about a frozen instance, not tested here; the instance's /api/state (a dozen
 * queries) took longer at load 27, and the sample went without the shop's counts.
 */
const SAMPLE_DEADLINE_MS = 15_000

describe('sampler on a real shop instance', () => {
  const { runId, schema } = uniqueRun('dash')
  const location = testDatabase(schema)
  let instance: Instance
  let gateway: TestGateway
  let server: Server
  let url: string

  beforeAll(async () => {
    await prepareShopSchema(location, [{ sku: 'drop-1', name: 'Drop', priceCents: 100, stock: 3 }])
    gateway = await startTestGateway(location)
    instance = await buildInstance(
      readInstanceConfig({
        REDIS_URL,
        DATABASE_URL: `${location.connectionString}${location.connectionString.includes('?') ? '&' : '?'}schema=${schema}`,
        SHOP_INSTANCE_ID: 'shop-1',
        SHOP_MODE: 'fenced',
        SHOP_RUN_ID: runId,
        SHOP_GATEWAY_URL: gateway.url,
        SHOP_DB_POOL_SIZE: '2',
      }),
    )
    server = instance.app.listen(0, '127.0.0.1')
    await new Promise<void>((r) => server.once('listening', () => r()))
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  })
  afterAll(async () => {
    server?.closeAllConnections()
    await new Promise((r) => server?.close(r))
    await instance?.close()
    await gateway?.close()
    await dropShopSchema(location)
  })

  it('sums the instance’s lock metrics, reads the invariants from its database and the double charges from the gateway’s ledger', async () => {
    const runs = new FlashSaleRuns({ runner: controllableRunner().runner, redis, database })
    const live = { mode: 'fenced' as const, instances: () => [{ id: 'shop-1', pid: process.pid, port: 0, url }] }
    const sampler = new DashboardSampler({ runs, live, requestTimeoutMs: SAMPLE_DEADLINE_MS })
    await sampler.sample()
    const orders: number[] = []
    for (const buyer of ['b1', 'b2']) {
      const res = await fetch(`${url}/api/products/drop-1/purchase`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ buyerId: buyer }) })
      expect(res.status).toBe(201)
      orders.push(((await res.json()) as { orderId: number }).orderId)
    }
    const paid = await fetch(`${url}/api/orders/${orders[0]}/pay`, { method: 'POST' })
    expect(paid.status).toBe(200)
    // The order charged again at the gateway, as a holder frozen past its TTL would (no key, no
    // token): the ledger has two charges of it, the shop one payment.
    const again = await fetch(`${gateway.url}/v1/charges`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ orderId: orders[0], amountCents: 100 }) })
    expect(again.status).toBe(201)
    await sampler.sample()
    const { point, invariants, locks } = sampler.snapshot
    expect([point.instancesUp, point.instancesWatched]).toEqual([1, 1])
    expect(point.acquireRate).toBeGreaterThan(0)
    expect(point.successRatio).toBe(1)
    expect(point.waitP50Ms).not.toBeNull()
    expect(invariants).toEqual([
      expect.objectContaining({ source: 'live', kind: 'live', mode: 'fenced', initialStock: 3, stock: 1, sold: 2, oversold: 0, lostUpdates: 0 }),
    ])
    // Double charges from the gateway's ledger, where the money moved; the shop's payments apart.
    expect(invariants[0]).toMatchObject({ doubleChargedOrders: 1, extraCharges: 1, gatewayCharges: 2, payments: 1, paidOrders: 1 })
    expect(locks).toEqual([])
    expect(sampler.history().points).toHaveLength(2)
  })

  it('keeps the lock metrics of a sale going on apart from the live shop’s', async () => {
    // A sale whose only instance is the one above, and no live shop: its acquires are the sale's alone.
    const runner: FlashSaleRunner = (options, onProgress, _services, signal) =>
      new Promise((_resolve, reject) => {
        onProgress({ phase: 'selling', done: 0, buyers: options.buyers, chaosCount: 0, instances: [{ id: 'shop-1', pid: process.pid, port: 0, url }] })
        signal.addEventListener('abort', () => reject(new Error('stopped')))
      })
    const runs = new FlashSaleRuns({ runner, redis, database })
    const sampler = new DashboardSampler({ runs, requestTimeoutMs: SAMPLE_DEADLINE_MS })
    const run = runs.start({ mode: 'fenced', chaos: 'none', buyers: 10, stock: 1, segments: 1 })
    try {
      await sampler.sample()
      const res = await fetch(`${url}/api/products/drop-1/purchase`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ buyerId: 'b3' }) })
      expect(res.status).toBeLessThan(500)
      await sampler.sample()
      const { point } = sampler.snapshot
      expect([point.acquireRate, point.instancesWatched]).toEqual([0, 0])
      expect(point.sale).toMatchObject({ runId: run.id, instancesUp: 1, instancesWatched: 1 })
      expect(point.sale?.acquireRate).toBeGreaterThan(0)
    } finally {
      await runs.close()
    }
  })
})

describe('dashboard API: compare the three modes', () => {
  const { runner, pending, report } = controllableRunner()
  const runs = new FlashSaleRuns({ runner, redis, database, limits: { redisRestart: true } })
  const sampler = new DashboardSampler({ runs })
  let server: DashboardServer
  let base: string
  beforeAll(async () => {
    server = await listenDashboard(createDashboardApp({ sampler, runs, staticDir: undefined }), { host: '127.0.0.1', port: 0 })
    base = server.url
  })
  afterAll(async () => {
    for (const p of pending) p.reject(new Error('test over'))
    await runs.close()
    await server.close()
  })
  const post = (path: string, body: unknown) => fetch(`${base}api/${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) })
  /** Settles the run going on and waits for the next one of the comparison (or none) to be under way. */
  const finish = async (over: Partial<FlashSaleReport> = {}) => {
    const p = pending.at(-1)
    if (p === undefined) throw new Error('no run pending')
    const count = pending.length
    p.resolve(report(p.options, over))
    await expect.poll(() => pending.length > count || runs.active === undefined).toBe(true)
  }

  it('refuses a comparison that names a mode or an unknown chaos, before anything starts', async () => {
    for (const body of [{ chaos: 'pause', mode: 'fenced' }, {}, { chaos: 'explode' }, { chaos: 'pause', buyers: 5 }]) {
      const res = await post('comparisons', body)
      expect(res.status, JSON.stringify(body)).toBe(400)
      expect(((await res.json()) as { error: string }).error).toBe('invalid_run_request')
    }
    expect(pending).toHaveLength(0)
  })

  it('runs the same sale (one seed, one chaos, one size) with no lock, the lock alone and lock + fencing, one after the other', async () => {
    const res = await post('comparisons', { chaos: 'pause', buyers: 60, stock: 10 })
    expect(res.status).toBe(202)
    expect(((await res.json()) as RunView).mode).toBe('unsafe')
    // One sale at a time, the comparison included.
    expect((await post('runs', { mode: 'fenced', chaos: 'none' })).status).toBe(409)
    await finish({ oversoldUnits: 5, doubleChargedOrders: 2, extraCharges: 3 })
    await finish({ oversoldUnits: 1 })
    await finish({ staleWritesRejected: 4 })
    expect(runs.active).toBeUndefined()
    expect(pending.map((p) => [p.options.mode, p.options.chaos, p.options.seed, p.options.buyers, p.options.stock])).toEqual([
      ['unsafe', 'pause', 1001, 60, 10],
      ['lock', 'pause', 1001, 60, 10],
      ['fenced', 'pause', 1001, 60, 10],
    ])
    expect(runs.comparison.map((r) => [r.id, r.mode, r.comparison, r.seed, r.status, r.result?.oversold, r.result?.overchargedCents])).toEqual([
      [1, 'unsafe', 1, 1001, 'done', 5, 3 * 4_999],
      [2, 'lock', 1, 1001, 'done', 1, 0],
      [3, 'fenced', 1, 1001, 'done', 0, 0],
    ])
    await sampler.sample()
    const snapshot = JSON.parse(sampler.snapshotJson) as DashboardSnapshot
    expect(snapshot.comparison.map((r) => r.id)).toEqual([1, 2, 3])
    // The last run's card carries the chaos that landed.
    expect(snapshot.invariants.map((i) => [i.source, i.title, i.chaos, i.chaosEvents, i.staleWritesRejected])).toEqual([['run-3', 'Flash sale #3', 'pause', 2, 4]])
  })

  it('keeps the last comparison as the baseline when later runs push it out of the history; a Redis restart gets the slow gateway', async () => {
    for (let i = 0; i < 10; i++) {
      expect((await post('runs', { mode: 'fenced', chaos: i === 0 ? 'redis-restart' : 'none', buyers: 10, stock: 1 })).status).toBe(202)
      await finish()
    }
    expect(pending[3]?.options.gatewayLatencyMs).toBe('300-600')
    expect(pending[4]?.options.gatewayLatencyMs).toBe('30-80')
    expect(runs.runs.map((r) => r.id)).toEqual([13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 1, 2, 3])
    expect(runs.comparison.map((r) => [r.id, r.status])).toEqual([
      [1, 'done'],
      [2, 'done'],
      [3, 'done'],
    ])
    // A comparison with no size given is one that bites.
    expect((await post('comparisons', { chaos: 'none' })).status).toBe(202)
    expect(pending.at(-1)?.options).toMatchObject({ mode: 'unsafe', buyers: 1_000, stock: 100, seed: 1002 })
  })
})
