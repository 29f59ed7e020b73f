// Issue 26 case 4: the gateway's shutdown waits for its running handlers, not for its sockets.
// The caller goes away mid-call (as when it is killed -9): its charge still lands in the ledger
// before the pool closes. Control: closing on the server's own callback (sockets) drops it.
import type { AddressInfo } from 'node:net'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { createPrisma, dropShopSchema, prepareShopSchema } from '../../src/database.js'
import { createGatewayApp, gatewayDb } from '../../src/gateway/gateway-app.js'
import { InFlight } from '../../src/in-flight.js'
import { testDatabase, uniqueRun } from '../services.js'

const { schema } = uniqueRun('gw-drain')
const database = testDatabase(schema)
let counter: ReturnType<typeof createPrisma>

beforeAll(async () => {
  await prepareShopSchema(database, [])
  counter = createPrisma(database, 1)
})

afterAll(async () => {
  await counter?.$disconnect()
  await dropShopSchema(database)
})

/** A gateway whose caller is gone mid-charge, then shut down `how`; the ledger rows of the order after. */
async function callerGoneThenShutdown(orderId: number, how: 'wait-for-handlers' | 'wait-for-sockets'): Promise<number> {
  const prisma = createPrisma(database, 2)
  const inFlight = new InFlight()
  // The latency is where the handler is when its caller goes: a promise the test releases.
  let release!: () => void
  const held = new Promise<void>((r) => (release = r))
  let entered!: () => void
  const inHandler = new Promise<void>((r) => (entered = r))
  const wait = () => {
    entered()
    return held
  }
  const app = createGatewayApp({
    db: gatewayDb(prisma),
    schema,
    latency: { minMs: 0, maxMs: 0 },
    wait,
    inFlight,
    logError: () => {},
  })
  const server = app.listen(0, '127.0.0.1')
  await new Promise<void>((r) => server.once('listening', () => r()))
  const caller = new AbortController()
  const call = fetch(`http://127.0.0.1:${(server.address() as AddressInfo).port}/v1/charges`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'Idempotency-Key': `ord_drain_${orderId}` },
    body: JSON.stringify({ orderId, amountCents: 100 }),
    signal: caller.signal,
  }).catch(() => undefined)
  // The handler is inside its call (the latency); its caller goes away.
  await inHandler
  expect(inFlight.count).toBe(1)
  caller.abort()
  await call
  if (how === 'wait-for-handlers') {
    // gateway-main's shutdown: no new request, then every running handler, then the pool.
    server.close()
    release()
    expect(await inFlight.idle(30_000)).toBe(true)
  } else {
    // The shutdown before: the server's callback (no socket left), then the pool closed and the
    // process exited — here, with the charge still inside its call and nothing in the ledger.
    await new Promise<void>((r) => server.close(() => r()))
    expect(inFlight.count).toBe(1)
    const atExit = await counter.gatewayCharge.count({ where: { orderId } })
    release()
    await inFlight.idle(30_000)
    await prisma.$disconnect()
    return atExit
  }
  server.closeAllConnections()
  await prisma.$disconnect()
  return counter.gatewayCharge.count({ where: { orderId } })
}

it('a charge whose caller is gone still lands before the pool closes', async () => {
  expect(await callerGoneThenShutdown(1, 'wait-for-handlers')).toBe(1)
})

it('control: the server’s own close callback (sockets gone) comes while the charge still runs — exiting there drops it', async () => {
  expect(await callerGoneThenShutdown(2, 'wait-for-sockets')).toBe(0)
})
