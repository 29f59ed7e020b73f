// docker-compose.yml cannot run here (no Docker): check it the way CI can — `docker-compose
// config -q` — and that what it mounts and scrapes exists and matches, and that the payment
// gateway is a service of its own that the shop waits for and charges.
import { spawnSync } from 'node:child_process'
import { existsSync, readFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..')
const composeFile = join(root, 'docker-compose.yml')

/**
 * One service of `docker-compose config`'s output: the file as docker-compose reads it, in its
 * canonical form (block style, keys sorted, flow mappings expanded), so the checks below do not
 * depend on how the file is written. The service's lines, without their common indentation.
 */
function resolvedService(name: string): string {
  const result = spawnSync('docker-compose', ['-f', composeFile, 'config'], { cwd: root, encoding: 'utf8' })
  expect(result.status, result.stderr).toBe(0)
  const lines = result.stdout.split('\n')
  const start = lines.indexOf(`  ${name}:`)
  expect(start, `service ${name}`).toBeGreaterThan(-1)
  const end = lines.findIndex((line, i) => i > start && /^ {0,2}\S/.test(line))
  return lines
    .slice(start + 1, end === -1 ? undefined : end)
    .map((line) => line.slice(4))
    .join('\n')
}

/** The value of `key:` in a resolved service (first match), unquoted. */
function valueOf(service: string, key: string): string | undefined {
  return new RegExp(`^\\s*${key}: (.*)$`, 'm').exec(service)?.[1]?.replace(/^'(.*)'$/, '$1')
}

describe('docker-compose.yml', () => {
  it('is valid for docker-compose config -q', () => {
    const result = spawnSync('docker-compose', ['-f', composeFile, 'config', '-q'], { cwd: root, encoding: 'utf8' })
    expect(result.error, 'docker-compose must be installed (apt-get install docker-compose)').toBeUndefined()
    expect(result.stderr).toBe('')
    expect(result.status).toBe(0)
  })

  it("profile sentinel: a primary, a replica and 3 Sentinels, only with the profile; the shop takes REDIS_SENTINELS and SHOP_LOCK_REPLICAS from the environment", () => {
    const withProfile = spawnSync('docker-compose', ['-f', composeFile, '--profile', 'sentinel', 'config'], {
      cwd: root,
      encoding: 'utf8',
      env: { ...process.env, REDIS_SENTINELS: 'sentinel-1:26379,sentinel-2:26379,sentinel-3:26379', SHOP_LOCK_REPLICAS: '1' },
    })
    expect(withProfile.status, withProfile.stderr).toBe(0)
    const services = (out: string) => [...out.matchAll(/^ {2}([a-z0-9-]+):$/gm)].map((m) => m[1])
    const ha = ['redis-primary', 'redis-replica', 'sentinel-1', 'sentinel-2', 'sentinel-3']
    expect(services(withProfile.stdout)).toEqual(expect.arrayContaining(ha))
    expect(withProfile.stdout).toMatch(/REDIS_SENTINELS: sentinel-1:26379,sentinel-2:26379,sentinel-3:26379/)
    expect(withProfile.stdout).toMatch(/SHOP_LOCK_REPLICAS: '1'/)
    expect(withProfile.stdout).toContain('sentinel monitor fencelock redis-primary 6379 2')
    // Each only with the profile (docker-compose 1 lists every service in `config`, with its profiles).
    const without = spawnSync('docker-compose', ['-f', composeFile, 'config'], { cwd: root, encoding: 'utf8' })
    expect(without.status, without.stderr).toBe(0)
    const profiled = (s: string) => new RegExp(`^  ${s}:\n(?: {4}.*\n)*? {4}profiles:\n {4}- sentinel$`, 'm')
    for (const s of ha) expect(without.stdout).toMatch(profiled(s))
    for (const s of ['shop', 'redis', 'postgres', 'gateway']) expect(without.stdout).not.toMatch(profiled(s))
  })

  it('profile etcd: one etcd member, pinned, on the loopback, its data in a volume, only with the profile; the shop takes ETCD_ENDPOINTS from the environment', () => {
    const withProfile = spawnSync('docker-compose', ['-f', composeFile, '--profile', 'etcd', 'config'], {
      cwd: root,
      encoding: 'utf8',
      env: { ...process.env, ETCD_ENDPOINTS: 'etcd:2379' },
    })
    expect(withProfile.status, withProfile.stderr).toBe(0)
    expect(withProfile.stdout).toMatch(/ETCD_ENDPOINTS: etcd:2379/)
    const etcd = resolvedService('etcd')
    expect(valueOf(etcd, 'image')).toBe('quay.io/coreos/etcd:v3.4.23')
    expect(etcd).toMatch(/^ports:\n- 127\.0\.0\.1:2379:2379\/tcp$/m)
    expect(etcd).toMatch(/^volumes:\n- etcd-data:\/etcd-data:rw$/m)
    expect(etcd).toContain('- --data-dir=/etcd-data')
    expect(etcd).toMatch(/^profiles:\n- etcd$/m)
    // Unset, the shop's locks stay on Redis (an empty ETCD_ENDPOINTS).
    expect(valueOf(resolvedService('shop'), 'ETCD_ENDPOINTS')).toBe('')
  })

  it('has the services of the demo, and every file it mounts or builds from exists', () => {
    const text = readFileSync(composeFile, 'utf8')
    for (const service of ['redis', 'postgres', 'gateway', 'shop', 'prometheus', 'grafana']) expect(text).toMatch(new RegExp(`^  ${service}:$`, 'm'))
    const mounted = [...text.matchAll(/- \.\/([^:]+):/g)].map((m) => m[1] as string)
    expect(mounted).toContain('packages/metrics/prometheus/alerts.yml')
    expect(mounted).toContain('packages/metrics/grafana')
    for (const path of [...mounted, 'apps/demo-shop/Dockerfile']) expect(existsSync(join(root, path)), path).toBe(true)
  })

  it('has Prometheus scrape every shop instance the compose file starts', () => {
    const text = readFileSync(composeFile, 'utf8')
    const instances = Number(/SHOP_INSTANCES: "(\d+)"/.exec(text)?.[1])
    const base = Number(/SHOP_BASE_PORT: "(\d+)"/.exec(text)?.[1])
    const prometheus = readFileSync(join(root, 'apps/demo-shop/deploy/prometheus.yml'), 'utf8')
    for (let i = 0; i < instances; i++) expect(prometheus).toContain(`'shop:${base + i}'`)
    expect(prometheus).toContain('/etc/prometheus/alerts.yml')
  })

  it('runs the payment gateway as a service of its own, healthy before the shop starts, which charges it', () => {
    const gateway = resolvedService('gateway')
    const shop = resolvedService('shop')
    // The shop's image, another process: the gateway's entry script.
    expect(valueOf(gateway, 'image')).toBe(valueOf(shop, 'image'))
    const command = /^command:\n((?:- .*\n?)+)/m.exec(gateway)?.[1]?.trim().split('\n').map((l) => l.slice(2))
    expect(command).toEqual(['node', '--import', 'tsx', 'apps/demo-shop/src/gateway/gateway-main.ts'])
    expect(existsSync(join(root, 'apps/demo-shop/src/gateway/gateway-main.ts'))).toBe(true)
    // Its ledger is in the shop's schema, where the double charges are counted.
    const ledger = valueOf(gateway, 'DATABASE_URL')
    expect(ledger).toMatch(/\?schema=demo_shop$/)
    expect(ledger).toBe(valueOf(shop, 'DATABASE_URL'))
    const port = valueOf(gateway, 'PORT')
    expect(port).toBe('4000')
    expect(valueOf(gateway, 'HOST')).toBe('0.0.0.0')
    // Healthy means /healthz answers on its port.
    expect(/^healthcheck:\n(?: .*\n?)+/m.exec(gateway)?.[0]).toContain(`http://127.0.0.1:${port}/healthz`)
    // The shop waits for it, and charges it instead of forking a gateway of its own.
    expect(/^depends_on:\n(?: .*\n?)+/m.exec(shop)?.[0]).toMatch(/^ {2}gateway:\n {4}condition: service_healthy$/m)
    expect(valueOf(shop, 'SHOP_GATEWAY_URL')).toBe(`http://gateway:${port}`)
  })
})
