// Every view of the dashboard at 1280×800 and 390×844 in Debian's Chromium, from a production
// build served by the dashboard's own server, with runs whose figures the test chooses (the
// stand-ins of scripted-dashboard.ts): the empty page, a comparison whose bars have the
// labels that used to collide ($249.95 beside $0.00), a sale going on, the charged-twice
// drill-down with the incident of the same run, another run's timeline, the definitions open,
// the live shop with a charge in flight, and the connection lost. At each: no two chart labels
// overlap, every control has a label, no placeholder or chosen option is cut, nothing is wider
// than the screen.
// Screenshots go to the system's temp directory, never into the repository.
import { spawnSync } from 'node:child_process'
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { chromium, type Browser, type Page } from 'playwright-core'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { ChargedTwiceOrder, IncidentView } from '../../src/wire'
import { layoutFindings, waitToFit } from './layout-checks'
import { shopState, startScriptedDashboard, type ScriptedDashboard } from './scripted-dashboard'

const here = dirname(fileURLToPath(import.meta.url))
const dashboardDir = join(here, '..', '..')
const CHROMIUM_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--no-first-run',
]
const SIZES = [
  { name: 'desktop', width: 1280, height: 800 },
  { name: 'phone', width: 390, height: 844 },
] as const

const work = mkdtempSync(join(tmpdir(), 'fencelock-dashboard-layout-'))
const shots = join(work, 'screenshots')
let dashboard: ScriptedDashboard | undefined
let browser: Browser | undefined
let page: Page

/** Lock + fencing's incident: A frozen in its charge, B takes over with a newer token, A's write refused. */
const INCIDENT: Omit<IncidentView, 'runId'> = {
  mode: 'fenced',
  resource: 'order:41',
  operation: 'charge',
  holderA: { instance: 'shop-2', token: '1764248000123457' },
  holderB: { instance: 'shop-3', token: '1764248000123458' },
  ttlMs: 1_000,
  steps: [
    {
      atMs: 1_204,
      actor: 'A',
      instance: 'shop-2',
      token: '1764248000123457',
      kind: 'acquired',
      outcome: 'ok',
      text: 'A takes the lock of order 41 to charge it.',
    },
    {
      atMs: 1_260,
      actor: 'chaos',
      instance: 'shop-2',
      token: null,
      kind: 'frozen',
      outcome: 'ok',
      text: 'SIGSTOP: shop-2 is frozen, its watchdog too.',
    },
    {
      atMs: 2_260,
      actor: 'A',
      instance: 'shop-2',
      token: '1764248000123457',
      kind: 'lease-expired',
      outcome: 'ok',
      text: 'A’s lease runs out in Redis while A sleeps.',
    },
    {
      atMs: 2_301,
      actor: 'B',
      instance: 'shop-3',
      token: '1764248000123458',
      kind: 'acquired',
      outcome: 'ok',
      text: 'B takes the lock with a newer token.',
    },
    {
      atMs: 2_350,
      actor: 'B',
      instance: 'shop-3',
      token: '1764248000123458',
      kind: 'charge',
      outcome: 'replayed',
      text: 'B charges the order: the gateway answers from the key’s record, no new charge.',
    },
    {
      atMs: 2_390,
      actor: 'B',
      instance: 'shop-3',
      token: '1764248000123458',
      kind: 'write',
      outcome: 'ok',
      text: 'B records the payment.',
    },
    {
      atMs: 4_010,
      actor: 'chaos',
      instance: 'shop-2',
      token: null,
      kind: 'resumed',
      outcome: 'ok',
      text: 'SIGCONT: shop-2 wakes up.',
    },
    {
      atMs: 4_030,
      actor: 'A',
      instance: 'shop-2',
      token: '1764248000123457',
      kind: 'write',
      outcome: 'refused',
      text: 'A writes its payment with its old token: the database refuses it.',
    },
  ],
  ending: 'refused',
  summary: 'Fencing held: the database refused the write of the holder whose lease had gone.',
  pausesOnHolders: 3,
}

const chargedTwice = (count: number): { orders: ChargedTwiceOrder[]; total: number } => ({
  total: count,
  orders: Array.from({ length: count }, (_, i) => ({
    orderId: 100 + i,
    status: 'paid',
    amountCents: 4_999,
    fenceToken: '0',
    charges: ['shop-1', 'shop-4'].map((instance, k) => ({
      chargeId: `ch_${i}${k}a9f3`,
      atMs: 900 + 40 * i + 300 * k,
      amountCents: 4_999,
      idempotencyKey: null,
      instance,
      token: null,
      paymentRecorded: true,
    })),
    payments: [],
  })),
})

