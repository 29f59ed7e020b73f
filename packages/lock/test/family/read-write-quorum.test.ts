/**
 * `locker.readWrite()` in quorum mode (quorum/quorum-read-write.ts), over 3 redis-servers of the
 * file's own reached through TCP proxies: readers share, a writer excludes, a waiting writer stops
 * new readers, tokens as docs/LOCK.md defines them in quorum mode (a writer's above every earlier
 * grant's, a reader's at or above the last write's and below the next), a reader's derived write
 * fenced; a node cut off, then two; writers of many Lockers at once never overlap and none starves
 * (the nodes order their waiting writers alike); and a node that loses its data without
 * restarting while a writer holds: no reader gets in (its marker is gone), where Redlock's
 * semantics (the restart guard off, the control) let one in.
 */
import type { Redis } from 'ioredis'
import { describe, expect, it } from 'vitest'
import { LockTimeoutError, LockUnavailableError, type Locker } from '../../src/index.js'
import { readWriteKeys } from '../../src/keys.js'
import { connect, makeLocker, ready, unique } from '../support/connections.js'
import { fencedStore } from '../support/fenced-store.js'
import { delAfterTry, useQuorumNodes } from '../support/quorum.js'
import { startRedisServer } from '../support/redis-server.js'
import { settle, sleep, waitUntil } from '../support/timing.js'

const nodes = useQuorumNodes(3)

/** A Locker over every node; 10 s leases unless a test says otherwise. */
function locker(commandTimeoutMs = 2_000): Locker {
  return nodes.locker({ ttlMs: 10_000, commandTimeoutMs })
}

