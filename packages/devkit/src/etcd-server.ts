/**
 * Throw-away etcd members and clusters, for the tests: a single member or a cluster of N on free
 * loopback ports, each with a data directory of its own in the temporary directory, kill -9,
 * SIGSTOP/SIGCONT and restart on the same directory (what it committed is kept, as after a crash).
 * Runs Debian's `etcd` (package etcd-server, 3.4) from PATH, or `ETCD_BIN`. Every member is
 * stopped by PID with {@link stopAllEtcdServers}, and again (SIGKILL, synchronously) when the
 * process exits.
 *
 * No Vitest here: plain processes use it too. A test file adds `afterAll(stopAllEtcdServers)`.
 */
import { randomBytes } from 'node:crypto'
import { mkdtempSync, rmSync } from 'node:fs'
import { get, request } from 'node:http'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { CannotStartError } from './cli.js'
import { freePort } from './net.js'
import { ServerProcess } from './server-process.js'

const HOST = '127.0.0.1'
const live = new Set<EtcdMember>()

/** One etcd member (process). Use {@link startEtcdServer} or {@link startEtcdCluster}. */
export class EtcdMember {
  readonly name: string
  readonly clientPort: number
  readonly peerPort: number
  readonly dir: string
  #initialCluster = ''
  #clusterToken = ''
  #timing: EtcdTiming = {}
  readonly #process: ServerProcess
  /** Started once: a restart joins the cluster it already belongs to. */
  #started = false

  /** @internal */
  constructor(name: string, clientPort: number, peerPort: number, dir: string) {
    this.name = name
    this.clientPort = clientPort
    this.peerPort = peerPort
    this.dir = dir
    this.#process = new ServerProcess(`etcd member ${name}`)
  }

  /** @internal Every member's `name=peer URL`, and the token the members of one cluster share. */
  join(initialCluster: string, token: string, timing: EtcdTiming = {}): void {
    this.#initialCluster = initialCluster
    this.#clusterToken = token
    this.#timing = timing
  }

  /** `127.0.0.1:<client port>`, as etcd3's `hosts` takes it. */
  get endpoint(): string {
    return `${HOST}:${this.clientPort}`
  }

  get peerUrl(): string {
    return `http://${HOST}:${this.peerPort}`
  }

  get running(): boolean {
    return this.#process.running
  }

  /** PID of the running process; throws when it is not running. */
  get pid(): number {
    return this.#process.pid
  }

  /** The last lines etcd logged (for a failure's message). */
  get log(): string {
    return this.#process.log
  }

  /** Spawns the process (it answers once the cluster has a leader: {@link waitHealthy}). */
  spawn(): void {
    if (this.running) throw new Error(`etcd member ${this.name} is already running`)
    const client = `http://${HOST}:${this.clientPort}`
    const args = [
      '--name', this.name,
      '--data-dir', this.dir,
      '--listen-client-urls', client,
      '--advertise-client-urls', client,
      '--listen-peer-urls', this.peerUrl,
      '--initial-advertise-peer-urls', this.peerUrl,
      '--initial-cluster', this.#initialCluster,
      '--initial-cluster-state', this.#started ? 'existing' : 'new',
      '--initial-cluster-token', this.#clusterToken,
      '--log-level', 'warn',
    ]
    const { heartbeatMs, electionTimeoutMs } = this.#timing
    if (heartbeatMs !== undefined) args.push('--heartbeat-interval', String(heartbeatMs))
    if (electionTimeoutMs !== undefined) args.push('--election-timeout', String(electionTimeoutMs))
    this.#started = true
    this.#process.start(etcdBin(), args)
    live.add(this)
  }

  /** Resolves once the member says it is healthy (a leader is elected); rejects after `ms`. */
  async waitHealthy(ms = 20_000): Promise<void> {
    const deadline = performance.now() + ms
    while (performance.now() < deadline) {
      if (!this.running) break
      // Healthy, and the member that answers is this one: a port another etcd took meanwhile
      // (freePort() only found it free) answers healthy too, for someone else's cluster.
      if ((await healthy(this.clientPort)) && (await answersAs(this.clientPort, this.name))) return
      await new Promise((r) => setTimeout(r, 50))
    }
    throw new Error(`etcd member ${this.name} was not healthy on port ${this.clientPort} within ${ms} ms:\n${this.log}`)
  }

  /** kill -9 by PID, and waits until the process is gone. Its data directory stays. */
  async kill(): Promise<void> {
    await this.#process.kill()
  }

  /** SIGSTOP: the process keeps its sockets open and answers nothing. */
  pause(): void {
    this.#process.pause()
  }

  /** SIGCONT after {@link pause}. */
  resume(): void {
    this.#process.resume()
  }

  /** kill -9, then starts again on the same ports and data directory (what it committed is kept). */
  async restart(): Promise<void> {
    await this.kill()
    this.spawn()
  }

  /** Stops the process for good (a paused one too) and removes its directory. */
  async dispose(): Promise<void> {
    this.#process.wake()
    await this.kill()
    live.delete(this)
    rmSync(this.dir, { recursive: true, force: true })
  }

