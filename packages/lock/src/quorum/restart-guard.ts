/**
 * Quorum mode's delayed restart, done by the clients. A node restarted without persistence has
 * lost the keys of the locks held on it: with it, a second holder can win a majority while the
 * first still holds the lock. Redlock's answer is to keep such a node out for the longest lease;
 * this module makes that automatic and deployment-wide, whatever Locker, process or per-call
 * `ttlMs` granted the lease:
 *
 * - **A record on every node** (scripts/record-lease.ts). Before a Locker grants or renews a lease
 *   of `L` ms, it writes to every node it asks the run_ids of all the nodes it asks, each until at
 *   least `2L` from now (again once what it wrote is `L` old). So while a lease granted by a node
 *   may live, the other nodes list that node's run_id.
 * - **A check at every (re)connection**, the first one too (a process started after the restart
 *   must notice it as well). The node sits out acquires until its `run_id` and the other nodes'
 *   records are read. A node whose run_id is listed has not restarted since it last granted.
 *   Otherwise, if some node lists a run_id that no node has now, a node restarted and may have
 *   forgotten leases that live for as long as that entry: every node not listed sits out that
 *   long (and at least `nodeRestartDelayMs` when that is set). When no such orphan is listed,
 *   the node forgot nothing anyone holds, and takes part at once — a new deployment starts at once.
 * - The check also finds two clients of one server (one `run_id`): a quorum of them is none (a
 *   typed error for every acquire).
 *
 * What it assumes: at most a minority of the nodes lose their data or are cut off at a time (the
 * quorum's own assumption), and the nodes' clocks run at about the same rate (the TTLs do).
 */
import type { Deadlines } from '../deadline.js'
import { InvalidLockOptionError } from '../errors.js'
import { leaseRecordKey } from '../keys.js'
import { readLeaseRecordScript, recordLeaseScript } from '../scripts/record-lease.js'
import type { QuorumNode } from './quorum-node.js'

/** What the guard needs to know. */
export interface RestartGuardOptions {
  readonly prefix: string
  readonly commandTimeoutMs: number
  /**
   * `0`: off (no records, no checks). A number: the least a node found restarted sits out.
   * Undefined: as long as the records say a forgotten lease may live.
   */
  readonly nodeRestartDelayMs: number | undefined
}

/** What the guard keeps per node. */
interface NodeRecord {
  /** The longest lease this Locker has recorded on the node since it (re)connected, ms. */
  recordedMs: number
  /** performance.now() when it last wrote it. */
  recordedAt: number
  /** Which nodes it listed then ({@link RestartGuard.listKey}). */
  recordedFor: number
  /** The node's run_id, once read (kept while the node is down: its last known one). */
  runId: string | undefined
  /**
   * Where the node's check stands since it last (re)connected: its first check in flight, done
   * (its result in `youngUntil`), or failed (tried again later; the node sits out meanwhile).
   */
  state: 'unchecked' | 'checking' | 'checked' | 'failed'
  /** Numbers the checks: only the latest one's result counts (a reconnection starts another). */
  check: number
}

export class RestartGuard {
  readonly #nodes: readonly QuorumNode[]
  readonly #records: NodeRecord[]
  readonly #options: RestartGuardOptions
  readonly #deadlines: Deadlines
  readonly #key: string
  readonly #stop: (() => void)[] = []
  /** Called whenever a check ends (acquires waiting for the nodes' checks look again). */
  readonly #onChecked = new Set<() => void>()
  /** Bumped whenever a node's run_id changes: what was recorded must list the new one. */
  #runIds = 0
  #started = false
  /** Set when two nodes turned out to be one server. */
  misconfigured: InvalidLockOptionError | undefined

