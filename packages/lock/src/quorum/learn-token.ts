import { asError } from '../errors.js'
import { NodeDataLostError } from '../scripts/node-marker.js'
import type { QuorumNode } from './quorum-node.js'
import { nodesFailed, onNode, Tally } from './tally.js'

/** A grant on one node, as an acquire counts it. */
export interface NodeGrant {
  readonly node: QuorumNode
  readonly token: bigint
  readonly handedOver: boolean
}

/** The largest token the grants minted, and how many granting nodes minted it (they know it). */
export function largestToken(grants: readonly NodeGrant[]): { token: bigint; knowing: number } {
  let token = grants[0]!.token
  let knowing = 0
  for (const g of grants) {
    if (g.token > token) {
      token = g.token
      knowing = 1
    } else if (g.token === token) {
      knowing++
    }
  }
  return { token, knowing }
}

/**
 * The second phase: the token of a grant won on a majority is the largest any granting node
 * minted, and must be known to a majority of the nodes (their counter at it or above) before the
 * lock is returned. The nodes that minted it know it; when they are fewer than a majority — the
 * counters out of step — this raises the others' counters to it (scripts/raise-fence.ts), every
 * reachable node, and resolves once enough of them acknowledged. (Counters in step — the usual
 * case — need none of it: see {@link largestToken}.) `raise` raises one node's counter (the lock's:
 * scripts/raise-fence.ts; the read-write lock's, quorum-read-write.ts) and rejects with a
 * {@link NodeDataLostError} where the node's marker is gone. Any later majority then shares a node whose
 * counter is at the token or above, so it mints above it (docs/LOCK.md has the argument).
 */
export function raiseToMajority(
  grants: readonly NodeGrant[],
  { token, knowing }: { token: bigint; knowing: number },
  nodes: readonly QuorumNode[],
  quorum: number,
  timeoutMs: number,
  raise: (node: QuorumNode, token: bigint, timeoutMs: number) => Promise<unknown>,
): Promise<bigint> {
  const needed = quorum - knowing
  const targets = nodes.filter((node) => node.reachable && !grants.some((g) => g.node === node && g.token === token))
  if (targets.length < needed) {
    const known = knowing + targets.length
    return Promise.reject(
      new Error(`the token could not be made known to a majority: ${known} of ${nodes.length} nodes can be asked`),
    )
  }
  return new Promise((resolve, reject) => {
    const tally = new Tally(targets.length, needed, (won, t) => {
      if (won) resolve(token)
      else reject(nodesFailed('the token could not be made known to a majority', t.errors, nodes.length))
    })
    for (const node of targets) {
      node.track(raise(node, token, timeoutMs)).then(
        () => tally.agree(),
        (error: unknown) => {
          // The node lost its data: it sits out, like one found so by a grant (restart-guard.ts).
          if (error instanceof NodeDataLostError) node.onDataLost?.()
          tally.fail(onNode(node.index, asError(error)))
        },
      )
    }
  })
}
