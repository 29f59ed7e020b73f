import { DeadlineExceededError, type Deadlines } from '../deadline.js'
import type { RedisClient } from './connection.js'

/**
 * A grant or renewal that `replicas` replicas did not acknowledge in time (internal: the Locker
 * turns it into `LockReplicationError`).
 */
export class NotReplicatedError extends Error {
  constructor(
    readonly replicas: number,
    readonly acknowledged: number,
    why: string,
  ) {
    super(`${acknowledged} of ${replicas} replica${replicas === 1 ? '' : 's'} acknowledged ${why}`)
    this.name = 'NotReplicatedError'
  }
}

/** Redis Cluster's hash slot of a key (CRC16/XMODEM of its hash tag, or of the whole key, mod 16384). */
export function keySlot(key: string): number {
  const bytes = Buffer.from(key)
  let start = bytes.indexOf(0x7b) // '{'
  let end = bytes.length
  if (start >= 0) {
    const close = bytes.indexOf(0x7d, start + 1) // '}'
    if (close > start + 1) end = close
    else start = -1
  }
  let crc = 0
  for (let i = start >= 0 ? start + 1 : 0; i < end; i++) {
    crc ^= bytes[i]! << 8
    for (let b = 0; b < 8; b++) crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff
  }
  return crc % 16384
}

interface ClusterLike {
  readonly slots: readonly (readonly string[] | undefined)[]
  nodes(
    role: 'master',
  ): { options: { host?: string; port?: number }; call(...args: (string | number)[]): Promise<unknown> }[]
}

function isCluster(client: RedisClient): boolean {
  return (client as { isCluster?: boolean }).isCluster === true
}

/**
 * `WAIT replicas timeoutMs` on the connection that ran `key`'s script: the client itself for one
 * Redis (Sentinel included), the primary of the key's slot for a Cluster (its own connection to
 * that node). `WAIT` waits for the writes this connection made last, so it must be the same one;
 * the caller checks that the connection did not change meanwhile (a new connection has made no
 * write, and its `WAIT` would answer at once). Resolves with the replicas that acknowledged.
 */
export function waitForReplicas(
  client: RedisClient,
  key: string,
  replicas: number,
  timeoutMs: number,
  deadlines: Deadlines,
): Promise<number> {
  let target: { call(...args: (string | number)[]): Promise<unknown> } = client as unknown as {
    call(...args: (string | number)[]): Promise<unknown>
  }
  if (isCluster(client)) {
    const cluster = client as unknown as ClusterLike
    const primary = cluster.slots[keySlot(key)]?.[0]
    const node =
      primary === undefined
        ? undefined
        : cluster.nodes('master').find((n) => `${n.options.host}:${n.options.port}` === primary)
    if (!node) return Promise.reject(new Error(`no Cluster node is known to serve the slot of ${key}`))
    target = node
  }
  // WAIT itself ends at its timeout; the deadline covers a connection that does not answer.
  return deadlines.race(target.call('WAIT', replicas, timeoutMs), timeoutMs + 2_000).then(
    (reply) => {
      if (typeof reply !== 'number') throw new TypeError(`unexpected reply to WAIT: ${JSON.stringify(reply)}`)
      return reply
    },
    (error: unknown) => {
      if (error instanceof DeadlineExceededError)
        throw new NotReplicatedError(replicas, 0, `in time (WAIT got no answer within ${timeoutMs + 2_000} ms)`)
      throw error
    },
  )
}
