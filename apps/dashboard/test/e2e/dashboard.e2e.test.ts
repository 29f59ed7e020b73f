// End to end, as a person would use it: the real demo process (the live shop's instances, the
// dashboard server, real Redis and PostgreSQL in a schema of its own) serving a production build
// of the dashboard, driven in Debian's Chromium. A fenced sale with a holder paused past its TTL
// sells nothing twice and charges every order once at the gateway (its ledger); an unsafe one
// oversells and charges orders twice. Screenshots at 1280×800 and at phone width go to
// the system's temp directory, never into the repository. Then the demo is stopped and the page
// must say the connection is lost. Everything started is stopped by PID.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import pg from 'pg'
import { chromium, type BrowserContext, type Page } from 'playwright-core'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'

const here = dirname(fileURLToPath(import.meta.url))
const dashboardDir = join(here, '..', '..')
const root = join(dashboardDir, '..', '..')
const CHROMIUM_ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run']

const databaseUrl = new URL(process.env.DATABASE_URL || 'postgresql://postgres@127.0.0.1:5432/test')
databaseUrl.searchParams.delete('schema')
const schema = `e2e_dashboard_${process.pid}_${randomBytes(3).toString('hex')}`
const work = mkdtempSync(join(tmpdir(), 'fencelock-dashboard-e2e-'))
/** Where the screenshots go: outside the repository. */
const shots = join(work, 'screenshots')

let demo: ChildProcess | undefined
let demoLog = ''
let context: BrowserContext | undefined
let url = ''
const timings: string[] = []
const t0 = performance.now()
const mark = (what: string) => timings.push(`${what}: ${((performance.now() - t0) / 1000).toFixed(1)} s`)

/** Stops a child we started, by its PID: SIGTERM, then SIGKILL after `graceMs`. */
async function stopChild(child: ChildProcess | undefined, graceMs: number): Promise<void> {
  if (child === undefined || child.pid === undefined || child.exitCode !== null || child.signalCode !== null) return
  const exited = new Promise<void>((r) => child.once('exit', () => r()))
  process.kill(child.pid, 'SIGTERM')
  const timer = setTimeout(() => child.pid !== undefined && child.exitCode === null && process.kill(child.pid, 'SIGKILL'), graceMs)
  await exited
  clearTimeout(timer)
}

beforeAll(async () => {
  // A production build of the dashboard, into the temp directory (the repository's dist/ is left alone).
  const vite = join(dirname(createRequire(import.meta.url).resolve('vite/package.json')), 'bin', 'vite.js')
  const dist = join(work, 'dist')
  const build = spawnSync(process.execPath, [vite, 'build', '--outDir', dist, '--emptyOutDir', '--logLevel', 'warn'], { cwd: dashboardDir, encoding: 'utf8' })
  expect(build.status, build.stderr).toBe(0)
  mark('dashboard built')

  const env: NodeJS.ProcessEnv = { ...process.env, DATABASE_URL: `${databaseUrl.toString()}${databaseUrl.search ? '&' : '?'}schema=${schema}`, DASHBOARD_DIST: dist }
  demo = spawn(process.execPath, ['--import', 'tsx', 'apps/demo-shop/src/demo.ts', '--port', '0'], { cwd: root, env, stdio: ['ignore', 'pipe', 'pipe'] })
  demo.stderr?.on('data', (d: Buffer) => (demoLog += d.toString()))
  url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`the demo printed no URL within 90 s:\n${demoLog}`)), 90_000)
    demo?.stdout?.on('data', (d: Buffer) => {
      demoLog += d.toString()
      const found = /Open the dashboard: (http:\/\/\S+)/.exec(demoLog)
      if (found) {
        clearTimeout(timer)
        resolve(found[1] as string)
      }
    })
    demo?.once('exit', (code) => reject(new Error(`the demo exited (${code}) before printing its URL:\n${demoLog}`)))
  })
  // One URL, and only one.
  expect(demoLog.match(/https?:\/\/\S+/g)).toHaveLength(1)
  mark('demo serving')

  context = await chromium.launchPersistentContext(join(work, 'chromium-profile'), { executablePath: '/usr/bin/chromium', args: CHROMIUM_ARGS, viewport: { width: 1280, height: 800 } })
  mkdirSync(shots, { recursive: true })
})