describe('quorum mode: readers and writers', () => {
  it('readers share; a writer excludes both; a waiting writer stops new readers and gets in first, its token above theirs', async () => {
    const a = locker()
    const b = locker()
    const name = unique('qrw-basic')
    const r1 = await a.readWrite(name).read()
    // Not `waitMs: 0`: b's first call waits for its restart guard's checks of the nodes (up to
    // commandTimeoutMs, more than a single try has on a loaded machine). Were readers exclusive, it
    // would time out all the same: r1 is released only later.
    const r2 = await b.readWrite(name).read({ waitMs: 5_000 })
    // Before any write each node seeded its counter from its own clock: two readers' majorities
    // may know different seeds (docs/LOCK.md: a reader's token is at or above the last write's).
    expect(r1.isHeld() && r2.isHeld()).toBe(true)
    expect(await a.readWrite(name).inspect()).toMatchObject({ state: 'read', readers: 2 })
    // Each reader is held on a majority of the nodes (2 of 3 each: at least 4 entries in all). Not
    // on every node: a node that b's first call found still being checked by its restart guard,
    // or one whose answer came after the majority's, may not hold b's reader (a clean-clone CI run
    // waited 5 s for the third node's second reader).
    const k = readWriteKeys('fencelock:', name)
    const held = await Promise.all(nodes.admins.map((admin) => admin.zcard(k.readers)))
    expect(held.reduce((a, b) => a + b, 0)).toBeGreaterThanOrEqual(4)

    const writing = b.readWrite(name).write({ waitMs: 20_000 })
    await waitUntil(async () => (await a.readWrite(name).inspect()).waitingWriters === 1, { what: 'the writer waits' })
    expect((await settle(a.readWrite(name).read({ waitMs: 200 }))).error).toBeInstanceOf(LockTimeoutError)
    const reading = a.readWrite(name).read({ waitMs: 20_000 })
    await r1.release()
    await r2.release()
    const w = await writing
    expect(w.token).toBeGreaterThan(r1.token)
    expect(w.token).toBeGreaterThan(r2.token)
    // Each node keeps the token it minted; a node that answered after the majority may have
    // minted more than the hold's (its counter was ahead): inspect() reports the largest.
    const seen = await a.readWrite(name).inspect()
    expect(seen.state).toBe('write')
    expect(seen.writerToken).toBeGreaterThanOrEqual(w.token)
    expect((await settle(b.readWrite(name).write({ waitMs: 150 }))).error).toBeInstanceOf(LockTimeoutError)
    await w.release()
    const r3 = await reading
    expect(r3.token).toBeGreaterThanOrEqual(w.token)
    await r3.release()
    const w2 = await a.readWrite(name).write({ waitMs: 0 })
    expect(w2.token).toBeGreaterThan(r3.token)
    await w2.release()
    expect((await a.readWrite(name).inspect()).state).toBe('free')
  })

  it("tokens: counters out of step across the nodes are made known to a majority; a reader's derived write is fenced", async () => {
    const a = locker()
    const name = unique('qrw-tokens')
    const k = readWriteKeys('fencelock:', name)
    // Node 0's counter far ahead of the others' (a write once granted there only).
    await nodes.admins[0]!.set(k.fence, '900000000000000000', 'PX', 60_000)
    const w1 = await a.readWrite(name).usingWrite((w) => w.token)
    // Granted by nodes 1 and 2 (lower counters) or with node 0: either way the token now known
    // to a majority is the largest any granting node had.
    const known = (await Promise.all(nodes.admins.map((x) => x.get(k.fence)))).map((v) => BigInt(v ?? '0'))
    expect(known.filter((t) => t >= w1).length).toBeGreaterThanOrEqual(2)
    const read = await a.readWrite(name).usingRead((r) => r.token)
    expect(read).toBeGreaterThanOrEqual(w1)
    const w2 = await a.readWrite(name).usingWrite((w) => w.token)
    expect(w2).toBeGreaterThan(read)

    const store = fencedStore(nodes.admins[0]!)
    const summary = `${name}:summary`
    await a.readWrite(name).usingWrite(async (w) => expect(await store.write(summary, w.token)).toBe(true))
    const stale = await locker().readWrite(name).read({ ttlMs: 300 })
    const newer = await a.readWrite(name).write({ waitMs: 20_000 })
    expect(newer.token).toBeGreaterThan(stale.token)
    expect(await store.write(summary, newer.token)).toBe(true)
    await newer.release()
    expect(await store.write(summary, stale.token)).toBe(false)
  })

  it('one node cut off: reads and writes go on with the other two; two cut off: LockUnavailableError, not a hang', async () => {
    const a = locker(500)
    const name = unique('qrw-cut')
    await (await a.readWrite(name).read()).release()
    nodes.cut(2)
    try {
      const w = await a.readWrite(name).write({ waitMs: 5_000 })
      expect(w.isHeld()).toBe(true)
      await w.release()
      const r = await a.readWrite(name).read({ waitMs: 5_000 })
      await r.release()
      nodes.cut(1)
      const started = performance.now()
      const { error } = await settle(a.readWrite(name).write({ waitMs: 1_500 }))
      expect(error).toBeInstanceOf(LockUnavailableError)
      expect(performance.now() - started).toBeLessThan(10_000)
    } finally {
      nodes.mend(1)
      nodes.mend(2)
    }
  }, 30_000)

  it("a blocked reader is woken by the writer's release message, with a node cut off (its subscribe does not hold up the wait)", async () => {
    // pollMs 20 s: a grant within a second of the release came by message, not by a try on a timer.
    const options = { ttlMs: 10_000, commandTimeoutMs: 2_000, pollMs: 20_000 }
    const a = nodes.locker(options)
    const b = nodes.locker(options)
    const name = unique('qrw-wake')
    await (await b.readWrite(name).read()).release()
    nodes.cut(2)
    try {
      const w = await a.readWrite(name).write({ waitMs: 5_000 })
      let grantedAt = 0
      const reading = b
        .readWrite(name)
        .read({ waitMs: 30_000 })
        .then((r) => {
          grantedAt = performance.now()
          return r
        })
      // Long enough for the reader's backoff to pass a second between tries.
      await sleep(4_000)
      expect(grantedAt).toBe(0)
      const releasedAt = performance.now()
      await w.release()
      const r = await reading
      expect(grantedAt - releasedAt).toBeLessThan(1_000)
      expect(r.token).toBeGreaterThanOrEqual(w.token)
      await r.release()
    } finally {
      nodes.mend(2)
    }
  }, 60_000)

  it('writers of 4 Lockers × 3 loops at once: none overlaps another (checked on the monotonic clock), every one is served', async () => {
    const name = unique('qrw-writers')
    const lockers = [0, 1, 2, 3].map(() => locker())
    const spans: [number, number, bigint][] = []
    await Promise.all(
      lockers.flatMap((l) =>
        [0, 1, 2].map(async () => {
          for (let i = 0; i < 6; i++) {
            const w = await l.readWrite(name).write({ waitMs: 60_000 })
            const start = performance.now()
            await sleep(1 + Math.random() * 3)
            expect(w.isHeld()).toBe(true)
            spans.push([start, performance.now(), w.token])
            await w.release()
          }
        }),
      ),
    )
    expect(spans.length).toBe(4 * 3 * 6)
    spans.sort((x, y) => x[0] - y[0])
    for (let i = 1; i < spans.length; i++) {
      expect(spans[i]![0]).toBeGreaterThanOrEqual(spans[i - 1]![1])
      expect(spans[i]![2]).toBeGreaterThan(spans[i - 1]![2])
    }
  }, 120_000)
})

