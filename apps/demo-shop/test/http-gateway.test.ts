// The shop's gateway client (node:http, keep-alive): calls reuse one connection; a gateway that
// does not answer is a 504 gateway_timeout, one that cannot be reached a 502 gateway_unreachable
// (the charge's outcome unknown either way: only a repeat with its key may find out).
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { afterAll, describe, expect, it } from 'vitest'
import { GatewayError, httpGateway } from '../src/payment-gateway.js'

const servers: Server[] = []
afterAll(async () => {
  for (const server of servers) {
    server.closeAllConnections()
    await new Promise((resolve) => server.close(resolve))
  }
})

async function serve(handler: Parameters<typeof createServer>[1]): Promise<{ url: string; connections: () => number }> {
  let connections = 0
  const server = createServer(handler)
  server.on('connection', () => connections++)
  servers.push(server)
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, connections: () => connections }
}

describe('httpGateway', () => {
  it('sends the key and the fencing headers, reads a replayed answer, and reuses its connection', async () => {
    const seen: Array<Record<string, unknown>> = []
    const gateway = await serve((req, res) => {
      seen.push({ key: req.headers['idempotency-key'], token: req.headers['fencing-token'] })
      res.setHeader('content-type', 'application/json')
      if (req.url?.startsWith('/v1/charges')) res.setHeader('Idempotent-Replayed', seen.length > 2 ? 'true' : 'false')
      req.resume()
      req.on('end', () => res.end(JSON.stringify({ id: `ch_${seen.length}` })))
    })
    const client = httpGateway({ url: gateway.url })
    expect(await client.authorize({ buyerId: 'b', amountCents: 1 })).toEqual({ authorizationId: 'ch_1' })
    expect(await client.charge({ orderId: 1, amountCents: 1 }, { idempotencyKey: 'ord_1', fencing: { token: 7n, resource: 'order:1' } })).toEqual({ chargeId: 'ch_2', replayed: false })
    expect(await client.charge({ orderId: 1, amountCents: 1 }, { idempotencyKey: 'ord_1' })).toEqual({ chargeId: 'ch_3', replayed: true })
    expect(seen[1]).toEqual({ key: 'ord_1', token: '7' })
    expect(gateway.connections(), 'one keep-alive connection for three sequential calls').toBe(1)
  })

  it('a gateway that never answers: 504 gateway_timeout; nothing listening: 502 gateway_unreachable; an error answer keeps its code', async () => {
    const silent = await serve(() => {})
    const error = await httpGateway({ url: silent.url, timeoutMs: 100 }).authorize({ buyerId: 'b', amountCents: 1 }).catch((e: unknown) => e)
    expect(error).toBeInstanceOf(GatewayError)
    expect(error).toMatchObject({ status: 504, code: 'gateway_timeout' })
    const closed = await serve(() => {})
    const url = closed.url
    const server = servers.pop() as Server
    await new Promise((resolve) => server.close(resolve))
    await expect(httpGateway({ url }).authorize({ buyerId: 'b', amountCents: 1 })).rejects.toMatchObject({ status: 502, code: 'gateway_unreachable' })
    const refusing = await serve((_req, res) => {
      res.statusCode = 409
      res.end(JSON.stringify({ error: { code: 'stale_fencing_token', message: 'older' } }))
    })
    const refused = await httpGateway({ url: refusing.url }).charge({ orderId: 1, amountCents: 1 }).catch((e: unknown) => e)
    expect(refused).toMatchObject({ status: 409, code: 'stale_fencing_token', isStaleToken: true })
  })
})