afterAll(async () => {
  await context?.close().catch(() => {})
  await stopChild(demo, 30_000)
  const client = new pg.Client({ connectionString: databaseUrl.toString() })
  await client.connect()
  await client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`).finally(() => client.end())
  rmSync(join(work, 'dist'), { recursive: true, force: true })
  rmSync(join(work, 'chromium-profile'), { recursive: true, force: true })
  mark('stopped')
  console.log(`${timings.join('\n')}\nscreenshots: ${shots}`)
})

/** Starts a sale from the form and waits for its row in the comparison to be done. */
async function runSale(page: Page, id: number, sale: { mode: string; chaos: string; buyers: number; stock: number }): Promise<Record<string, string>> {
  await page.getByLabel('Mode', { exact: true }).selectOption(sale.mode)
  await page.getByLabel('Chaos', { exact: true }).selectOption(sale.chaos)
  await page.getByLabel('Buyers', { exact: true }).fill(String(sale.buyers))
  await page.getByLabel('Stock', { exact: true }).fill(String(sale.stock))
  await page.getByRole('button', { name: 'Start the sale' }).click()
  await expect.poll(() => page.getByRole('progressbar', { name: `Flash sale #${id} progress` }).count(), { timeout: 15_000 }).toBe(1)
  const row = page.locator(`tr[data-run-id="${id}"]`)
  await row.and(page.locator('[data-status="done"]')).waitFor({ timeout: 120_000 })
  const cells: Record<string, string> = {}
  for (const col of ['mode', 'chaos', 'sold', 'oversold', 'charged-twice', 'lost-updates', 'gateway-charges', 'payments', 'stale-rejected']) {
    cells[col] = (await row.locator(`[data-col="${col}"]`).textContent()) ?? ''
  }
  return cells
}

describe('the dashboard in Chromium', () => {
  it('shows the live shop, runs a fenced sale under pause chaos with 0 oversold and 0 charged twice at the gateway, then an unsafe one that oversells and charges twice', async () => {
    const page = await (context as BrowserContext).newPage()
    const errors: string[] = []
    page.on('pageerror', (e) => errors.push(e.message))
    await page.goto(url)
    await page.getByText('● Live').waitFor({ timeout: 15_000 })
    await page.locator('section[data-source="live"]').getByText('Healthy').waitFor({ timeout: 20_000 })
    expect(await page.locator('.chart canvas').count()).toBe(6)
    mark('live dashboard up')

    // A token in the locks table is the exact decimal string (the live crowd holds product and order locks).
    const token = page.locator('td.token').first()
    await token.waitFor({ timeout: 30_000 })
    expect(await token.textContent()).toMatch(/^\d+$/)

    const fenced = await runSale(page, 1, { mode: 'fenced', chaos: 'pause', buyers: 120, stock: 20 })
    mark('fenced + pause done')
    timings.push(`  ${JSON.stringify(fenced)}`)
    expect(fenced).toMatchObject({ mode: 'Lock + fencing', chaos: 'pause', sold: '20 / 20', oversold: '0', 'charged-twice': '0', 'lost-updates': '0' })
    // Each order paid was charged once at the gateway and recorded once in the shop.
    expect(Number(fenced['gateway-charges'])).toBeGreaterThan(0)
    expect(fenced.payments).toBe(fenced['gateway-charges'])
    // The double-charge figure says where it is counted, in the table and on the card.
    const headers = await page.locator('table.runs thead th').allTextContents()
    expect(headers).toEqual(expect.arrayContaining(['Charged twice (gateway)', 'Charges (gateway ledger)', 'Payments (shop)']))
    expect(headers).not.toContain('Double charges')
    const card = page.locator('section[data-source="run-1"]')
    await card.getByText('Healthy').waitFor({ timeout: 5_000 })
    const figure = async (label: string) => (await card.locator('.kv', { has: page.getByText(label, { exact: true }) }).locator('dd').textContent())?.trim()
    const charges = fenced['gateway-charges']
    expect([await figure('Charged twice (gateway)'), await figure('Charges (gateway ledger)'), await figure('Payments (shop)'), await figure('Paid orders (shop)')]).toEqual(['0', charges, charges, charges])
    expect(await card.textContent()).toContain("charges from the gateway's ledger")
    await page.screenshot({ path: join(shots, 'desktop-1280x800-after-fenced.png') })

    const unsafe = await runSale(page, 2, { mode: 'unsafe', chaos: 'none', buyers: 60, stock: 10 })
    mark('unsafe done')
    timings.push(`  ${JSON.stringify(unsafe)}`)
    expect(unsafe).toMatchObject({ mode: 'No lock', chaos: 'none' })
    expect(Number(unsafe.oversold)).toBeGreaterThan(0)
    // Duplicate payment requests with no lock: orders charged twice, counted in the gateway's ledger.
    expect(Number(unsafe['charged-twice'])).toBeGreaterThan(0)
    await page.locator('section[data-source="run-2"]').getByText('Violated').waitFor({ timeout: 5_000 })
    // Both runs side by side.
    expect(await page.locator('tr[data-run-id]').count()).toBe(2)

    await page.screenshot({ path: join(shots, 'desktop-1280x800.png') })
    await page.screenshot({ path: join(shots, 'desktop-1280x800-full.png'), fullPage: true })
    await page.setViewportSize({ width: 390, height: 844 })
    await page.waitForTimeout(1_500)
    // Nothing wider than the phone's screen but the tables' own scrolling regions.
    expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(390)
    await page.screenshot({ path: join(shots, 'phone-390x844.png') })
    await page.screenshot({ path: join(shots, 'phone-390x844-full.png'), fullPage: true })

    // The shop goes away: the page says so, and keeps trying.
    await stopChild(demo, 30_000)
    mark('demo stopped')
    const lost = page.getByRole('alert').filter({ hasText: 'Connection to the shop lost' })
    await lost.waitFor({ timeout: 15_000 })
    expect(await lost.textContent()).toMatch(/Reconnecting/)
    await page.screenshot({ path: join(shots, 'phone-390x844-connection-lost.png') })
    expect(errors).toEqual([])
  })
})