/** Each view at each size: its layout findings, and a screenshot. */
async function checkView(name: string, prepare?: () => Promise<void>): Promise<void> {
  for (const size of SIZES) {
    await page.setViewportSize({ width: size.width, height: size.height })
    await expect.poll(() => page.evaluate(() => window.innerWidth), { timeout: 10_000 }).toBe(size.width)
    await prepare?.()
    await waitToFit(page, size.width)
    const findings = await layoutFindings(page)
    const pageWidth = await page.evaluate(() => document.documentElement.scrollWidth)
    await page.screenshot({ path: join(shots, `${name}-${size.width}x${size.height}.png`), fullPage: true })
    expect({ view: name, width: size.width, ...findings, tooWide: pageWidth > size.width ? pageWidth : 0 }).toEqual({
      view: name,
      width: size.width,
      overlappingLabels: [],
      unlabelledControls: [],
      truncatedPlaceholders: [],
      truncatedSelects: [],
      tooWide: 0,
    })
  }
}

beforeAll(async () => {
  const vite = join(dirname(createRequire(import.meta.url).resolve('vite/package.json')), 'bin', 'vite.js')
  const dist = join(work, 'dist')
  const build = spawnSync(process.execPath, [vite, 'build', '--outDir', dist, '--emptyOutDir', '--logLevel', 'warn'], {
    cwd: dashboardDir,
    encoding: 'utf8',
  })
  expect(build.status, build.stderr).toBe(0)
  dashboard = await startScriptedDashboard({ staticDir: dist })
  browser = await chromium.launch({ executablePath: '/usr/bin/chromium', args: CHROMIUM_ARGS })
  page = await browser.newPage({ viewport: { width: 1280, height: 800 } })
  mkdirSync(shots, { recursive: true })
})

afterAll(async () => {
  await browser?.close().catch(() => {})
  await dashboard?.close()
  rmSync(join(work, 'dist'), { recursive: true, force: true })
  console.log(`screenshots: ${shots}`)
})

