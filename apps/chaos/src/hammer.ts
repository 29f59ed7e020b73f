/**
 * The mutual-exclusion hammer: N processes (16 by default), each its own Locker and connections,
 * hammer one resource with 5-20 ms leases over one spawned redis-server or a quorum of three,
 * and an external checker (hammer-check.ts) reads what they recorded on the machine's monotonic
 * clock: no two grants held at once (until release or the end of their validity, whichever came
 * first), tokens growing with the grants. Its unprotected reading — a holder that counts itself
 * holding until it releases, lease or not — is checked on the same records and must show
 * overlaps, or the run did not bite.
 */
import { spawn } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { startRedisServer, type RedisServer } from '@fencelock/devkit/redis-server'
import { checkGrants, type GrantRecord, type HammerCheck } from './hammer-check.js'

/** Options of {@link runHammer}. */
export interface HammerOptions {
  /** `single`: one redis-server; `quorum`: three. */
  readonly mode: 'single' | 'quorum'
  /** Processes. Default 16. */
  readonly processes?: number
  /** How long each process hammers, ms. Default 4 000. */
  readonly durationMs?: number
}

/** What one run found. */
export interface HammerResult {
  readonly mode: 'single' | 'quorum'
  readonly processes: number
  /** The lock's promise: grants held until release or the end of their validity. */
  readonly check: HammerCheck
  /** The unprotected reading of the same records: held until release. */
  readonly naive: HammerCheck
  /** Acquires that ended in an error, by class. */
  readonly errors: Record<string, number>
  /** Processes that recorded at least one grant. */
  readonly served: number
  readonly seconds: number
}

const WORKER = fileURLToPath(new URL('./hammer-worker.ts', import.meta.url))

/** Runs the hammer once; every process and server it started is gone when it returns. */
export async function runHammer(options: HammerOptions): Promise<HammerResult> {
  const began = performance.now()
  const processes = options.processes ?? 16
  const durationMs = options.durationMs ?? 4_000
  const dir = mkdtempSync(join(tmpdir(), 'fencelock-hammer-'))
  const servers: RedisServer[] = []
  try {
    for (let i = 0; i < (options.mode === 'quorum' ? 3 : 1); i++) servers.push(await startRedisServer())
    const resource = `hammer:${randomBytes(4).toString('hex')}`
    const runs = Array.from({ length: processes }, (_, i) => {
      const out = join(dir, `p${i}.json`)
      const child = spawn(process.execPath, ['--import', 'tsx', WORKER], {
        stdio: ['ignore', 'ignore', 'inherit'],
        env: {
          ...process.env,
          HAMMER_URLS: servers.map((s) => s.url).join(','),
          HAMMER_RESOURCE: resource,
          HAMMER_DURATION_MS: String(durationMs),
          HAMMER_PROCESS: String(i),
          HAMMER_OUT: out,
        },
      })
      return new Promise<{ records: GrantRecord[]; errors: Record<string, number> }>((resolve, reject) => {
        const timer = setTimeout(() => child.kill('SIGKILL'), durationMs + 60_000)
        child.once('error', reject)
        child.once('exit', (code, signal) => {
          clearTimeout(timer)
          if (code !== 0) return reject(new Error(`hammer process ${i} exited with ${code ?? signal}`))
          resolve(JSON.parse(readFileSync(out, 'utf8')) as { records: GrantRecord[]; errors: Record<string, number> })
        })
      })
    })
    const results = await Promise.all(runs)
    const records = results.flatMap((r) => r.records)
    const errors: Record<string, number> = {}
    for (const r of results) for (const [name, n] of Object.entries(r.errors)) errors[name] = (errors[name] ?? 0) + n
    return {
      mode: options.mode,
      processes,
      check: checkGrants(records, 'validity'),
      naive: checkGrants(records, 'release'),
      errors,
      served: results.filter((r) => r.records.length > 0).length,
      seconds: (performance.now() - began) / 1000,
    }
  } finally {
    await Promise.all(servers.map((s) => s.dispose()))
    rmSync(dir, { recursive: true, force: true })
  }
}
