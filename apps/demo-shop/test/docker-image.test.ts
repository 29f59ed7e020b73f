// Docker does not run here, so the demo shop's image is checked the closest way we can:
// - statically: stages, exact base images, the final stage's user, the shop's healthcheck;
// - by assembling the final stage's file tree from the Dockerfile itself — its production install
//   (the `deps` stage's `npm ci`, run as written plus --prefer-offline) and every `COPY --from`
//   of the last stage — and running the shop from that tree as an unprivileged user (nobody)
//   against the real Redis and PostgreSQL until the container's healthcheck script says healthy.
// A file the shop needs but the image leaves out, a dev-only dependency used at run time, or a
// write into /app fails the second test.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process'
import { chmodSync, cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { freePort } from '@fencelock/devkit/net'
import { afterAll, describe, expect, it } from 'vitest'
import { dropShopSchema } from '../src/database.js'
import { REDIS_URL, testDatabase, uniqueRun } from './services.js'

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..')
const dockerfile = readFileSync(join(root, 'apps/demo-shop/Dockerfile'), 'utf8')
const compose = readFileSync(join(root, 'docker-compose.yml'), 'utf8')

interface Stage {
  readonly from: string
  readonly name: string | undefined
  readonly lines: string[]
}

/** The Dockerfile's stages, each with its instructions (continuation lines joined, comments dropped). */
function stages(): Stage[] {
  const instructions = dockerfile
    .replace(/\\\n/g, ' ')
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l && !l.startsWith('#'))
  const out: Stage[] = []
  for (const line of instructions) {
    const from = /^FROM\s+(\S+)(?:\s+AS\s+(\S+))?$/i.exec(line)
    if (from) out.push({ from: from[1]!, name: from[2], lines: [] })
    else out.at(-1)?.lines.push(line)
  }
  return out
}

/** An exact release: x.y.z (PostgreSQL numbers its releases major.minor since 10: 15.20 is one). */
const EXACT = /:v?\d+\.\d+\.\d+(-[a-z0-9.]+)*$/
const exactFor = (image: string) => (image.startsWith('postgres:') ? /:\d{2,}\.\d+(-[a-z0-9.]+)*$/ : EXACT)

