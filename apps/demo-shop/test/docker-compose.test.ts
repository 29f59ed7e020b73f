// docker-compose.yml cannot run here (no Docker): check it the way CI can — `docker-compose
// config -q` — and that what it mounts and scrapes exists and matches.
import { spawnSync } from 'node:child_process'
import { existsSync, readFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..')
const composeFile = join(root, 'docker-compose.yml')

describe('docker-compose.yml', () => {
  it('is valid for docker-compose config -q', () => {
    const result = spawnSync('docker-compose', ['-f', composeFile, 'config', '-q'], { cwd: root, encoding: 'utf8' })
    expect(result.error, 'docker-compose must be installed (apt-get install docker-compose)').toBeUndefined()
    expect(result.stderr).toBe('')
    expect(result.status).toBe(0)
  })

  it('has the services of the demo, and every file it mounts or builds from exists', () => {
    const text = readFileSync(composeFile, 'utf8')
    for (const service of ['redis', 'postgres', 'shop', 'prometheus', 'grafana']) expect(text).toMatch(new RegExp(`^  ${service}:$`, 'm'))
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
})
