// Issue 26 case 1 on real processes: a shop instance (main.ts, under the Supervisor) dies with
// SIGKILL exactly after the gateway (a process of its own, with its ledger) answered its charge
// and before the payment row — the FENCELOCK_DIE_AFTER_CHARGE hook. The counts say so; the
// instance, restarted, settles the order from the ledger with its start-up reconciler pass.
import { expect, it } from 'vitest'
import type { ShopState } from '../src/app.js'
import { countShop } from '../src/shop-counts.js'
import { Supervisor } from '../src/supervisor.js'
import { REDIS_URL } from './services.js'
import { supervisedShop } from './supervised-shop.js'

const shop = supervisedShop('die-charge')

const post = (path: string, body: unknown) =>
  fetch(`${shop.supervisor?.instances[0]?.url}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  })

it('an instance killed right after the charge: counted as charged and not paid, then settled by the restarted instance', async () => {
  shop.supervisor = await Supervisor.start({
    instances: 1,
    stderr: 'ignore',
    env: {
      REDIS_URL,
      DATABASE_URL: shop.databaseUrl,
      SHOP_MODE: 'fenced',
      SHOP_RUN_ID: shop.runId,
      SHOP_LOCK_TTL_MS: '500',
      SHOP_GATEWAY_URL: shop.gateway.url,
      SHOP_DB_POOL_SIZE: '2',
      SHOP_RECONCILE_INTERVAL_MS: '0',
      FENCELOCK_DIE_AFTER_CHARGE: '1',
    },
  })
  const bought = await post('/api/products/flash-1/purchase', { buyerId: 'buyer-1' })
  expect(bought.status).toBe(201)
  const { orderId } = (await bought.json()) as { orderId: number }

  const exited = new Promise<void>((resolve) => shop.supervisor?.onExit(() => resolve()))
  await expect(post(`/api/orders/${orderId}/pay`, {})).rejects.toThrow()
  await exited

  const order = await shop.prisma.order.findUniqueOrThrow({ where: { id: orderId } })
  expect(order).toMatchObject({ status: 'pending', paymentKey: order.reference })
  expect(await shop.prisma.gatewayCharge.count({ where: { orderId } })).toBe(1)
  expect(await shop.prisma.payment.count({ where: { orderId } })).toBe(0)
  // What the report said "no violation" about: money moved, no paid order.
  const broken = await countShop(shop.prisma, shop.schema)
  expect(broken).toMatchObject({ chargedUnpaidOrders: 1, violations: 1 })

  // Back without the hook: its start-up pass settles the intent (older than the TTL by now).
  await shop.supervisor.restart('shop-1', { FENCELOCK_DIE_AFTER_CHARGE: '', SHOP_RECONCILE_INTERVAL_MS: '200' })
  let state: ShopState | undefined
  for (const deadline = performance.now() + 60_000; performance.now() < deadline;) {
    state = (await (await fetch(`${shop.supervisor.instances[0]?.url}/api/state`)).json()) as ShopState
    if (state.reconciled.paid > 0) break
    await new Promise((r) => setTimeout(r, 100))
  }
  expect(state?.reconciled).toEqual({ paid: 1, cancelled: 0 })
  expect(state?.violations.total).toBe(0)
  const charge = await shop.prisma.gatewayCharge.findFirstOrThrow({ where: { orderId } })
  expect(await shop.prisma.payment.findMany({ where: { orderId } })).toMatchObject([
    { gatewayChargeId: charge.chargeId, amountCents: 4_999 },
  ])
  expect((await countShop(shop.prisma, shop.schema)).violations).toBe(0)
})
