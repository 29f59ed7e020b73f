import type { LockResource } from '../backend/backend.js'
import { asError } from '../errors.js'
import type { QuorumNode } from './quorum-node.js'
import { nodesFailed, Tally } from './tally.js'

/** A grant on one node, as an acquire counts it. */
export interface NodeGrant {
  readonly node: QuorumNode
  readonly token: bigint
  readonly handedOver: boolean
}

/**
 * The token of a grant won on a majority: the largest any granting node minted, once a majority
 * of the nodes know it (their counter at it or above). The nodes that minted it know it; when
 * they are fewer than a majority — the counters out of step — the second phase raises the others'
 * counters to it (scripts/raise-fence.ts), every reachable node, and the token is known once
 * enough of them acknowledged. Any later majority then shares a node whose counter is at the
 * token or above, so it mints above it (docs/LOCK.md has the argument).
 */
export function learnToken(
  resource: LockResource,
  grants: readonly NodeGrant[],
  nodes: readonly QuorumNode[],
  quorum: number,
  timeoutMs: number,
): Promise<bigint> {
  let token = grants[0]!.token
  for (const g of grants) if (g.token > token) token = g.token
  const knowing = new Set<QuorumNode>()
  for (const g of grants) if (g.token === token) knowing.add(g.node)
  const needed = quorum - knowing.size
  if (needed <= 0) return Promise.resolve(token)
  const targets = nodes.filter((node) => !knowing.has(node) && node.reachable)
  if (targets.length < needed) {
    return Promise.reject(
      new Error(
        `the token could not be made known to a majority: ${knowing.size + targets.length} of ${nodes.length} nodes can be asked`,
      ),
    )
  }
  return new Promise((resolve, reject) => {
    const tally = new Tally(targets.length, needed, (won, tally) => {
      if (won) resolve(token)
      else reject(nodesFailed('the token could not be made known to a majority', tally.errors, nodes.length))
    })
    for (const node of targets) {
      node.track(node.backend.raiseFence(resource, token, timeoutMs)).then(
        () => tally.agree(),
        (error: unknown) => tally.fail(asError(error)),
      )
    }
  })
}
