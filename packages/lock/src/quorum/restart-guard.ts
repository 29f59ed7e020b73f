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
 * - **A node that lost its data without restarting** (FLUSHALL, a DEL of the prefix's keys,
 *   eviction) keeps its run_id. So each node carries a marker (scripts/node-marker.ts), a random
 *   epoch with no expiry, read (and created when missing) by the check: a node is listed as
 *   `<run_id>/<epoch>`, and one that lost its data comes back under a new identity, its old one
 *   orphaned in the other nodes' records, exactly like a restarted node. A grant that finds the
 *   resource's token counter missing checks the marker in its script (a node that lost a held
 *   lock's key lost that counter too), as do every queued try, raise and the record's refresh: a
 *   node found without it sits out at once and is checked again (scripts/node-marker.ts).
 * - The check also reads the node's eviction policy: a node that may evict a held lock's key
 *   (`maxmemory` set, a policy other than `noeviction`) takes no part in acquires.
 *
 * What it assumes: at most a minority of the nodes lose their data or are cut off at a time (the
 * quorum's own assumption), and the nodes' clocks run at about the same rate (the TTLs do).
 */
import type { Deadlines } from '../deadline.js'
import { InvalidLockOptionError } from '../errors.js'
import { leaseRecordKey, nodeMarkerKey } from '../keys.js'
import { newOwnerId } from '../owner-id.js'
import { isMarkerLost, markNodeScript } from '../scripts/node-marker.js'
import { readLeaseRecordScript, recordLeaseScript } from '../scripts/record-lease.js'
import { STALL_MS, type QuorumNode } from './quorum-node.js'

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
   * What the records list the node as: its run_id and its marker's epoch (`<run_id>/<epoch>`),
   * or the run_id alone with the guard off. A restart changes the first, a loss of data the second.
   */
  identity: string | undefined
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
  readonly #markerKey: string
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
    this.#markerKey = nodeMarkerKey(options.prefix)
    this.#records = nodes.map(() => ({
      recordedMs: 0,
      recordedAt: 0,
      recordedFor: -1,
      runId: undefined,
      identity: undefined,
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
      if (this.enabled) node.onDataLost = () => this.#dataLost(node)
      this.#stop.push(node.backend.connection.onReady(() => this.#check(node)))
      node.backend.connection.watch()
      const state = node.client.state
      if (state === 'ready' || state === 'lazy') this.#check(node)
      // Connecting: checked when it is ready; the first acquires wait for that (bounded).
      else if (!node.backend.connection.down) this.#records[node.index]!.state = 'checking'
    }
  }

  stop(): void {
    for (const stop of this.#stop.splice(0)) stop()
  }

  /**
   * Resolves once no reachable node is being checked for the first time since it (re)connected;
   * or once a majority can take part and {@link STALL_MS} has passed since the wait began (2 ms
   * if it has already): a node whose check does not end — stalled, cut off — is simply not
   * counted, and the healthy majority grants, while a node merely a little slower still gets the
   * first acquire; or after `ms`.
   */
  untilChecked(ms: number): Promise<void> {
    if (this.#decided()) return Promise.resolve()
    const start = performance.now()
    const quorum = Math.floor(this.#nodes.length / 2) + 1
    return new Promise((resolve) => {
      let grace: ReturnType<typeof setTimeout> | undefined
      const done = (): void => {
        clearTimeout(timer)
        clearTimeout(grace)
        this.#onChecked.delete(look)
        resolve()
      }
      const look = (): void => {
        if (this.#decided()) return done()
        if (grace !== undefined) return
        let taking = 0
        for (const node of this.#nodes) if (node.grants) taking++
        if (taking < quorum) return
        grace = setTimeout(done, Math.max(2, start + STALL_MS - performance.now()))
        grace.unref()
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
      const epoch = node.epoch
      if (epoch === undefined) continue // not checked yet: it takes no part
      if (ttlMs <= r.recordedMs && now - r.recordedAt < r.recordedMs && r.recordedFor === listed) continue
      runIds ??= asked.flatMap((n) => this.#records[n.index]!.identity ?? []).join(' ')
      r.recordedMs = Math.max(ttlMs, r.recordedMs)
      r.recordedAt = now
      r.recordedFor = listed
      node.client.eval(recordLeaseScript.lua, 2, this.#key, this.#markerKey, r.recordedMs, runIds, epoch).then(
        (reply) => {
          if (!isMarkerLost(reply)) return
          r.recordedMs = 0
          this.#dataLost(node)
        },
        () => {
          r.recordedMs = 0 // sent again next time
        },
      )
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
      // One round trip: INFO, the marker and the eviction policy go out together.
      const [runId, epoch, evicts] = await Promise.all([
        this.#runIdOf(node),
        guarding ? this.#markerOf(node) : undefined,
        this.#evictionOf(node),
      ])
      if (r.check !== mine) return
      const identity = guarding && runId !== undefined ? `${runId}/${epoch}` : runId
      if (identity !== r.identity) this.#runIds++
      r.runId = runId
      r.identity = identity
      node.epoch = epoch
      node.evicts = evicts
      this.#sameServer(node, runId)
      if (!guarding) return
      const listed = await this.#listed(identity, (late) => {
        // A record that came after the decision: it may list an orphan the others did not.
        if (r.check === mine) node.youngUntil = Math.max(node.youngUntil, this.#sitOutUntil(identity, late))
      })
      if (r.check !== mine) return
      node.youngUntil = this.#sitOutUntil(identity, listed)
    }
    decide().then(
      () => {
        if (r.check !== mine) return
        r.state = 'checked'
        node.checkFailure = undefined
        for (const look of [...this.#onChecked]) look()
      },
      (error: unknown) => {
        if (r.check !== mine) return
        r.state = 'failed'
        node.checkFailure = error instanceof Error ? error.message : String(error)
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
  #sitOutUntil(identity: string | undefined, listed: ReadonlyMap<string, number>): number {
    if (identity !== undefined && listed.has(identity)) return 0
    const current = new Set(this.#records.flatMap((r) => r.identity ?? []))
    let longest = -1
    for (const [id, ms] of listed) if (!current.has(id) && ms > longest) longest = ms
    if (longest < 0) return 0
    return performance.now() + Math.max(longest, this.#options.nodeRestartDelayMs ?? 0)
  }

  /**
   * A call found the node's marker gone or changed: it lost its data without restarting (or
   * restarted, and its connection has not said so yet). It sits out at once and is checked again,
   * like a node that (re)connected; a check in flight already will find it out.
   */
  #dataLost(node: QuorumNode): void {
    node.youngUntil = Number.POSITIVE_INFINITY
    if (this.#records[node.index]!.state === 'checking') return
    this.#check(node)
  }

  /** The node marker's epoch, set to a fresh one when the node has none (markNodeScript). */
  async #markerOf(node: QuorumNode): Promise<string> {
    const reply = await markNodeScript.run(
      node.client,
      { marker: this.#markerKey },
      { epoch: newOwnerId() },
      { deadlines: this.#deadlines, ms: this.#options.commandTimeoutMs },
    )
    if (typeof reply !== 'string') throw new TypeError(`unexpected reply from the node marker: ${String(reply)}`)
    return reply
  }

  /**
   * Why the node may evict a held lock's key (see {@link QuorumNode.evicts}): a `maxmemory` set and
   * a policy other than `noeviction`. Undefined when it cannot, or when CONFIG GET is refused
   * (ACLs, a renamed command): then nothing is known, and docs/LOCK.md says what to check.
   */
  async #evictionOf(node: QuorumNode): Promise<string | undefined> {
    let reply: unknown
    try {
      reply = await this.#deadlines.race(
        node.client.call('CONFIG', 'GET', 'maxmemory*'),
        this.#options.commandTimeoutMs,
      )
    } catch {
      return undefined
    }
    if (!Array.isArray(reply)) return undefined
    const config = new Map<string, string>()
    for (let i = 0; i + 1 < reply.length; i += 2) config.set(String(reply[i]), String(reply[i + 1]))
    const policy = config.get('maxmemory-policy')
    const bytes = Number(config.get('maxmemory') ?? '0')
    if (policy === undefined || policy === 'noeviction' || !(bytes > 0)) return undefined
    return `its maxmemory-policy is ${policy} under a maxmemory of ${bytes} bytes: it may evict a held lock's key, and a second holder could then win a majority (set maxmemory-policy noeviction)`
  }

  async #runIdOf(node: QuorumNode): Promise<string | undefined> {
    const info = await this.#deadlines.race(node.client.call('INFO', 'server'), this.#options.commandTimeoutMs)
    if (typeof info !== 'string') throw new TypeError(`unexpected reply to INFO: ${typeof info}`)
    return /^run_id:(\w+)/m.exec(info)?.[1]
  }

  /**
   * The identities the reachable nodes' records list, each with the longest time an entry has
   * left. Every reachable node is read, but a node that does not answer is not waited for: once
   * all but a minority (N − majority) answered, the rest get {@link STALL_MS} more, then what was
   * read decides. That is the quorum's own assumption — at most a minority of the nodes lost
   * their data or are cut off at a time: with the silent ones counted among them, a node that
   * forgot a live lease is still listed by a node that answered. A read that failed (no answer
   * within `commandTimeoutMs`: a loaded machine, a stalled node) says nothing and is not counted
   * as an answer: when fewer than all but a minority answered, the check fails (the node sits out
   * and is checked again) — deciding on what a minority said let a restarted node back in at once
   * with the records that list its forgotten lease unread, and a second holder won a majority.
   * A record that answers later goes to `late`, merged with the rest (the node then sits out if
   * it lists an orphan). Decided at once when a record lists `identity`: the node has neither
   * restarted nor lost its data since a Locker listed it, whatever the others say.
   */
  #listed(identity: string | undefined, late: (listed: Map<string, number>) => void): Promise<Map<string, number>> {
    const reachable = this.#nodes.filter((node) => !node.backend.connection.down)
    const listed = new Map<string, number>()
    const minority = this.#nodes.length - (Math.floor(this.#nodes.length / 2) + 1)
    const enough = this.#nodes.length - minority
    let pending = reachable.length
    let answered = 0
    return new Promise((resolve, reject) => {
      let decided = false
      let grace: ReturnType<typeof setTimeout> | undefined
      const decide = (): void => {
        if (decided) return
        decided = true
        clearTimeout(grace)
        resolve(listed)
      }
      const settled = (reply: unknown, ok: boolean): void => {
        pending--
        if (ok) answered++
        let added = false
        if (Array.isArray(reply)) {
          for (let i = 0; i + 1 < reply.length; i += 2) {
            const id = String(reply[i])
            const ms = Number(reply[i + 1])
            if (Number.isFinite(ms) && ms > (listed.get(id) ?? -1)) {
              listed.set(id, ms)
              added = true
            }
          }
        }
        if (decided) {
          if (added) late(listed)
          return
        }
        if (identity !== undefined && listed.has(identity)) return decide()
        if (answered >= enough) {
          if (pending === 0) return decide()
          if (grace === undefined) {
            grace = setTimeout(decide, STALL_MS)
            grace.unref()
          }
        } else if (pending === 0) {
          decided = true
          reject(
            new Error(
              `the lease records of only ${answered} of ${this.#nodes.length} nodes could be read (${enough} needed)`,
            ),
          )
        }
      }
      if (reachable.length < enough) {
        decided = true
        return reject(
          new Error(
            `only ${reachable.length} of ${this.#nodes.length} nodes are reachable to read the lease records from (${enough} needed)`,
          ),
        )
      }
      for (const node of reachable) {
        this.#deadlines
          .race(
            readLeaseRecordScript.run(node.client, { record: this.#key }, {}) as Promise<unknown>,
            this.#options.commandTimeoutMs,
          )
          .then(
            (reply) => settled(reply, true),
            () => settled(undefined, false),
          )
      }
    })
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
