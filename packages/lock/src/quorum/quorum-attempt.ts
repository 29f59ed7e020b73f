import type { AcquireOutcome, AcquireRequest, LockResource } from '../backend/backend.js'
import { asError } from '../errors.js'
import { largestToken, raiseToMajority, type NodeGrant } from './learn-token.js'
import type { QuorumNode } from './quorum-node.js'
import { nodesFailed, onNode, Tally } from './tally.js'

/**
 * A lock granted while some nodes asked had not answered: their grants, when they come, are the
 * lock's like the others — unless the lock's release ran on that node first. It usually cannot:
 * the release goes out behind the acquire on the same connection. But an acquire answered
 * NOSCRIPT is sent again as EVAL after whatever went out meanwhile (a clean-clone CI run left such
 * a grant held for its TTL), and a node the release skipped (failing then) was sent none. So a
 * grant that comes after the release is given back once that node's release is known not to have
 * freed it (skipped, answered "not ours", or failed), whichever of the two answers comes first.
 */
export class LateGrants {
  readonly #pending: Set<QuorumNode>
  readonly #giveBack: (node: QuorumNode) => void
  readonly #done: () => void
  /** For the nodes pending at the release: whether it freed the lock there (undefined: not answered yet). */
  readonly #freed = new Map<QuorumNode, boolean | undefined>()
  /** Pending nodes that granted after the release, their release not answered yet. */
  readonly #grantedAfter = new Set<QuorumNode>()

  constructor(pending: Iterable<QuorumNode>, giveBack: (node: QuorumNode) => void, done: () => void) {
    this.#pending = new Set(pending)
    this.#giveBack = giveBack
    this.#done = done
  }

