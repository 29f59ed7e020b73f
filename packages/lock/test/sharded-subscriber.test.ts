/**
 * The ioredis sharded subscriber (src/client/sharded-subscriber.ts) when a node drops its shard
 * channels while our `SSUBSCRIBE` is out — what a resharding does when `CLUSTER SETSLOT … NODE`
 * reaches the new owner just after our subscription there (cluster-pubsub.test.ts's resharding
 * case, where under load the waiter stayed unsubscribed on the new owner for good: 2 of 5 runs).
 * A real node produces that interleaving only by chance, so a node of the test's own, speaking
 * RESP on loopback, produces it every time: the reply to the first `SSUBSCRIBE` and the node's
 * unsolicited `sunsubscribe` push in one write. The subscriber must send `SSUBSCRIBE` again and
 * tell its waiters (`ready`). Run against the subscriber without its per-node drop count, it sent
 * one `SSUBSCRIBE` and stayed "subscribed" on a node that had dropped it.
 */
import { createServer, type Server, type Socket } from 'node:net'
import { Redis } from 'ioredis'
import { afterEach, describe, expect, it } from 'vitest'
import { keySlot } from '../src/backend/replication.js'
import { ShardedSubscriber, type ShardedCluster } from '../src/client/sharded-subscriber.js'
import { waitUntil } from './support/timing.js'

const bulk = (text: string) => `$${Buffer.byteLength(text)}\r\n${text}\r\n`
/** A RESP3 push frame: how a node speaks pub/sub to a client that said `HELLO 3` (ioredis 6 does). */
const push = (...items: (string | number)[]) =>
  `>${items.length}\r\n${items.map((i) => (typeof i === 'number' ? `:${i}\r\n` : bulk(i))).join('')}`
/** `HELLO 3`'s answer, a RESP3 map. */
const HELLO = `%3\r\n${bulk('server')}${bulk('redis')}${bulk('version')}${bulk('7.0.15')}${bulk('proto')}:3\r\n`

/** Every command a client sent, by name; splits RESP arrays of bulk strings (what ioredis sends). */
function commandsOf(chunk: string): string[][] {
  const out: string[][] = []
  const lines = chunk.split('\r\n')
  let i = 0
  while (i < lines.length) {
    const head = lines[i]!
    if (!head.startsWith('*')) {
      i++
      continue
    }
    const n = Number(head.slice(1))
    const args: string[] = []
    for (let k = 0; k < n; k++) args.push(lines[i + 2 + 2 * k] ?? '')
    out.push(args)
    i += 1 + 2 * n
  }
  return out
}

interface FakeNode {
  readonly port: number
  /** Channels SSUBSCRIBEd, in order, over every connection. */
  readonly ssubscribes: string[]
  close(): Promise<void>
}

/**
 * A node that answers what ioredis's connection sends (`HELLO 3`, INFO for the ready check,
 * anything else +OK) and `SSUBSCRIBE` as Redis 7 does over RESP3; with `dropWithFirst`, its first
 * `SSUBSCRIBE` reply is followed in the same write by the push Redis sends when the slot's
 * channels are dropped.
 */
async function fakeNode(dropWithFirst: boolean): Promise<FakeNode> {
  const ssubscribes: string[] = []
  const sockets = new Set<Socket>()
  const server: Server = createServer((socket) => {
    sockets.add(socket)
    socket.on('close', () => sockets.delete(socket))
    socket.on('data', (data) => {
      for (const [name, ...args] of commandsOf(data.toString())) {
        const command = name!.toLowerCase()
        if (command === 'hello') socket.write(HELLO)
        else if (command === 'info') socket.write(bulk('# Server\r\nredis_version:7.0.15\r\nloading:0\r\n'))
        else if (command === 'ssubscribe') {
          const channel = args[0]!
          ssubscribes.push(channel)
          const reply = push('ssubscribe', channel, 1)
          socket.write(dropWithFirst && ssubscribes.length === 1 ? reply + push('sunsubscribe', channel, 0) : reply)
        } else if (command === 'sunsubscribe') socket.write(push('sunsubscribe', args[0]!, 0))
        else socket.write('+OK\r\n')
      }
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const port = (server.address() as { port: number }).port
  return {
    port,
    ssubscribes,
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy()
        server.close(() => resolve())
      }),
  }
}

/** The slice of a Cluster the subscriber reads: one primary owning every slot. */
function clusterOf(port: number): ShardedCluster & { readonly connections: Redis[] } {
  const owner = `127.0.0.1:${port}`
  const connections: Redis[] = []
  return {
    connections,
    slots: Array.from({ length: 16_384 }, () => [owner]),
    nodes: () => [
      {
        options: { host: '127.0.0.1', port },
        duplicate: (o?: object) => {
          const redis = new Redis({ host: '127.0.0.1', port, ...o })
          redis.on('error', () => {})
          connections.push(redis)
          return redis
        },
      },
    ],
    refreshSlotsCache: (callback?: (error?: Error) => void) => callback?.(),
    on: () => undefined,
    off: () => undefined,
  }
}

const cleanups: (() => Promise<void> | void)[] = []
afterEach(async () => {
  for (const c of cleanups.splice(0)) await c()
})

describe('the ioredis sharded subscriber, a drop while its SSUBSCRIBE is out', () => {
  it('subscribes again when the node drops its channels right behind the SSUBSCRIBE reply, and tells its waiters', async () => {
    const node = await fakeNode(true)
    const cluster = clusterOf(node.port)
    let ready = 0
    const subscriber = new ShardedSubscriber(cluster, { message: () => {}, ready: () => ready++ }, 2_000)
    cleanups.push(node.close, () => subscriber.close())
    const channel = 'fencelock:{order:1}:released'
    expect(keySlot(channel)).toBeGreaterThanOrEqual(0)
    await subscriber.subscribe(channel)
    await waitUntil(() => node.ssubscribes.length >= 2, { timeoutMs: 5_000, what: 'a second SSUBSCRIBE' })
    await waitUntil(() => ready >= 1, { timeoutMs: 5_000, what: 'the waiters told' })
    expect(node.ssubscribes).toEqual([channel, channel])
  })

  it('control: a node that drops nothing is subscribed once and the waiters are not told anything', async () => {
    const node = await fakeNode(false)
    const cluster = clusterOf(node.port)
    let ready = 0
    const subscriber = new ShardedSubscriber(cluster, { message: () => {}, ready: () => ready++ }, 2_000)
    cleanups.push(node.close, () => subscriber.close())
    const channel = 'fencelock:{order:2}:released'
    await subscriber.subscribe(channel)
    // A drop would have scheduled a reconciliation at 0 ms: its SSUBSCRIBE would be out well
    // within this (the test above sees it in a few ms).
    await new Promise((resolve) => setTimeout(resolve, 200))
    expect(node.ssubscribes).toEqual([channel])
    expect(ready).toBe(0)
  })
})