describe('the dashboard’s layout in Chromium, at 1280×800 and 390×844', () => {
  it('keeps every view legible: chart labels apart, controls labelled, placeholders whole, nothing wider than the screen', async () => {
    const d = dashboard as ScriptedDashboard
    const errors: string[] = []
    page.on('pageerror', (e) => errors.push(e.message))
    await page.goto(d.url)
    await page.getByText('● Live').waitFor({ timeout: 30_000 })
    const live = page.locator('section[data-source="live"]')
    await live.waitFor({ timeout: 30_000 })
    await checkView('empty')

    // Restart Redis cannot run with REDIS_URL set (the API answers 422): never offered as if it could.
    for (const select of [page.getByLabel('Chaos', { exact: true }), page.getByLabel('Comparison chaos')]) {
      const option = select.locator('option[value="redis-restart"]')
      if ((await option.count()) > 0) {
        expect(await option.isDisabled()).toBe(true)
        expect(await option.textContent()).toMatch(/REDIS_URL/)
      }
    }

    // The comparison: the size typed in the form reaches the server.
    await page.getByLabel('Comparison buyers').fill('1000')
    await page.getByLabel('Comparison stock').fill('100')
    await page.getByRole('button', { name: 'Compare the three modes' }).click()
    await expect.poll(() => d.pending.length, { timeout: 15_000 }).toBe(1)
    expect(d.pending[0]?.options).toMatchObject({ mode: 'unsafe', buyers: 1_000, stock: 100 })
    // The lock alone overcharged $249.95 beside lock + fencing's $0.00, both short bars under no
    // lock's $9,998.00: the two labels that ran into each other ("$249.95$0.00").
    await d.finish({
      sold: 137,
      oversoldUnits: 37,
      doubleChargedOrders: 150,
      extraCharges: 200,
      lostUpdates: 12,
      gatewayCharges: 300,
      payments: 100,
      paidOrders: 100,
      violations: 199,
      chaosEvents: 3,
      expiredLocks: 4,
      chargedTwice: chargedTwice(5),
      incident: {
        incident: null,
        reason: 'No lock in this mode: no holder, no lease, no token, so no takeover to draw.',
      },
    })
    await d.finish({
      sold: 101,
      oversoldUnits: 1,
      lostUpdates: 1,
      doubleChargedOrders: 5,
      extraCharges: 5,
      gatewayCharges: 105,
      violations: 7,
      chaosEvents: 1,
      expiredLocks: 1,
    })
    await d.finish({
      staleWritesRejected: 6,
      chaosEvents: 3,
      expiredLocks: 3,
      incident: { incident: INCIDENT, reason: null },
    })
    await page.locator('tr[data-run-id="3"][data-status="done"]').waitFor({ timeout: 15_000 })
    await page.locator('.bars').waitFor()
    expect(await page.locator('[data-figure="overcharged"] [data-mode="lock"]').getAttribute('data-value')).toBe(
      '24995',
    )
    // One pause is "1 pause", not "1 pauses".
    expect(await page.locator('tr[data-run-id="2"] [data-col="chaos-landed"]').textContent()).toBe(
      '1 pause · 1 lease expired',
    )
    await checkView('comparison')

    // A sale going on: its progress, and the charts' switch to it.
    await page.getByLabel('Mode', { exact: true }).selectOption('fenced')
    await page.getByLabel('Chaos', { exact: true }).selectOption('pause')
    await page.getByRole('button', { name: 'Start the sale' }).click()
    await page.locator('.progress-box').waitFor({ timeout: 15_000 })
    // "Sale #4", or "Sales #1, #4" when a sample also landed during the comparison's runs.
    await page
      .getByRole('group', { name: 'Whose lock metrics' })
      .getByRole('button', { name: /^Sales? #(\d+, #)*4$/ })
      .waitFor({ timeout: 15_000 })
    await checkView('running')
    await d.finish({ staleWritesRejected: 2, chaosEvents: 1, expiredLocks: 1 })
    await page.locator('tr[data-run-id="4"][data-status="done"]').waitFor({ timeout: 15_000 })

    // The drill-down of run 1: the incident panel shows run 1's, not the newest sale's.
    await page.locator('tr[data-run-id="1"] [data-col="charged-twice"] button').click()
    await page.locator('section.drill[data-run-id="1"] li[data-order-id]').first().waitFor({ timeout: 15_000 })
    await page.locator('section.incident[data-run-id="1"]').waitFor({ timeout: 15_000 })
    await checkView('drill-down')

    // Another run's timeline: the incident follows, and the drill-down of another run closes.
    await page.locator('tr[data-run-id="3"] .timeline-button').click()
    await page
      .locator('section.incident[data-run-id="3"] .timeline li[data-outcome="refused"]')
      .waitFor({ timeout: 15_000 })
    expect(await page.locator('section.drill').count()).toBe(0)
    await checkView('incident')

    await page.getByText('What the bars count').click()
    await checkView('definitions')

    // A charge in flight at the live shop, as a shop that does not say so counts it (charged, not
    // paid) and as one that does (inFlight): never a violation beside "Healthy".
    // (A shop older than issue 34 sends no inFlight: the stand-in's state without it.)
    const { inFlight: _said, ...unsaid } = shopState({
      gatewayCharges: 27,
      violations: { ...shopState().violations, chargedUnpaidOrders: 1, total: 1 },
    })
    d.setShopState(unsaid as ReturnType<typeof shopState>)
    await live.locator('.kv', { hasText: 'Charged, not paid' }).locator('.hint').waitFor({ timeout: 15_000 })
    expect(await live.locator('.kv-bad').count()).toBe(0)
    expect(await live.getByRole('status').textContent()).toBe('✓ Healthy')
    await checkView('charge-in-flight-unsaid', () => live.scrollIntoViewIfNeeded())
    d.setShopState({ ...shopState({ gatewayCharges: 27 }), inFlight: { chargedUnpaidOrders: 1 } } as ReturnType<
      typeof shopState
    >)
    await live.locator('.kv', { hasText: 'Charges in flight' }).waitFor({ timeout: 15_000 })
    expect(await live.locator('.kv-bad').count()).toBe(0)
    await checkView('charge-in-flight', () => live.scrollIntoViewIfNeeded())

    // The server goes away: the banner, and the forms wait.
    await d.stopServer()
    await page.getByRole('alert').filter({ hasText: 'Connection to the shop lost' }).waitFor({ timeout: 15_000 })
    await checkView('connection-lost', () => page.evaluate(() => window.scrollTo(0, 0)))
    expect(errors).toEqual([])
  }, 300_000)
})