/**
 * Whether a reader got in while a writer (a 10 s lease on nodes 0 and 1: node 2 held by someone
 * else at the time) still held, after node 1 lost its data (FLUSHALL).
 */
async function readerWhileWriting(nodeRestartDelayMs: number | undefined): Promise<boolean> {
  const servers = await Promise.all([0, 1, 2].map(() => startRedisServer()))
  try {
    const admins: Redis[] = servers.map((s) => connect({ port: s.port }))
    for (const [i, x] of admins.entries()) await ready(x, servers[i]!.url)
    const options = { ttlMs: 10_000, commandTimeoutMs: 2_000, nodeRestartDelayMs }
    const writerClients = servers.map((s) => connect({ port: s.port }))
    const writer = makeLocker(writerClients, options)
    const reader = makeLocker(
      servers.map((s) => connect({ port: s.port })),
      options,
    )
    const name = unique('qrw-lost')
    const k = readWriteKeys('fencelock:', name)
    // Both Lockers knew the nodes before (their checks done, their marker epochs learned).
    await (await reader.readWrite(unique('qrw-warm')).read()).release()
    await (await writer.readWrite(unique('qrw-warm')).read()).release()
    await admins[2]!.hset(k.writer, 'owner', 'someone-else', 'token', '1')
    await admins[2]!.pexpire(k.writer, 10_000)
    // waitMs 0: a single try, which takes no place among node 2's waiting writers (one there
    // would stop readers on its own).
    const w = await writer.readWrite(name).write({ waitMs: 0 })
    await delAfterTry(writerClients[2]!, admins[2]!, k.writer) // granted by nodes 0 and 1
    expect(await admins[1]!.exists(k.writer)).toBe(1)
    await admins[1]!.flushall()
    // 2 s, well inside the writer's 10 s lease.
    const { value, error } = await settle(reader.readWrite(name).read({ waitMs: 2_000 }))
    expect(w.isHeld()).toBe(true)
    await w.release().catch(() => {})
    if (value) {
      await value.release().catch(() => {})
      return true
    }
    expect(error).toBeInstanceOf(LockTimeoutError)
    return false
  } finally {
    await Promise.all(servers.map((s) => s.dispose()))
  }
}

describe('quorum mode: a node that loses its data while a writer holds', () => {
  it('FLUSHALL on a node that granted the writer: no reader while its lease is valid; with the restart guard off, one gets in', async () => {
    expect(await readerWhileWriting(0)).toBe(true) // the control: Redlock's semantics
    expect(await readerWhileWriting(undefined)).toBe(false)
  }, 60_000)
})