  /** @internal Synchronous last-resort kill for the process exit hook. */
  killNow(): void {
    this.#process.killNow()
    rmSync(this.dir, { recursive: true, force: true })
  }
}

/**
 * Raft's timing, etcd's `--heartbeat-interval` and `--election-timeout` (defaults 100 and 1,000 ms;
 * etcd wants the election timeout at least 5 heartbeats). A long election timeout makes the
 * window after a leader's death, when the survivors answer nothing, long enough to test.
 */
export interface EtcdTiming {
  readonly heartbeatMs?: number
  readonly electionTimeoutMs?: number
}

/** Spawned etcd members that form one cluster. */
export interface EtcdCluster {
  readonly members: readonly EtcdMember[]
  /** Every member's client endpoint, for etcd3's `hosts`. */
  readonly endpoints: readonly string[]
  /** Stops every member and removes their directories. */
  dispose(): Promise<void>
}

/**
 * Spawns a cluster of `size` members on free loopback ports and resolves once every member is
 * healthy.
 * @throws CannotStartError when the etcd binary cannot be run (not installed).
 */
export async function startEtcdCluster(size: number, timing: EtcdTiming = {}): Promise<EtcdCluster> {
  // A port found free can be taken by another process before etcd binds it (the tests of two
  // packages spawn members side by side): then the cluster is started again on other ports.
  for (let attempt = 1; ; attempt++) {
    try {
      return await startClusterOnce(size, timing)
    } catch (error) {
      if (error instanceof CannotStartError || attempt === 3) throw error
    }
  }
}

async function startClusterOnce(size: number, timing: EtcdTiming): Promise<EtcdCluster> {
  // Names and the token unique per cluster: members of two clusters spawned side by side never
  // join each other, and a member can tell that the one answering on its port is itself.
  const id = randomBytes(6).toString('hex')
  const members: EtcdMember[] = []
  for (let i = 0; i < size; i++) {
    const dir = mkdtempSync(join(tmpdir(), 'fencelock-etcd-'))
    members.push(new EtcdMember(`m${i}-${id}`, await freePort(), await freePort(), dir))
  }
  const initial = members.map((m) => `${m.name}=${m.peerUrl}`).join(',')
  const token = `fencelock-${id}`
  for (const m of members) {
    m.join(initial, token, timing)
    m.spawn()
  }
  try {
    await Promise.all(members.map((m) => m.waitHealthy()))
  } catch (error) {
    const missing = members.every((m) => /ENOENT|EACCES/.test(m.log))
    await Promise.all(members.map((m) => m.dispose()))
    if (missing)
      throw new CannotStartError(`${etcdBin()} cannot be run: install Debian's etcd-server, or set ETCD_BIN`, {
        cause: error,
      })
    throw error
  }
  return {
    members,
    endpoints: members.map((m) => m.endpoint),
    dispose: async () => {
      await Promise.all(members.map((m) => m.dispose()))
    },
  }
}

/** A single etcd member on free loopback ports, healthy. */
export async function startEtcdServer(): Promise<EtcdMember> {
  const cluster = await startEtcdCluster(1)
  return cluster.members[0]!
}

/** Stops every member this module spawned in this process. */
export async function stopAllEtcdServers(): Promise<void> {
  await Promise.all([...live].map((m) => m.dispose()))
}

process.once('exit', () => {
  for (const m of live) m.killNow()
})

/** The etcd binary: `ETCD_BIN`, else `etcd` from PATH. */
export function etcdBin(): string {
  return process.env.ETCD_BIN || 'etcd'
}

/** Whether the member on `port` answers `/health` with `"health":"true"` within 1 s. */
function healthy(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const request = get({ host: HOST, port, path: '/health', timeout: 1_000 }, (response) => {
      let body = ''
      response.on('data', (chunk: Buffer) => (body += chunk.toString()))
      response.on('end', () => resolve(/"health"\s*:\s*"true"/.test(body)))
    })
    request.on('timeout', () => request.destroy())
    request.on('error', () => resolve(false))
  })
}

/** Whether the member answering on `port` is the one named `name` (etcd's member list, within 1 s). */
export function answersAs(port: number, name: string): Promise<boolean> {
  return new Promise((resolve) => {
    const body = '{}'
    const call = request(
      { host: HOST, port, path: '/v3/cluster/member/list', method: 'POST', timeout: 1_000, headers: { 'content-type': 'application/json', 'content-length': body.length } },
      (response) => {
        let text = ''
        response.on('data', (chunk: Buffer) => (text += chunk.toString()))
        response.on('end', () => {
          try {
            const list = JSON.parse(text) as { header?: { member_id?: string }; members?: { ID?: string; name?: string }[] }
            const me = list.members?.find((m) => m.name === name)
            resolve(me !== undefined && me.ID === list.header?.member_id)
          } catch {
            resolve(false)
          }
        })
      },
    )
    call.on('timeout', () => call.destroy())
    call.on('error', () => resolve(false))
    call.end(body)
  })
}