  constructor(nodes: readonly QuorumNode[], options: RestartGuardOptions, deadlines: Deadlines) {
    this.#nodes = nodes
    this.#options = options
    this.#deadlines = deadlines
    this.#key = leaseRecordKey(options.prefix)
    this.#records = nodes.map(() => ({
      recordedMs: 0,
      recordedAt: 0,
      recordedFor: -1,
      runId: undefined,
      state: 'unchecked',
      check: 0,
    }))
  }

  get enabled(): boolean {
    return this.#options.nodeRestartDelayMs !== 0
  }

  /**
   * Starts checking the nodes (with the first acquire: a Locker's constructor does no I/O): each
   * now if its connection is ready (or lazy: the check makes it connect), else when it becomes
   * ready, and again at every reconnection. With the guard off only `run_id` is checked.
   */
  start(): void {
    if (this.#started) return
    this.#started = true
    for (const node of this.#nodes) {
      if (this.enabled) node.youngUntil = Number.POSITIVE_INFINITY
      this.#stop.push(node.backend.connection.onReady(() => this.#check(node)))
      node.backend.connection.watch()
      const status = (node.client as { status?: unknown }).status
      if (status === 'ready' || status === 'wait' || status === undefined) this.#check(node)
      // Connecting: checked when it is ready; the first acquires wait for that (bounded).
      else if (!node.backend.connection.down) this.#records[node.index]!.state = 'checking'
    }
  }

  stop(): void {
    for (const stop of this.#stop.splice(0)) stop()
  }

  /**
   * Resolves once no reachable node is being checked for the first time since it (re)connected,
   * or after `ms`: the first acquire of a Locker is sent to every node that answers, not only to
   * the first majority checked.
   */
  untilChecked(ms: number): Promise<void> {
    if (this.#decided()) return Promise.resolve()
    return new Promise((resolve) => {
      const done = (): void => {
        clearTimeout(timer)
        this.#onChecked.delete(look)
        resolve()
      }
      const look = (): void => {
        if (this.#decided()) done()
      }
      const timer = setTimeout(done, Math.max(0, ms))
      timer.unref()
      this.#onChecked.add(look)
    })
  }

  /** Whether an acquire has no check to wait for. */
  #decided(): boolean {
    return this.#nodes.every((node) => {
      const state = this.#records[node.index]!.state
      return state === 'checked' || state === 'failed' || node.backend.connection.down
    })
  }

  /**
   * Before a lease of `ttlMs` is granted or renewed on `nodes`: sends each (but those that sit
   * out) the record listing them all, unless what it last sent there still covers it (as long a
   * lease, the same nodes, not yet `ttlMs` old). Sent ahead of the acquire on the same connection.
   */
  beforeLease(nodes: readonly QuorumNode[], ttlMs: number): void {
    if (!this.enabled) return
    const now = performance.now()
    // Never a node that sits out: listed, it would pass for one that has not restarted.
    let sitting = false
    for (const node of nodes) if (node.youngUntil > now) sitting = true
    const asked = sitting ? nodes.filter((node) => node.youngUntil <= now) : nodes
    const listed = this.#listKey(asked)
    let runIds: string | undefined
    for (const node of asked) {
      const r = this.#records[node.index]!
      if (ttlMs <= r.recordedMs && now - r.recordedAt < r.recordedMs && r.recordedFor === listed) continue
      runIds ??= asked.flatMap((n) => this.#records[n.index]!.runId ?? []).join(' ')
      r.recordedMs = Math.max(ttlMs, r.recordedMs)
      r.recordedAt = now
      r.recordedFor = listed
      node.client.eval(recordLeaseScript.lua, 1, this.#key, r.recordedMs, runIds).catch(() => {
        r.recordedMs = 0 // sent again next time
      })
    }
  }

  /**
   * Names a set of nodes under the nodes' current run_ids: which nodes as bits (up to 30 nodes;
   * past that NaN, equal to nothing: the record is sent each time), and the run_ids' version.
   */
  #listKey(asked: readonly QuorumNode[]): number {
    if (this.#nodes.length > 30) return Number.NaN
    let mask = 0
    for (const node of asked) mask |= 1 << node.index
    return this.#runIds * 2 ** 30 + mask
  }

  /**
   * Reads the node's run_id and every node's record, and decides whether it sits out (see the
   * top of this file). A check that fails (no answer in time) is tried again after
   * `commandTimeoutMs` while the connection is up; until one succeeds the node sits out.
   */
  #check(node: QuorumNode): void {
    const r = this.#records[node.index]!
    const guarding = this.enabled
    const mine = ++r.check
    r.state = 'checking'
    if (guarding) {
      r.recordedMs = 0 // what we recorded there may be gone: written again once it takes part
      node.youngUntil = Number.POSITIVE_INFINITY
    }
    const decide = async (): Promise<void> => {
      const runId = await this.#runIdOf(node)
      if (r.check !== mine) return
      if (runId !== r.runId) this.#runIds++
      r.runId = runId
      this.#sameServer(node, runId)
      if (!guarding) return
      const listed = await this.#listed()
      if (r.check !== mine) return
      node.youngUntil = this.#sitOutUntil(runId, listed)
    }
    decide().then(
      () => {
        if (r.check !== mine) return
        r.state = 'checked'
        for (const look of [...this.#onChecked]) look()
      },
      () => {
        if (r.check !== mine) return
        r.state = 'failed'
        for (const look of [...this.#onChecked]) look()
        const again = setTimeout(() => {
          if (r.check === mine && !node.backend.connection.down) this.#check(node)
        }, this.#options.commandTimeoutMs)
        again.unref()
      },
    )
  }

  /**
   * Until when (performance.now()) a node with `runId` sits out, given the run_ids the nodes list
   * and the ms each entry has left: not at all when it is listed (it has not restarted since it
   * last granted) or when no listed run_id is orphaned (no node has it now: nobody forgot a live
   * lease); else as long as the longest orphaned entry lives.
   */
  #sitOutUntil(runId: string | undefined, listed: ReadonlyMap<string, number>): number {
    if (runId !== undefined && listed.has(runId)) return 0
    const current = new Set(this.#records.flatMap((r) => r.runId ?? []))
    let longest = -1
    for (const [id, ms] of listed) if (!current.has(id) && ms > longest) longest = ms
    if (longest < 0) return 0
    return performance.now() + Math.max(longest, this.#options.nodeRestartDelayMs ?? 0)
  }

  async #runIdOf(node: QuorumNode): Promise<string | undefined> {
    const client = node.client as { info(section: string): Promise<string> }
    const info = await this.#deadlines.race(client.info('server'), this.#options.commandTimeoutMs)
    return /^run_id:(\w+)/m.exec(info)?.[1]
  }

  /** The run_ids the reachable nodes' records list, each with the longest time an entry has left. */
  async #listed(): Promise<Map<string, number>> {
    const reachable = this.#nodes.filter((node) => !node.backend.connection.down)
    const read = (node: QuorumNode) =>
      this.#deadlines.race(
        readLeaseRecordScript.run(node.client, { record: this.#key }, {}) as Promise<unknown[]>,
        this.#options.commandTimeoutMs,
      )
    const replies = await Promise.allSettled(reachable.map(read))
    const listed = new Map<string, number>()
    for (const reply of replies) {
      if (reply.status !== 'fulfilled' || !Array.isArray(reply.value)) continue
      for (let i = 0; i + 1 < reply.value.length; i += 2) {
        const id = String(reply.value[i])
        const ms = Number(reply.value[i + 1])
        if (Number.isFinite(ms) && ms > (listed.get(id) ?? -1)) listed.set(id, ms)
      }
    }
    return listed
  }

  #sameServer(node: QuorumNode, runId: string | undefined): void {
    if (runId === undefined) return
    const twin = this.#records.findIndex((other, i) => i !== node.index && other.runId === runId)
    if (twin < 0) return
    const [a, b] = twin < node.index ? [twin, node.index] : [node.index, twin]
    this.misconfigured ??= new InvalidLockOptionError(
      `redis[${b}]`,
      `must reach another Redis server than redis[${a}]: both answer with run_id ${runId}, and quorum mode needs independent masters`,
      'a client of the same server',
    )
  }
}
