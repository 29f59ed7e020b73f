/**
 * Runs Debian's `prometheus` on a free loopback port with a throw-away data directory, and talks
 * to its HTTP API. Stopped by PID: by `stop()`, in `afterAll` of the test file that started it,
 * and (SIGKILL, synchronously) when the worker process exits, so no server outlives a failed test.
 * A missing binary fails loudly: these tests never skip.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll } from 'vitest'
import { freePort } from '@fencelock/devkit/net'

export const PROMETHEUS_BIN = process.env.PROMETHEUS_BIN ?? 'prometheus'
export const PROMTOOL_BIN = process.env.PROMTOOL_BIN ?? 'promtool'

const live = new Set<PrometheusServer>()
afterAll(async () => {
  await Promise.all([...live].map((p) => p.stop()))
})
process.on('exit', () => {
  for (const p of live) p.killNow()
})

/** Throws a clear error when `bin` cannot be run (Debian's `prometheus` package provides both). */
export function assertInstalled(bin: string): void {
  const probe = spawnSync(bin, ['--version'], { encoding: 'utf8' })
  if (probe.error || probe.status !== 0) {
    throw new Error(
      `${bin} is not runnable (${probe.error?.message ?? `exit ${probe.status}`}); install Debian's prometheus package (apt-get install prometheus), as .ci/run does`,
    )
  }
}

export interface PrometheusOptions {
  /** prometheus.yml contents; `rule_files` paths must be absolute. */
  readonly config: string
}

/** One Prometheus process. Use {@link startPrometheus}. */
export class PrometheusServer {
  readonly url: string
  readonly #child: ChildProcess
  readonly #dir: string
  readonly #exited: Promise<void>
  #log = ''

  /** @internal */
  constructor(child: ChildProcess, port: number, dir: string) {
    this.#child = child
    this.#dir = dir
    this.url = `http://127.0.0.1:${port}`
    child.stdout?.on('data', (d: Buffer) => this.#appendLog(d))
    child.stderr?.on('data', (d: Buffer) => this.#appendLog(d))
    this.#exited = new Promise((resolve) => child.once('exit', () => resolve()))
  }

  get pid(): number | undefined {
    return this.#child.pid
  }

  get exited(): boolean {
    return this.#child.exitCode !== null || this.#child.signalCode !== null
  }

  /** The last few kB of Prometheus's log, for failure messages. */
  get log(): string {
    return this.#log
  }

  #appendLog(chunk: Buffer): void {
    this.#log = (this.#log + chunk.toString('utf8')).slice(-8_000)
  }

  /** GET or POST (form-encoded) `/api/v1/<path>`; resolves with the parsed JSON, whatever the status. */
  async api<T = unknown>(path: string, params: Record<string, string> = {}, method: 'GET' | 'POST' = 'GET'): Promise<ApiResponse<T>> {
    const body = new URLSearchParams(params)
    const res =
      method === 'POST'
        ? await fetch(`${this.url}/api/v1/${path}`, { method, body, headers: { 'content-type': 'application/x-www-form-urlencoded' } })
        : await fetch(`${this.url}/api/v1/${path}?${body}`)
    return { httpStatus: res.status, ...((await res.json()) as Omit<ApiResponse<T>, 'httpStatus'>) }
  }

  /** An instant query that must succeed; its vector result. */
  async query(expr: string, time?: number): Promise<VectorSample[]> {
    const params: Record<string, string> = { query: expr }
    if (time !== undefined) params.time = String(time)
    const res = await this.api<{ resultType: string; result: VectorSample[] }>('query', params, 'POST')
    if (res.status !== 'success' || !res.data) throw new Error(`query ${expr} failed: ${res.errorType}: ${res.error}`)
    if (res.data.resultType !== 'vector') throw new Error(`query ${expr} returned a ${res.data.resultType}`)
    return res.data.result
  }

  /** Stops the process by PID (SIGTERM, then SIGKILL after 5 s) and removes its data directory. */
  async stop(): Promise<void> {
    if (!live.delete(this)) return
    if (!this.exited) {
      this.#child.kill('SIGTERM')
      const timer = setTimeout(() => this.#child.kill('SIGKILL'), 5_000)
      await this.#exited
      clearTimeout(timer)
    }
    rmSync(this.#dir, { recursive: true, force: true })
  }

  /** @internal Synchronous last resort at process exit. */
  killNow(): void {
    if (!this.exited) this.#child.kill('SIGKILL')
    rmSync(this.#dir, { recursive: true, force: true })
  }
}

export interface ApiResponse<T> {
  httpStatus: number
  status: 'success' | 'error'
  data?: T
  errorType?: string
  error?: string
}

export interface VectorSample {
  metric: Record<string, string>
  value: [number, string]
}

/**
 * Starts Prometheus with `config` (prometheus.yml text; `rule_files` paths must be absolute) and
 * resolves once `/-/ready` answers 200. Retries on another port if the first one was taken.
 */
export async function startPrometheus(options: PrometheusOptions): Promise<PrometheusServer> {
  assertInstalled(PROMETHEUS_BIN)
  let lastError: unknown
  for (let attempt = 0; attempt < 3; attempt++) {
    const dir = mkdtempSync(join(tmpdir(), 'fencelock-prometheus-'))
    const configFile = join(dir, 'prometheus.yml')
    writeFileSync(configFile, options.config)
    const port = await freePort()
    const child = spawn(
      PROMETHEUS_BIN,
      [
        `--config.file=${configFile}`,
        `--storage.tsdb.path=${join(dir, 'data')}`,
        `--web.listen-address=127.0.0.1:${port}`,
        '--log.level=warn',
      ],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    )
    const server = new PrometheusServer(child, port, dir)
    live.add(server)
    try {
      await waitReady(server, 20_000)
      return server
    } catch (error) {
      lastError = error
      await server.stop()
    }
  }
  throw lastError
}

async function waitReady(server: PrometheusServer, ms: number): Promise<void> {
  const end = performance.now() + ms
  while (performance.now() < end) {
    if (server.exited) throw new Error(`prometheus exited before it was ready:\n${server.log}`)
    try {
      const res = await fetch(`${server.url}/-/ready`)
      if (res.status === 200) return
    } catch {
      // Not listening yet.
    }
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
  throw new Error(`prometheus was not ready within ${ms} ms:\n${server.log}`)
}
