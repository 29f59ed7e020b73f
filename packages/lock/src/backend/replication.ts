import { DeadlineExceededError, type Deadlines } from '../deadline.js'
import type { RedisConnection } from '../client/redis-client.js'

/**
 * A grant or renewal that `replicas` replicas did not acknowledge in time (internal: the Locker
 * turns it into `LockReplicationError`).
 */
export class NotReplicatedError extends Error {
  constructor(
    readonly replicas: number,
    readonly acknowledged: number,
    why: string,
    /** Replicas connected to the primary then (its `ROLE`), when it said. */
    readonly connectedReplicas?: number,
  ) {
    super(
      `${acknowledged} of ${replicas} replica${replicas === 1 ? '' : 's'} acknowledged ${why}` +
        (connectedReplicas === undefined ? '' : connectedNote(replicas, connectedReplicas)),
    )
    this.name = 'NotReplicatedError'
  }
}

function connectedNote(replicas: number, connected: number): string {
  if (connected === 0) return '; the primary has no replica connected'
  const some = `; the primary has ${connected} replica${connected === 1 ? '' : 's'} connected`
  return connected < replicas ? `${some}, fewer than the option replicas (${replicas})` : some
}

/** What `WAIT` answered, and on a shortfall how many replicas the primary had connected. */
export interface Acknowledgement {
  readonly acknowledged: number
  /** The primary's connected replicas (`ROLE`), asked only when fewer than wanted acknowledged. */
  readonly connected: number | undefined
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

/**
 * `WAIT replicas timeoutMs` on the connection that ran `key`'s script: the client itself for one
 * Redis (Sentinel included), the primary of the key's slot for a Cluster (its own connection to
 * that node). `WAIT` waits for the writes this connection made last, so it must be the same one;
 * the caller checks that the connection did not change meanwhile (a new connection has made no
 * write, and its `WAIT` would answer at once). Resolves with the replicas that acknowledged.
 */
export function waitForReplicas(
  client: RedisConnection,
  key: string,
  replicas: number,
  timeoutMs: number,
  deadlines: Deadlines,
): Promise<Acknowledgement> {
  const target = client.connectionFor(key)
  if (!target) return Promise.reject(new Error(`no Cluster node is known to serve the slot of ${key}`))
  // WAIT itself ends at its timeout; the deadline covers a connection that does not answer.
  return deadlines.race(target.call('WAIT', replicas, timeoutMs), timeoutMs + 2_000).then(
    async (reply): Promise<Acknowledgement> => {
      if (typeof reply !== 'number') throw new TypeError(`unexpected reply to WAIT: ${JSON.stringify(reply)}`)
      if (reply >= replicas) return { acknowledged: reply, connected: undefined }
      // A shortfall: say whether the replicas are there at all (fewer connected than asked for,
      // or none reachable) or only slow. Only on this path: it costs one more round trip.
      const connected = await deadlines.race(target.call('ROLE'), 2_000).then(connectedOf, () => undefined)
      return { acknowledged: reply, connected }
    },
    (error: unknown) => {
      if (error instanceof DeadlineExceededError)
        throw new NotReplicatedError(replicas, 0, `in time (WAIT got no answer within ${timeoutMs + 2_000} ms)`)
      throw error
    },
  )
}

/** The number of replicas in a primary's `ROLE` reply (`master`, offset, one entry per replica). */
function connectedOf(reply: unknown): number | undefined {
  if (!Array.isArray(reply) || reply[0] !== 'master' || !Array.isArray(reply[2])) return undefined
  return reply[2].length
}
