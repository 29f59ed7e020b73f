/**
 * Runs N shop instances as child processes (`fork`, with an IPC channel) and is the only one that
 * signals them: SIGSTOP/SIGCONT for the pause chaos, SIGTERM/SIGKILL to stop. It only ever
 * signals PIDs it started, and it continues a stopped child before asking it to exit (a stopped
 * process would not see the request). Children still running when this process exits (Ctrl-C, a
 * crash) are killed then.
 */
import { fork, type ChildProcess } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import type { InstanceStats } from './instance.js'
import { isInstanceMessage, type InstanceMessage, type SupervisorMessage } from './ipc-messages.js'

/** One running instance. */
export interface InstanceProcess {
  readonly id: string
  readonly pid: number
  readonly port: number
  readonly url: string
}

/** A gateway call made under a lock, as an instance reported it. */
export type ExternalCall = Extract<InstanceMessage, { type: 'external-call' }>

/** Options of {@link Supervisor.start}. */
export interface SupervisorOptions {
  /** How many instances, 1 to 32. */
  readonly instances: number
  /** Environment of every instance (REDIS_URL, DATABASE_URL, SHOP_MODE, ...), on top of ours. */
  readonly env: Readonly<Record<string, string>>
  /** Port of the first instance, the others follow; 0 (default) lets each pick a free port. */
  readonly basePort?: number
  /** Instance ids are `<prefix>-1`... Default `shop`. */
  readonly idPrefix?: string
  /** Where the instances' stderr goes: inherited (default) or ignored. */
  readonly stderr?: 'inherit' | 'ignore'
  /** Longest wait for all instances to be ready, in ms. Default 60 000. */
  readonly readyTimeoutMs?: number
  /**
   * The script each child runs; it must speak the IPC protocol of `ipc-messages.ts`. Default the
   * shop instance (`main.ts`); the chaos suite forks its recording workers with it.
   */
  readonly entry?: string
}

const MAIN = fileURLToPath(new URL('./main.ts', import.meta.url))

/** Supervisors not yet stopped: their children are killed when this process exits, whatever the path. */
const live = new Set<Supervisor>()
process.once('exit', () => {
  for (const supervisor of live) supervisor.killNow()
})

interface Child {
  readonly id: string
  process: ChildProcess
  port: number
  stopped: boolean
}

/**
 * The instance processes of one run.
 * @example
 * ```ts
 * const supervisor = await Supervisor.start({ instances: 4, env: { REDIS_URL, DATABASE_URL, SHOP_MODE: 'fenced' } })
 * supervisor.onExternalCall((call) => console.log(call.instance, call.resource))
 * await supervisor.stop()
 * ```
 */
export class Supervisor {
  readonly #children: Child[]
  readonly #listeners = new Set<(call: ExternalCall) => void>()
  readonly #exitListeners = new Set<(id: string, pid: number | undefined) => void>()
  #statsWaiters = new Map<number, (stats: InstanceStats) => void>()
  readonly #finalStats = new Map<string, InstanceStats>()
  #stopping: Promise<void> | undefined
  #options: SupervisorOptions | undefined
  /** Instances killed by {@link Supervisor.kill} and restarted by {@link Supervisor.restart}. */
  #killed = 0

  private constructor(children: Child[]) {
    this.#children = children
  }

  /** Forks the child `id` on `port` with `extraEnv` on top of the options' env; resolves once it listens. */
  #fork(entry: Child, port: number, extraEnv: Readonly<Record<string, string>>): Promise<void> {
    const options = this.#options as SupervisorOptions
    const child = fork(options.entry ?? MAIN, [], {
      execArgv: ['--import', 'tsx'],
      env: { ...process.env, ...options.env, ...extraEnv, SHOP_INSTANCE_ID: entry.id, PORT: String(port) },
      stdio: ['ignore', 'inherit', options.stderr ?? 'inherit', 'ipc'],
    })
    entry.process = child
    entry.stopped = false
    child.on('error', () => {})
    child.once('exit', () => {
      for (const listener of this.#exitListeners) listener(entry.id, child.pid)
    })
    return new Promise<void>((resolve, reject) => {
      child.on('message', (m: unknown) => {
        if (!isInstanceMessage(m)) return
        if (m.type === 'ready') {
          entry.port = m.port
          resolve()
        } else if (m.type === 'failed') reject(new Error(`${entry.id} failed to start: ${m.message}`))
        else this.#onMessage(entry, m)
      })
      child.once('exit', (code, signal) =>
        reject(new Error(`${entry.id} exited before it was ready (${signal ?? `exit ${code}`})`)),
      )
    })
  }

