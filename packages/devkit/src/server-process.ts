/**
 * The process under a throw-away server of the tests (redis-server.ts, etcd-server.ts): spawned
 * with its output kept (the last 4,000 characters, for a failure's message), stopped by PID
 * (SIGKILL: a crash), paused and resumed (SIGSTOP/SIGCONT), and waited for until it is gone.
 * What the server is — its arguments, its data, when it answers — is the owner's business.
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { readdirSync, readFileSync } from 'node:fs'

/** Something to sleep on, 1 ms at a time, while a process stops (see ServerProcess.pause). */
const PAUSE_CELL = new Int32Array(new SharedArrayBuffer(4))

/** Whether every thread of `pid` is stopped (state T or t in /proc); true where /proc cannot say. */
function allThreadsStopped(pid: number): boolean {
  let tasks: string[]
  try {
    tasks = readdirSync(`/proc/${pid}/task`)
  } catch {
    return true
  }
  for (const task of tasks) {
    let stat: string
    try {
      stat = readFileSync(`/proc/${pid}/task/${task}/stat`, 'utf8')
    } catch {
      continue // a thread that ended meanwhile
    }
    // "pid (comm) state ...": the command may hold spaces and parentheses, the state follows the last ')'.
    const state = stat.charAt(stat.lastIndexOf(')') + 2)
    if (state !== 'T' && state !== 't') return false
  }
  return true
}

export class ServerProcess {
  #child: ChildProcess | undefined
  #exited: Promise<void> = Promise.resolve()
  #log = ''
  /** Rejects when the binary cannot be spawned (ENOENT, EACCES); never settles otherwise. */
  #spawnError: Promise<never> = new Promise(() => {})

  /** @param what how messages name the server, e.g. `redis-server on port 6380`. */
  constructor(readonly what: string) {}

  get running(): boolean {
    return this.#child !== undefined && this.#child.exitCode === null && this.#child.signalCode === null
  }

  /** PID of the running process; throws when it is not running. */
  get pid(): number {
    const pid = this.#child?.pid
    if (pid === undefined || !this.running) throw new Error(`${this.what} is not running`)
    return pid
  }

  /** The last of what the process wrote (stdout and stderr, and a spawn error). */
  get log(): string {
    return this.#log
  }

  /** A promise that rejects if the binary could not be spawned: race it against a readiness probe. */
  get spawnError(): Promise<never> {
    return this.#spawnError
  }

  /** Spawns `bin` with `args`; the log starts empty. Throws when a process is already running. */
  start(bin: string, args: readonly string[], env: NodeJS.ProcessEnv = process.env): void {
    if (this.running) throw new Error(`${this.what} is already running`)
    const child = spawn(bin, args, { stdio: ['ignore', 'pipe', 'pipe'], env })
    this.#child = child
    this.#log = ''
    const keep = (chunk: Buffer) => {
      this.#log = (this.#log + chunk.toString()).slice(-4000)
    }
    child.stdout?.on('data', keep)
    child.stderr?.on('data', keep)
    this.#exited = new Promise((resolve) => {
      child.once('exit', () => resolve())
      // A binary that cannot be spawned (ENOENT) emits 'error' and never 'exit'.
      child.once('error', () => {
        if (child.pid === undefined) resolve()
      })
    })
    this.#spawnError = new Promise<never>((_, reject) =>
      child.once('error', (error) => {
        this.#log += `\n${String(error)}`
        reject(error)
      }),
    )
    this.#spawnError.catch(() => {})
  }

  /** SIGKILL by PID (a crash: nothing saved), and waits until the process is gone. */
  async kill(): Promise<void> {
    this.killNow()
    await this.#exited
  }

  /** SIGSTOP: the process keeps its sockets open and answers nothing. */
  pause(): void {
    const pid = this.pid
    process.kill(pid, 'SIGSTOP')
    // The signal is only queued when kill() returns: each thread stops as it next enters the
    // kernel. Until every thread of a many-threaded server (etcd) has, one may still answer: a
    // clean-clone CI run got an answer from an etcd member just paused. Wait (at most 2 s) until
    // /proc says every thread is stopped; where there is no /proc, return at once.
    const until = performance.now() + 2_000
    while (!allThreadsStopped(pid) && performance.now() < until) Atomics.wait(PAUSE_CELL, 0, 0, 1)
  }

  /** SIGCONT after {@link pause}. */
  resume(): void {
    process.kill(this.pid, 'SIGCONT')
  }

  /** SIGCONT to a paused process, so that it can take the SIGKILL that follows at once. */
  wake(): void {
    const pid = this.#child?.pid
    if (pid === undefined || !this.running) return
    try {
      process.kill(pid, 'SIGCONT')
    } catch {
      // Already gone.
    }
  }

  /** SIGKILL without waiting (the process exit hook's last resort). */
  killNow(): void {
    const pid = this.#child?.pid
    if (pid === undefined || !this.running) return
    try {
      process.kill(pid, 'SIGKILL')
    } catch {
      // Already gone.
    }
  }
}