describe('the demo shop image', () => {
  it('is multi-stage on exactly pinned base images, runs as a non-root user, and the compose file pins every image', () => {
    const all = stages()
    expect(all.length).toBeGreaterThanOrEqual(2)
    const external = all.filter((s) => !all.some((o) => o.name === s.from))
    for (const stage of external) expect(stage.from, `FROM ${stage.from}`).toMatch(EXACT)
    const final = all.at(-1)!
    const users = final.lines.filter((l) => /^USER\s/i.test(l))
    expect(users.at(-1)).toBe('USER node')
    expect(final.lines.findIndex((l) => /^USER\s/i.test(l))).toBeGreaterThan(final.lines.findLastIndex((l) => /^(COPY|RUN)\s/i.test(l)))
    expect(final.lines.some((l) => /^CMD\s/i.test(l))).toBe(true)

    const images = [...compose.matchAll(/^\s+image:\s*(\S+)/gm)].map((m) => m[1]!)
    expect(images.length).toBeGreaterThan(3)
    for (const image of images.filter((i) => i !== 'fencelock/demo-shop')) expect(image, image).toMatch(exactFor(image))
  })

  it('has a healthcheck on the shop that Prometheus waits for', () => {
    const shop = /^ {2}shop:\n((?: {4}.*\n|\n)+)/m.exec(compose)?.[1] ?? ''
    expect(shop).toMatch(/healthcheck:\n\s+#[^\n]*\n(?:\s+#[^\n]*\n)*\s+test: \["CMD", "node", "apps\/demo-shop\/deploy\/healthcheck.mjs"\]/)
    const prometheus = /^ {2}prometheus:\n((?: {4}.*\n|\n)+)/m.exec(compose)?.[1] ?? ''
    expect(prometheus).toMatch(/depends_on:\n\s+shop: \{ condition: service_healthy \}/)
  })

  describe('its final file tree, run as nobody', () => {
    const work = mkdtempSync(join(tmpdir(), 'fencelock-image-'))
    const { schema } = uniqueRun('image')
    const database = testDatabase(schema)
    let shop: ChildProcess | undefined

    afterAll(async () => {
      if (shop && shop.exitCode === null) {
        const exited = new Promise((r) => shop!.once('exit', r))
        shop.kill('SIGTERM')
        const timer = setTimeout(() => shop!.kill('SIGKILL'), 20_000)
        await exited
        clearTimeout(timer)
      }
      rmSync(work, { recursive: true, force: true })
      await dropShopSchema(database)
    })

    it('holds everything the shop and its gateway need: the healthcheck passes', async () => {
      const all = stages()
      // The deps stage: the workspace's manifests and lock file, then its RUN lines as written.
      const deps = join(work, 'deps')
      mkdirSync(deps)
      cpSync(join(root, 'package.json'), join(deps, 'package.json'))
      cpSync(join(root, 'package-lock.json'), join(deps, 'package-lock.json'))
      for (const group of ['packages', 'apps']) {
        for (const name of readdirSync(join(root, group))) {
          if (existsSync(join(root, group, name, 'package.json'))) cpSync(join(root, group, name, 'package.json'), join(deps, group, name, 'package.json'))
        }
      }
      const depsStage = all.find((s) => s.name === 'deps')!
      for (const line of depsStage.lines.filter((l) => l.startsWith('RUN '))) {
        const command = line.slice(4).replace(/npm ci /g, 'npm ci --prefer-offline ')
        const result = spawnSync('sh', ['-c', command], { cwd: deps, encoding: 'utf8', env: { ...process.env, npm_config_loglevel: 'error' } })
        expect(result.status, `${command}\n${result.stderr}`).toBe(0)
      }
      expect(existsSync(join(deps, 'node_modules/vitest')), 'no test runner in the image').toBe(false)

      // The final stage: every COPY --from, from the deps tree or from the built workspace.
      const app = join(work, 'app')
      mkdirSync(app)
      const final = all.at(-1)!
      for (const line of final.lines.filter((l) => l.startsWith('COPY '))) {
        const copy = /^COPY\s+--from=(\S+)\s+(.+)$/.exec(line)
        expect(copy, `${line}: the final stage copies only from earlier stages`).not.toBeNull()
        const words = copy![2]!.split(/\s+/)
        const dest = words.at(-1)!
        const base = copy![1] === 'deps' ? deps : root
        for (const src of words.slice(0, -1)) {
          const from = join(base, src.replace(/^\/app\/?/, ''))
          expect(existsSync(from), `${line}: ${src} is there after the build`).toBe(true)
          const target = dest.endsWith('/') ? join(app, dest, src.split('/').at(-1)!) : join(app, dest)
          cpSync(from, target, { recursive: true, verbatimSymlinks: true, filter: (path) => !path.includes('/node_modules/.vite') })
        }
      }
      // Readable by everyone, writable by no one but root: as in the image.
      for (let dir = work; dir !== dirname(dir); dir = dirname(dir)) if (dir.startsWith(tmpdir()) && dir !== tmpdir()) chmodSync(dir, 0o755)
      spawnSync('chmod', ['-R', 'a+rX,go-w', work])

      const basePort = await freePort()
      const ports = [basePort, await freePort(), await freePort()]
      expect(new Set(ports).size).toBe(3)
      const env = {
        PATH: process.env.PATH ?? '',
        HOME: '/tmp',
        NODE_ENV: 'production',
        REDIS_URL,
        DATABASE_URL: `${database.connectionString}${database.connectionString.includes('?') ? '&' : '?'}schema=${schema}`,
        HOST: '127.0.0.1',
        SHOP_INSTANCES: '1',
        SHOP_BASE_PORT: String(ports[0]),
        SHOP_DASHBOARD_PORT: String(ports[1]),
      }
      const asNobody = ['--reuid=65534', '--regid=65534', '--clear-groups']
      let log = ''
      shop = spawn('setpriv', [...asNobody, process.execPath, '--import', 'tsx', 'apps/demo-shop/src/serve.ts'], { cwd: app, env, stdio: ['ignore', 'pipe', 'pipe'] })
      shop.stdout?.on('data', (d: Buffer) => (log = (log + d.toString()).slice(-4_000)))
      shop.stderr?.on('data', (d: Buffer) => (log = (log + d.toString()).slice(-4_000)))

      const deadline = performance.now() + 90_000
      let health = { status: -1 as number | null, stderr: '' }
      while (performance.now() < deadline && shop.exitCode === null) {
        health = spawnSync('setpriv', [...asNobody, process.execPath, 'apps/demo-shop/deploy/healthcheck.mjs'], { cwd: app, env, encoding: 'utf8' })
        if (health.status === 0) break
        await new Promise((r) => setTimeout(r, 500))
      }
      expect(health.status, `healthcheck: ${health.stderr}\nshop log:\n${log}`).toBe(0)
      const state = await fetch(`http://127.0.0.1:${ports[0]}/api/state`).then((r) => r.json() as Promise<Record<string, unknown>>)
      expect(state).toHaveProperty('products')
    }, 240_000)
  })
})