  /** The lock's release goes to `asked` (and to no other node). */
  releasing(asked: readonly QuorumNode[]): void {
    for (const node of this.#pending) this.#freed.set(node, asked.includes(node) ? undefined : false)
  }

  /** A node's answer to the release (`freed` false also when it failed: whether it ran is unknown). */
  releaseAnswered(node: QuorumNode, freed: boolean): void {
    if (!this.#freed.has(node)) return
    this.#freed.set(node, freed)
    if (!freed && this.#grantedAfter.delete(node)) this.#giveBack(node)
    this.#settle()
  }

  /** A pending node answered the acquire. */
  answered(node: QuorumNode, granted: boolean): void {
    if (!this.#pending.delete(node)) return
    if (granted && this.#freed.has(node)) {
      const freed = this.#freed.get(node)
      if (freed === false) this.#giveBack(node)
      else if (freed === undefined) this.#grantedAfter.add(node)
    }
    this.#settle()
  }

  #settle(): void {
    if (this.#pending.size > 0 || this.#grantedAfter.size > 0) return
    for (const freed of this.#freed.values()) if (freed === undefined) return
    this.#done()
  }
}

/** What an attempt needs from its backend. */
export interface AttemptHost {
  readonly nodes: readonly QuorumNode[]
  readonly quorum: number
  readonly commandTimeoutMs: number
  /** Gives back a grant on one node (short of a majority, too late, or after the lock's release). */
  releaseOn(node: QuorumNode, resource: LockResource, ownerId: string): void
  /** The attempt won: its place in the queues is spent (or at the back of the line). */
  granted(resource: LockResource, request: AcquireRequest, sentAtWall: number): void
  /** The attempt won with nodes still to answer: their grants are the lock's (see {@link LateGrants}). */
  readonly lateGrants: Map<string, LateGrants>
}

/**
 * One quorum acquire in flight: the nodes' answers counted by one {@link Tally}, then the token
 * made known to a majority. One object per attempt, its methods called by the nodes as they
 * answer (no closure per node).
 *
 * asking → won (learning the token) → held, or failed. Held, a grant that comes later is the
 * lock's like the others (its release frees it with them; one answered after that release is
 * given back at once); failed, it is given back at once.
 */
export class QuorumAttempt {
  readonly #host: AttemptHost
  readonly #resource: LockResource
  readonly #request: AcquireRequest
  readonly #ownerId: string
  readonly #validMs: number
  readonly #validUntil: number
  readonly #sentAtWall: number
  readonly #resolve: (outcome: AcquireOutcome) => void
  readonly #grants: NodeGrant[] = []
  /** The nodes asked that have not answered yet. */
  readonly #waiting: Set<QuorumNode>
  readonly #tally: Tally
  #cutErrors = 0
  #holderTtlMs = -1
  #state: 'asking' | 'won' | 'held' | 'failed' = 'asking'

  constructor(
    host: AttemptHost,
    resource: LockResource,
    request: AcquireRequest,
    init: {
      ownerId: string
      validMs: number
      sentAtWall: number
      asked: readonly QuorumNode[]
      notAsked: readonly Error[]
    },
    resolve: (outcome: AcquireOutcome) => void,
  ) {
    this.#host = host
    this.#resource = resource
    this.#request = request
    this.#ownerId = init.ownerId
    this.#validMs = init.validMs
    this.#validUntil = request.sentAt + init.validMs
    this.#sentAtWall = init.sentAtWall
    this.#resolve = resolve
    this.#waiting = new Set(init.asked)
    this.#tally = new Tally(host.nodes.length, host.quorum, (won) => (won ? this.#won() : this.#lost()))
    for (const error of init.notAsked) this.#tally.fail(error)
  }

  /** A node's answer. */
  count(node: QuorumNode, outcome: AcquireOutcome): void {
    const state = this.#state
    this.#waiting.delete(node)
    if (state === 'failed') {
      // Too late to count: a grant nobody waits for is given back at once.
      if (outcome.granted) this.#host.releaseOn(node, this.#resource, this.#ownerId)
      return
    }
    if (state === 'held') this.#host.lateGrants.get(this.#ownerId)?.answered(node, outcome.granted)
    const tally = this.#tally
    if (outcome.granted) {
      this.#grants.push({ node, token: outcome.token, handedOver: outcome.handedOver })
      tally.agree()
    } else if (outcome.error === undefined) {
      const ttl = outcome.holderTtlMs
      if (ttl >= 0 && (this.#holderTtlMs < 0 || ttl < this.#holderTtlMs)) this.#holderTtlMs = ttl
      tally.refuse()
    } else {
      if (outcome.cut) this.#cutErrors++
      tally.fail(onNode(node.index, outcome.error))
    }
  }

  /**
   * No majority can be won any more: too many nodes failed (Redis is unavailable), or enough
   * nodes are held by someone else (contention).
   */
  #lost(): void {
    const tally = this.#tally
    const n = this.#host.nodes.length
    if (tally.failed > n - this.#host.quorum) {
      const error = nodesFailed('no majority of the nodes answered', tally.errors, n)
      this.#fail({ granted: false, error, cut: this.#cutErrors === tally.failed })
    } else {
      this.#fail({ granted: false, holderTtlMs: this.#holderTtlMs })
    }
  }

  #won(): void {
    this.#state = 'won'
    const known = largestToken(this.#grants)
    // Counters in step (the usual case): the granting majority minted the token, nobody to raise.
    if (known.knowing >= this.#host.quorum) return this.#learned(known.token)
    const timeoutMs = Math.max(1, Math.min(this.#host.commandTimeoutMs, this.#validUntil - performance.now()))
    const resource = this.#resource
    const raise = (node: QuorumNode, token: bigint, ms: number): Promise<void> =>
      node.backend.raiseFence(resource, token, ms, node.epoch)
    raiseToMajority(this.#grants, known, this.#host.nodes, this.#host.quorum, timeoutMs, raise).then(
      (token) => this.#learned(token),
      (error: unknown) => {
        if (this.#state === 'won') this.#fail({ granted: false, error: asError(error), cut: false })
      },
    )
  }

  #learned(token: bigint): void {
    if (this.#state !== 'won') return
    if (performance.now() >= this.#validUntil) {
      const why = `the grant took longer than its validity (${Math.round(this.#validMs)} ms: ttlMs less the clock drift)`
      return this.#fail({ granted: false, error: new Error(why), cut: false })
    }
    this.#state = 'held'
    if (this.#waiting.size > 0) {
      const { lateGrants } = this.#host
      const [host, resource, ownerId] = [this.#host, this.#resource, this.#ownerId]
      const giveBack = (node: QuorumNode) => host.releaseOn(node, resource, ownerId)
      lateGrants.set(ownerId, new LateGrants(this.#waiting, giveBack, () => lateGrants.delete(ownerId)))
    }
    this.#host.granted(this.#resource, this.#request, this.#sentAtWall)
    let handedOver = false
    for (const g of this.#grants) if (g.handedOver) handedOver = true
    this.#resolve({ granted: true, ownerId: this.#ownerId, token, validUntil: this.#validUntil, handedOver })
  }

  #fail(outcome: AcquireOutcome): void {
    this.#state = 'failed'
    for (const g of this.#grants) this.#host.releaseOn(g.node, this.#resource, this.#ownerId)
    this.#resolve(outcome)
  }
}