  /** Kills instance `pid` at once (SIGKILL): no drain, no cleanup, as a crash. Resolves true once it has exited. */
  async kill(pid: number): Promise<boolean> {
    const child = this.#children.find((c) => c.process.pid === pid)
    if (child === undefined || !this.owns(pid)) return false
    const exited = new Promise<void>((r) => child.process.once('exit', () => r()))
    child.process.kill('SIGCONT')
    child.process.kill('SIGKILL')
    await exited
    this.#killed++
    return true
  }

  /** Calls `fn` when an instance exits (killed, crashed, or stopped). Returns an unsubscribe function. */
  onExit(fn: (id: string, pid: number | undefined) => void): () => void {
    this.#exitListeners.add(fn)
    return () => this.#exitListeners.delete(fn)
  }

  /** Instances killed so far (by {@link Supervisor.kill}). */
  get killed(): number {
    return this.#killed
  }

  /**
   * Starts instance `id` again on its port (the crowd's URLs stay valid) once it has exited, with
   * `extraEnv` on top of the run's env; resolves once it listens. Refused while stopping.
   */
  async restart(id: string, extraEnv: Readonly<Record<string, string>> = {}): Promise<void> {
    const child = this.#children.find((c) => c.id === id)
    if (child === undefined) throw new Error(`no instance ${id}`)
    if (this.#stopping !== undefined) throw new Error('the supervisor is stopping')
    if (child.process.exitCode === null && child.process.signalCode === null) throw new Error(`${id} is still running`)
    await this.#fork(child, child.port, extraEnv)
  }

  /** Whether instance `id` runs now. */
  isRunning(id: string): boolean {
    const child = this.#children.find((c) => c.id === id)
    return child !== undefined && child.process.pid !== undefined && this.owns(child.process.pid)
  }

  /** Forks the instances and waits until every one listens. On failure, stops those started. */
  static async start(options: SupervisorOptions): Promise<Supervisor> {
    if (!Number.isInteger(options.instances) || options.instances < 1 || options.instances > 32) {
      throw new RangeError(`instances must be an integer from 1 to 32 (got ${options.instances})`)
    }
    const prefix = options.idPrefix ?? 'shop'
    const children: Child[] = []
    const supervisor = new Supervisor(children)
    supervisor.#options = options
    live.add(supervisor)
    const ready: Promise<void>[] = []
    for (let i = 0; i < options.instances; i++) {
      const id = `${prefix}-${i + 1}`
      const port = options.basePort ? options.basePort + i : 0
      const entry = { id, port: 0, stopped: false } as Child
      children.push(entry)
      ready.push(supervisor.#fork(entry, port, {}))
    }
    const timeoutMs = options.readyTimeoutMs ?? 60_000
    let timer: NodeJS.Timeout | undefined
    try {
      await Promise.race([
        Promise.all(ready),
        new Promise((_, reject) => {
          timer = setTimeout(() => reject(new Error(`instances not ready within ${timeoutMs} ms`)), timeoutMs)
        }),
      ])
    } catch (error) {
      await supervisor.stop()
      throw error
    } finally {
      clearTimeout(timer)
    }
    return supervisor
  }

  #onMessage(child: Child, m: InstanceMessage): void {
    if (m.type === 'external-call') {
      for (const listener of this.#listeners) {
        try {
          listener(m)
        } catch {
          // A listener's failure must not take the supervisor down.
        }
      }
    } else if (m.type === 'stats') {
      const pid = child.process.pid
      if (pid !== undefined) this.#statsWaiters.get(pid)?.(m.stats)
    } else if (m.type === 'final-stats') {
      this.#finalStats.set(child.id, m.stats)
    }
  }

  /**
   * The stats each instance sent once drained, right before it exited ({@link Supervisor.stop}),
   * by instance id; an instance killed or still running has none.
   */
  get finalStats(): ReadonlyMap<string, InstanceStats> {
    return this.#finalStats
  }

  /** The running instances. */
  get instances(): InstanceProcess[] {
    return this.#children
      .filter((c) => c.process.pid !== undefined && c.port > 0)
      .map((c) => ({ id: c.id, pid: c.process.pid as number, port: c.port, url: `http://127.0.0.1:${c.port}` }))
  }

  /** Calls `fn` on every gateway call an instance reports. Returns an unsubscribe function. */
  onExternalCall(fn: (call: ExternalCall) => void): () => void {
    this.#listeners.add(fn)
    return () => this.#listeners.delete(fn)
  }

  /** True when `pid` is one of our running instances: the only PIDs we ever signal. */
  owns(pid: number): boolean {
    return this.#children.some(
      (c) => c.process.pid === pid && c.process.exitCode === null && c.process.signalCode === null,
    )
  }

  /** Freezes instance `pid` (SIGSTOP): its event loop, watchdog and sockets stop, as in a long GC pause. */
  freeze(pid: number): boolean {
    const child = this.#children.find((c) => c.process.pid === pid)
    if (child === undefined || !this.owns(pid)) return false
    child.stopped = child.process.kill('SIGSTOP') || child.stopped
    return child.stopped
  }

  /** Resumes instance `pid` (SIGCONT). */
  thaw(pid: number): void {
    const child = this.#children.find((c) => c.process.pid === pid)
    if (child === undefined || !child.stopped) return
    if (this.owns(pid)) child.process.kill('SIGCONT')
    child.stopped = false
  }

  /** Each instance's own counters (see InstanceStats). Instances that do not answer within 5 s are left out. */
  async stats(): Promise<InstanceStats[]> {
    const answers = await Promise.all(
      this.#children.map(
        (c) =>
          new Promise<InstanceStats | undefined>((resolve) => {
            const pid = c.process.pid
            if (pid === undefined || !this.owns(pid) || !c.process.connected) return resolve(undefined)
            const timer = setTimeout(() => resolve(undefined), 5_000)
            this.#statsWaiters.set(pid, (stats) => {
              clearTimeout(timer)
              this.#statsWaiters.delete(pid)
              resolve(stats)
            })
            c.process.send({ type: 'stats' } satisfies SupervisorMessage, (error) => {
              if (error) resolve(undefined)
            })
          }),
      ),
    )
    return answers.filter((s): s is InstanceStats => s !== undefined)
  }

  /**
   * Stops every instance: continues a frozen one, asks each to drain and exit, then SIGTERM
   * after `graceMs`, SIGKILL 3 s later. Resolves when all have exited.
   */
  stop(graceMs = 15_000): Promise<void> {
    this.#stopping ??= Promise.all(
      this.#children.map(async (c) => {
        const child = c.process
        if (child.exitCode !== null || child.signalCode !== null || child.pid === undefined) return
        const exited = new Promise<void>((r) => child.once('exit', () => r()))
        this.thaw(child.pid)
        if (child.connected) child.send({ type: 'shutdown' } satisfies SupervisorMessage, () => {})
        else child.kill('SIGTERM')
        const term = setTimeout(() => child.kill('SIGTERM'), graceMs)
        const kill = setTimeout(() => child.kill('SIGKILL'), graceMs + 3_000)
        await exited
        clearTimeout(term)
        clearTimeout(kill)
      }),
    ).then(() => {
      live.delete(this)
    })
    return this.#stopping
  }

  /** Synchronous last resort for process exit handlers: SIGCONT and SIGKILL every child still running. */
  killNow(): void {
    for (const c of this.#children) {
      const pid = c.process.pid
      if (pid === undefined || !this.owns(pid)) continue
      c.process.kill('SIGCONT')
      c.process.kill('SIGKILL')
    }
  }
}
