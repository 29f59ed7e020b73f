/**
 * Quorum mode on real redis-servers: a Locker over N independent masters. Nodes are taken away
 * for real (a blackhole in front of one keeps its data; SIGKILL; a restart without persistence;
 * SIGSTOP), and each token claim is also run without its protection (the maximum of a
 * majority's counters, with no second phase) to show it would fail.
 */
import { Redis } from 'ioredis'
import { describe, expect, it } from 'vitest'
import { acquireOnce, releaseOnce } from './support/scripts.js'
import {
  InvalidLockOptionError,
  LOCK_SCRIPTS,
  LockLostError,
  MIN_QUORUM_TTL_MS,
  LockTimeoutError,
  LockUnavailableError,
  Locker,
  resourceKeys,
  type Lock,
} from '../src/index.js'
import { newOwnerId } from '../src/owner-id.js'
import { clockDriftMs, majorityOf } from '../src/quorum/quorum-backend.js'
import { commandCalls, connect, makeLocker, ready, unique } from './support/connections.js'
import { eventLog } from './support/events.js'
import { delAfterTry, useQuorumNodes } from './support/quorum.js'
import { startTcpProxy } from './support/latency-proxy.js'
import { startRedisServer } from './support/redis-server.js'
import { settle, sleep, waitUntil } from './support/timing.js'

const keysOf = (resource: string) => resourceKeys('fencelock:', resource)
/** How late past its deadline a failing call may settle on this loaded 2-core machine. */
const SLACK_MS = 150
/** Far above any clock seed (~1.8e15) and above 2^53, where Lua's doubles are not exact. */
const FAR_AHEAD = 10n ** 17n

const nodes = useQuorumNodes(3)

/** What each node holds for `resource`: the lock key's value and the token counter. */
async function state(resource: string): Promise<{ lock: (string | null)[]; fence: (bigint | null)[] }> {
  const k = keysOf(resource)
  const lock = await Promise.all(nodes.admins.map((a) => a.get(k.lock)))
  const fence = await Promise.all(
    nodes.admins.map(async (a) => ((v) => (v === null ? null : BigInt(v)))(await a.get(k.fence))),
  )
  return { lock, fence }
}

/**
 * The unprotected twin: what a Redlock that minted a token per node would do — run the acquire
 * script (which mints) on the given nodes and take the largest token, with no second phase.
 */
async function naiveGrant(
  resource: string,
  on: readonly number[],
  admins: readonly Redis[] = nodes.admins,
): Promise<bigint> {
  const k = keysOf(resource)
  const ownerId = newOwnerId()
  let max = -1n
  for (const i of on) {
    const reply = await acquireOnce(admins[i]!, k, { ownerId, ttlMs: 5_000, fenceTtlMs: 86_400_000, lockerId: 'naive' })
    if (!reply.granted) throw new Error(`node ${i} was held`)
    if (reply.token > max) max = reply.token
  }
  for (const i of on) await admins[i]!.del(k.lock)
  return max
}

describe('quorum mode: the Locker over N clients', () => {
  it('refuses a bad array, and a lease too short for a validity, before any I/O, naming the field and the rule', async () => {
    let calls = 0
    const fake = () => ({ evalsha: () => calls++, eval: () => calls++, duplicate: () => calls++ })
    const cases: [unknown, string][] = [
      [[fake(), fake()], 'redis'],
      [[], 'redis'],
      [[fake(), fake(), {}], 'redis[2]'],
      [[fake(), null, fake()], 'redis[1]'],
    ]
    for (const [redis, field] of cases) {
      const error = (() => {
        try {
          new Locker(redis as never)
        } catch (e) {
          return e
        }
      })()
      expect(error, JSON.stringify(field)).toBeInstanceOf(InvalidLockOptionError)
      expect(error).toMatchObject({ field })
    }
    const one = fake()
    expect(() => new Locker([one, fake(), one] as never)).toThrow(/redis\[2\].*must not repeat a client/)
    // A lease must leave a validity after the clock drift: 10 ms at least, however it is given.
    expect(() => new Locker([fake(), fake(), fake()] as never, { ttlMs: MIN_QUORUM_TTL_MS - 1 })).toThrow(
      /ttlMs.*from 10 .*quorum mode/,
    )
    const locker = new Locker([fake(), fake(), fake()] as never)
    await expect(locker.acquire('r', { ttlMs: 5 })).rejects.toMatchObject({
      name: 'InvalidLockOptionError',
      field: 'ttlMs',
    })
    await expect(locker.tryAcquire('r', { ttlMs: 5 })).rejects.toMatchObject({
      name: 'InvalidLockOptionError',
      field: 'ttlMs',
    })
    await expect(locker.using('r', () => 1, { ttlMs: 5 })).rejects.toMatchObject({
      name: 'InvalidLockOptionError',
      field: 'ttlMs',
    })
    expect(calls).toBe(0)
    const lock = await nodes.locker().acquire(unique('q-short-extend'))
    await expect(lock.extend(5)).rejects.toMatchObject({ name: 'InvalidLockOptionError', field: 'ttlMs' })
    await lock.release()
  })

  it('three clients of one server are one node: every acquire is refused with InvalidLockOptionError naming the client (run_id), nothing is left held', async () => {
    const server = await startRedisServer()
    const admin = connect({ port: server.port })
    await ready(admin, server.url)
    const same = [0, 1, 2].map(() => connect({ port: server.port }))
    const locker = makeLocker(same)
    const r = unique('q-one-server')
    for (const call of [() => locker.acquire(r, { waitMs: 500 }), () => locker.tryAcquire(r)]) {
      const { error, ms } = await settle(call())
      expect(error).toBeInstanceOf(InvalidLockOptionError)
      expect(error).toMatchObject({
        field: expect.stringMatching(/^redis\[[12]\]$/),
        message: expect.stringContaining('run_id'),
      })
      expect(ms).toBeLessThan(400) // at once, not after waitMs
    }
    expect(await admin.exists(keysOf(r).lock)).toBe(0)
    // Control: the same three clients, one to each of three servers, are accepted.
    const distinct = nodes.clients()
    expect(await (await makeLocker(distinct).acquire(r)).release()).toBe(true)
    await server.dispose()
  })

  it('writes one owner id on every node, returns a token a majority knows, and releases everywhere', async () => {
    const locker = nodes.locker()
    expect(locker.nodes).toBe(3)
    const r = unique('q-basic')
    const lock = await locker.acquire(r)
    expect(typeof lock.token).toBe('bigint')
    const held = await state(r)
    // One owner id on every node that granted it, a majority at least: on a loaded machine the
    // third node's grant may land a moment after the majority was won (or its first check may still
    // be in flight, so it was not asked).
    const owners = held.lock.filter((v) => v !== null)
    expect(owners.length).toBeGreaterThanOrEqual(majorityOf(3))
    expect(new Set(owners).size).toBe(1)
    expect(owners[0]).toMatch(/^[0-9a-f]{32}$/)
    expect(held.fence.filter((f) => f !== null && f >= lock.token).length).toBeGreaterThanOrEqual(majorityOf(3))
    // The nodes seeded their counters from their own clocks: the second phase ran (with the restart
    // guard on, LOCK_SCRIPTS.markedRaiseFence: it never brings a counter back onto a node that lost its data).
    const loaded = await Promise.all(
      nodes.admins.map((a) => a.script('EXISTS', LOCK_SCRIPTS.markedRaiseFence.sha) as Promise<number[]>),
    )
    expect(loaded.flat()).toContain(1)
    expect(await lock.release()).toBe(true)
    // A majority freed it when release() resolves; the last node's answer may come a moment later.
    await waitUntil(async () => (await state(r)).lock.every((v) => v === null), { what: 'freed on every node' })
    const second = await locker.acquire(r)
    expect(second.token).toBeGreaterThan(lock.token)
    await second.release()
  })

  it('a grant that answers after the majority was won is ours like the others: the slow node holds our owner id until the release frees it', async () => {
    const { startLatencyProxy } = await import('./support/latency-proxy.js')
    const slow = await startLatencyProxy({ port: nodes.servers[2]!.port }, 40)
    const clients = [...nodes.clients().slice(0, 2), connect({ port: slow.port })]
    for (const c of clients) await ready(c, 'a node')
    const locker = makeLocker(clients)
    await (await locker.acquire(unique('q-warm'))).release()
    const r = unique('q-late-grant')
    const lock = await locker.acquire(r) // won on the two fast nodes; the slow one answers 80 ms later
    await waitUntil(async () => (await state(r)).lock[2] !== null, { what: 'the slow node to grant' })
    await sleep(200) // a grant given back would be gone by now
    const held = await state(r)
    expect(held.lock[2]).toBe(held.lock[0])
    expect(await lock.release()).toBe(true)
    await waitUntil(async () => (await state(r)).lock.every((v) => v === null), { what: 'freed on every node' })
    await slow.close()
  })

  it("a late grant whose script was not loaded on its node (NOSCRIPT, then EVAL) runs after the lock's release reached that node: it is given back, not left for its TTL (a clean-clone CI run held it 30 s)", async () => {
    const { startLatencyProxy } = await import('./support/latency-proxy.js')
    const slow = await startLatencyProxy({ port: nodes.servers[2]!.port }, 40)
    const clients = [...nodes.clients().slice(0, 2), connect({ port: slow.port })]
    for (const c of clients) await ready(c, 'a node')
    // What the slow node runs, scripts' commands included: when its grant of a resource ran.
    const admin = nodes.admins[2]!
    const monitor = await connect({ port: nodes.servers[2]!.port }).monitor()
    const ran: string[][] = []
    monitor.on('monitor', (_time: string, args: string[]) => ran.push(args))
    const grantedOnSlow = (resource: string) =>
      waitUntil(() => ran.some((a) => a[0] === 'SET' && a[1] === keysOf(resource).lock && a.includes('NX')), {
        what: 'the slow node to grant',
      })
    const locker = makeLocker(clients, { nodeRestartDelayMs: 0 })
    const warm = unique('q-warm')
    await (await locker.acquire(warm)).release()
    await grantedOnSlow(warm) // nothing of the warm-up left on its way to the slow node
    // The slow node knows every script but the acquires' (as after a test that only ran others).
    const unloadAcquires = async () => {
      await admin.script('FLUSH')
      for (const [name, script] of Object.entries(LOCK_SCRIPTS))
        if (!/acquire/i.test(name)) await admin.script('LOAD', script.lua)
    }
    await unloadAcquires()
    const r = unique('q-late-noscript')
    // Counters in step: the fast nodes mint the same token and the grant needs no second phase,
    // so the release goes out while the slow node's NOSCRIPT is still on its way back.
    await Promise.all(nodes.admins.map((a) => a.set(keysOf(r).fence, '1000', 'PX', 600_000)))
    const lock = await locker.acquire(r, { ttlMs: 60_000 }) // won on the fast nodes
    // On the slow node the acquire's EVALSHA is answered NOSCRIPT and sent again as EVAL: a
    // release sent behind the EVALSHA would run before the grant (the control below).
    expect(await lock.release()).toBe(true)
    await grantedOnSlow(r)
    await waitUntil(async () => (await state(r)).lock.every((v) => v === null), {
      timeoutMs: 3_000,
      what: 'freed on every node',
    })
    // Control: the release sent behind the acquire on the slow node's connection (as before).
    await unloadAcquires()
    const rc = unique('q-late-noscript-ctl')
    const ownerId = newOwnerId()
    const args = { ownerId, ttlMs: 60_000, fenceTtlMs: 60_000, lockerId: 'ctl' }
    const acquired = acquireOnce(clients[2]!, keysOf(rc), args)
    const released = await releaseOnce(clients[2]!, keysOf(rc), ownerId, 'ctl', 500)
    expect(released.freed).toBe(false) // it ran first: nothing to free yet
    expect((await acquired).granted).toBe(true)
    expect(await admin.get(keysOf(rc).lock)).toBe(ownerId) // held by nobody until its TTL
    await admin.del(keysOf(rc).lock)
    monitor.disconnect()
    await slow.close()
  })

  it('keeps the lease valid for ttlMs less the clock drift, measured from the first request', async () => {
    const locker = nodes.locker({ ttlMs: 10_000 })
    const before = performance.now()
    const lock = await locker.acquire(unique('q-validity'))
    const after = performance.now()
    // remainingMs is validUntil - now, with validUntil = sentAt + ttl - drift, sentAt in [before, after].
    const remaining = lock.remainingMs()
    expect(remaining).toBeLessThanOrEqual(10_000 - clockDriftMs(10_000) - (performance.now() - after))
    expect(remaining).toBeGreaterThan(10_000 - clockDriftMs(10_000) - (performance.now() - before) - 1)
    await lock.release()
  })
})

describe('quorum mode: tokens strictly increase across changing majorities', () => {
  it('majorities {A,B}, {B,C}, {A,C} in turn, A’s counter far ahead: every token larger than the last; the maximum alone goes back', async () => {
    const r = unique('q-rotate')
    const locker = nodes.locker({ commandTimeoutMs: 300 })
    await nodes.admins[0]!.set(keysOf(r).fence, FAR_AHEAD.toString())
    const majorities = [
      [0, 1],
      [1, 2],
      [0, 2],
      [1, 2],
      [0, 1],
    ] as const
    const tokens: bigint[] = []
    for (const majority of majorities) {
      const down = [0, 1, 2].find((i) => !(majority as readonly number[]).includes(i))!
      nodes.cut(down)
      try {
        const lock = await locker.acquire(r, { waitMs: 2_000 })
        tokens.push(lock.token)
        await lock.release()
      } finally {
        nodes.mend(down)
      }
    }
    expect(tokens[0]).toBeGreaterThan(FAR_AHEAD)
    for (let i = 1; i < tokens.length; i++)
      expect(tokens[i]!, `grant ${i} on ${majorities[i]!.join()}`).toBeGreaterThan(tokens[i - 1]!)

    // Unprotected: the largest counter of each majority, nothing written back.
    const naive = unique('q-rotate-naive')
    await nodes.admins[0]!.set(keysOf(naive).fence, FAR_AHEAD.toString())
    const first = await naiveGrant(naive, [0, 1])
    const second = await naiveGrant(naive, [1, 2])
    expect(first).toBeGreaterThan(FAR_AHEAD)
    expect(second).toBeLessThan(first)
  })

  it('a node restarted without persistence and the far-ahead node gone: the third node carries the token, because the second phase raised it', async () => {
    // Own servers, reached directly: this test restarts one, stops one and pauses one.
    const servers = await Promise.all([0, 1, 2].map(() => startRedisServer()))
    const admins = servers.map((s) => connect({ port: s.port }))
    for (const [i, a] of admins.entries()) await ready(a, servers[i]!.url)
    // About tokens, not the delayed restart (tested below): the restarted node may grant at once.
    const locker = makeLocker(
      servers.map((s) => connect({ port: s.port })),
      { commandTimeoutMs: 300, nodeRestartDelayMs: 0 },
    )
    const r = unique('q-amnesia')
    const naive = unique('q-amnesia-naive')
    for (const resource of [r, naive]) await admins[0]!.set(keysOf(resource).fence, FAR_AHEAD.toString())
    const fenceOf = async (i: number, resource: string) => BigInt((await admins[i]!.get(keysOf(resource).fence)) ?? '0')

    // Grant 1 on {A, B} (C stopped for it): A's far-ahead counter is the token; the second phase
    // raises B, and C once it answers again.
    servers[2]!.pause()
    const first = await locker.acquire(r)
    servers[2]!.resume()
    await first.release()
    expect(first.token).toBeGreaterThan(FAR_AHEAD)
    await waitUntil(async () => (await fenceOf(1, r)) >= first.token && (await fenceOf(2, r)) >= first.token, {
      what: 'B and C raised to the token',
    })
    // Unprotected twin: the same grant without a second phase leaves B and C where they were.
    const naiveFirst = await naiveGrant(naive, [0, 1], admins)
    expect(naiveFirst).toBeGreaterThan(FAR_AHEAD)

    await servers[1]!.restart() // B forgets everything: its next counter is a clock seed
    await servers[0]!.stop() // A, whose counter was far ahead, is gone: the majority is {B, C}
    const second = await locker.acquire(r, { waitMs: 3_000 })
    expect(second.token).toBeGreaterThan(first.token)
    await second.release()
    // B seeded its counter from its clock, far below; the grant raised it (or it minted the token).
    expect(await fenceOf(1, r)).toBeGreaterThanOrEqual(second.token)
    // Without the second phase, {B, C} would give a clock seed: far below the earlier token.
    expect(await naiveGrant(naive, [1, 2], admins)).toBeLessThan(naiveFirst)
    await Promise.all(servers.map((s) => s.dispose()))
  })

  it('a node that restarted under a held lock sits out acquires (the restart guard): no second holder; with the guard off (0), a second holder wins a majority', async () => {
    const servers = await Promise.all([0, 1, 2].map(() => startRedisServer()))
    const admins = servers.map((s) => connect({ port: s.port }))
    for (const [i, a] of admins.entries()) await ready(a, servers[i]!.url)
    /** Whether a contender got the lock while the holder (on A and B, B then restarted) still held it. */
    const secondHolder = async (nodeRestartDelayMs: number | undefined): Promise<boolean> => {
      const r = unique('q-restarted')
      const options = {
        ttlMs: 5_000,
        // 1 s per command: with 300 ms the control (guard off) failed on a loaded machine with
        // LockUnavailableError, a reply kept from the test process that long.
        commandTimeoutMs: 1_000,
        ...(nodeRestartDelayMs === undefined ? {} : { nodeRestartDelayMs }),
      }
      const holderClients = servers.map((s) => connect({ port: s.port }))
      const contenderClients = servers.map((s) => connect({ port: s.port }))
      for (const c of [...holderClients, ...contenderClients]) await ready(c, 'a node')
      const holder = makeLocker(holderClients, options)
      const contender = makeLocker(contenderClients, options)
      // C is held by someone else for a moment: the holder's key lands on A and B only.
      await admins[2]!.set(keysOf(r).lock, 'someone-else', 'PX', 5_000)
      // The scripts loaded, so that no try goes out again as EVAL behind what follows it.
      for (const a of admins) for (const script of Object.values(LOCK_SCRIPTS)) await a.script('LOAD', script.lua)
      const lock = await holder.acquire(r)
      await delAfterTry(holderClients[2]!, admins[2]!, keysOf(r).lock) // acquire() resolved on A and B
      await servers[1]!.restart() // B forgets the holder's key
      await waitUntil(() => contenderClients[1]!.status === 'ready', { what: 'the contender reconnected to B' })
      // 2 s, well inside the 5 s lease, and the same with the guard on and off: 300 ms was less
      // than the test process can be kept off the CPU on a loaded 2-core machine, and the control
      // (guard off) then timed out with B and C free (2 of 6 runs beside 3 CPU hogs).
      const { value, error } = await settle(contender.acquire(r, { waitMs: 2_000 }))
      expect(lock.isHeld()).toBe(true)
      await lock.release()
      if (value) {
        await value.release()
        return true
      }
      // No second holder: refused as held, or (a loaded machine, a node's check still failing) as unavailable.
      expect(error instanceof LockTimeoutError || error instanceof LockUnavailableError, String(error)).toBe(true)
      return false
    }
    expect(await secondHolder(0)).toBe(true) // the hole: {B, C} is a majority
    expect(await secondHolder(undefined)).toBe(false)
    expect(await secondHolder(5_000)).toBe(false)
    await Promise.all(servers.map((s) => s.dispose()))
  })

  it("a restarted node whose peers' lease records could not be read in time sits out until they are read: no second holder", async () => {
    // The defect: a read of the records that timed out counted as an answer, so B's check decided
    // on B's own (empty) record, found no orphan, and let B in at once; once A and C answered
    // again, {B, C} granted a second holder (seen in a loaded CI run with a 300 ms commandTimeoutMs).
    const servers = await Promise.all([0, 1, 2].map(() => startRedisServer()))
    const admins = servers.map((s) => connect({ port: s.port }))
    for (const [i, a] of admins.entries()) await ready(a, servers[i]!.url)
    const proxies = await Promise.all(servers.map((s) => startTcpProxy({ port: s.port })))
    try {
      const r = unique('q-unread-records')
      const options = { ttlMs: 10_000, commandTimeoutMs: 300 }
      const holderClients = servers.map((s) => connect({ port: s.port }))
      for (const c of holderClients) await ready(c, 'a node')
      const holder = makeLocker(holderClients, options)
      // C is held by someone else for a moment: the holder's key lands on A and B only.
      await admins[2]!.set(keysOf(r).lock, 'someone-else', 'PX', 10_000)
      const lock = await holder.acquire(r)
      await delAfterTry(holderClients[2]!, admins[2]!, keysOf(r).lock)
      await servers[1]!.restart() // B forgets the holder's key
      // A new contender checks its nodes with A and C cut off: their records go unread.
      const contenderClients = proxies.map((p) => connect({ port: p.port }))
      for (const c of contenderClients) await ready(c, 'a node')
      const contender = makeLocker(contenderClients, options)
      proxies[0]!.partition()
      proxies[2]!.partition()
      const early = await settle(contender.acquire(r, { waitMs: 1_000 }))
      expect(early.value).toBeUndefined() // only B answers: no majority
      proxies[0]!.heal()
      proxies[2]!.heal()
      const { value, error } = await settle(contender.acquire(r, { waitMs: 2_000 }))
      expect(lock.isHeld()).toBe(true)
      await value?.release().catch(() => {})
      expect(value, 'a second holder while the first held the lock').toBeUndefined()
      expect(error instanceof LockTimeoutError || error instanceof LockUnavailableError, String(error)).toBe(true)
      await lock.release()
    } finally {
      for (const p of proxies) await p.close()
      await Promise.all(servers.map((s) => s.dispose()))
    }
  })

  it("a per-call lease longer than the Locker's ttlMs, a node restarted empty, a second Locker (existing, or new after the restart): no second holder with the defaults; with the guard off, two", async () => {
    /** Whether a second Locker got the lock while the first (10 s lease on A and B, B then restarted) held it. */
    const secondHolder = async (
      options: { nodeRestartDelayMs?: number },
      contenderAfterRestart: boolean,
    ): Promise<boolean> => {
      // Servers of its own: a restart is remembered by the others' lease records for as long as a lease may live.
      const servers = await Promise.all([0, 1, 2].map(() => startRedisServer()))
      const admins = servers.map((s) => connect({ port: s.port }))
      for (const [i, a] of admins.entries()) await ready(a, servers[i]!.url)
      const clientsOf = async () => {
        const clients = servers.map((s) => connect({ port: s.port }))
        for (const c of clients) await ready(c, 'a node')
        return clients
      }
      const r = unique('q-long-lease')
      // 1 s per command: a loaded machine keeps a reply from the test process longer than 300 ms,
      // and the contender then fails for that (LockUnavailableError), not for the lock it wants.
      const base = { ttlMs: 1_000, commandTimeoutMs: 1_000, ...options }
      const holderClients = await clientsOf()
      const holder = makeLocker(holderClients, base)
      let contender = contenderAfterRestart ? undefined : makeLocker(await clientsOf(), base)
      if (contender) await (await contender.acquire(unique('q-warm'))).release() // its nodes known before the restart
      // C is held by someone else for a moment: the holder's key lands on A and B only.
      await admins[2]!.set(keysOf(r).lock, 'someone-else', 'PX', 10_000)
      const lock = await holder.acquire(r, { ttlMs: 10_000 })
      await delAfterTry(holderClients[2]!, admins[2]!, keysOf(r).lock)
      await servers[1]!.restart() // B forgets the holder's key
      contender ??= makeLocker(await clientsOf(), base)
      // Past the Locker's own ttlMs (the old default delay), well within the holder's 10 s lease.
      await sleep(1_200)
      // 2 s for the same reason as in the test above; 1.2 + 2 s stays well inside the 10 s lease.
      const { value, error } = await settle(contender.acquire(r, { waitMs: 2_000 }))
      expect(lock.isHeld()).toBe(true)
      await lock.release()
      await Promise.all(servers.map((s) => s.dispose()))
      if (value) {
        await value.release().catch(() => {})
        return true
      }
      // No second holder: refused as held, or (a loaded machine, a node still coming back) as unavailable.
      expect(error instanceof LockTimeoutError || error instanceof LockUnavailableError, String(error)).toBe(true)
      return false
    }
    expect(await secondHolder({ nodeRestartDelayMs: 0 }, false)).toBe(true) // the hole, with the guard off
    expect(await secondHolder({}, false)).toBe(false)
    expect(await secondHolder({}, true)).toBe(false)
  })

  it('a second phase is only paid when the granting nodes minted different tokens', async () => {
    const r = unique('q-phase')
    const clients = nodes.clients()
    for (const c of clients) await ready(c, 'a node')
    const locker = makeLocker(clients)
    const raises = async () => {
      let total = 0
      for (const a of nodes.admins) {
        const calls = await commandCalls(a)
        total += calls['set'] ?? 0
      }
      return total
    }
    // Each grant waits until every node let go of the key, so that every node grants the next
    // one (a node still holding it would refuse, skip its INCR and fall out of step).
    const grantAndLetGo = async () => {
      await (await locker.acquire(r)).release()
      await waitUntil(async () => (await state(r)).lock.every((v) => v === null), { what: 'every node let go' })
    }
    // The first grants seed each node's counter from its own clock (the first grant after a
    // connection reseeds). A node that is always the last to answer keeps its larger seed: the
    // majority before it knows the token, no phase runs, and nothing evens it. So the counters
    // are put in step by hand, far above any clock seed still to come.
    for (let i = 0; i < 2; i++) await grantAndLetGo()
    const top = (await state(r)).fence.reduce<bigint>((m, v) => (v !== null && v > m ? v : m), 0n)
    const inStep = top + 10n ** 12n
    for (const a of nodes.admins) await a.set(keysOf(r).fence, String(inStep), 'PX', 600_000)
    const before = await raises()
    for (let i = 0; i < 20; i++) await grantAndLetGo()
    expect(new Set((await state(r)).fence.map(String))).toEqual(new Set([String(inStep + 20n)]))
    // In step, nothing more is written than the grants' own SET NX (one per node per grant).
    expect((await raises()) - before).toBe(20 * 3)
  })
})

describe('quorum mode: nodes that fail', () => {
  it('one node cut off: acquire, extend and release work without waiting for it; a grant never waits for its deadline', async () => {
    // The defect waits for the cut node's deadline (3 s); the bounds (1 s) leave a loaded machine
    // room (they were 500 ms against a 1 s deadline).
    const locker = nodes.locker({ commandTimeoutMs: 3_000 })
    const r = unique('q-one-down')
    await (await locker.acquire(unique('q-warm'))).release()
    nodes.cut(2)
    try {
      const t = performance.now()
      const lock = await locker.acquire(r)
      expect(performance.now() - t).toBeLessThan(1_000)
      await lock.extend(20_000)
      expect(lock.remainingMs()).toBeGreaterThan(19_000)
      const t2 = performance.now()
      expect(await lock.release()).toBe(true)
      expect(performance.now() - t2).toBeLessThan(1_000)
    } finally {
      nodes.mend(2)
    }
  })

  it('a majority killed, default ioredis options (offline queue, retries): LockUnavailableError within waitMs, and nothing piles up in the offline queues', async () => {
    const servers = await Promise.all([0, 1, 2, 3, 4].map(() => startRedisServer()))
    const clients = servers.map((s) => {
      const c = new Redis({ port: s.port })
      c.on('error', () => {})
      return c
    })
    try {
      for (const [i, c] of clients.entries()) await ready(c, servers[i]!.url)
      const l = eventLog()
      const locker = makeLocker(clients, { onEvent: l.onEvent, commandTimeoutMs: 500 })
      await (await locker.acquire(unique('q-warm'))).release()
      await servers[0]!.stop()
      await servers[1]!.stop()
      // 2 of 5 down: still a majority.
      for (let i = 0; i < 200; i++) await (await locker.acquire(unique('q-2down'))).release()
      await servers[2]!.stop()
      // 3 of 5 down: no majority; typed error within the wait.
      for (const waitMs of [0, 300, 1_000]) {
        const t = performance.now()
        const { error } = await settle(locker.acquire(unique('q-3down'), { waitMs }))
        expect(error).toBeInstanceOf(LockUnavailableError)
        expect(performance.now() - t).toBeLessThan(waitMs + 100 + SLACK_MS)
      }
      // Calls to a node whose connection is down are not sent at all: its offline queue holds only
      // what was in flight when it went down (and their clean-ups, sent at their deadlines).
      await sleep(600)
      const offline = () =>
        clients.slice(0, 3).map((c) => (c as unknown as { offlineQueue: { length: number } }).offlineQueue.length)
      const before = offline()
      for (let i = 0; i < 200; i++) await settle(locker.acquire(unique('q-3down'), { waitMs: 0 }))
      for (let i = 0; i < 50; i++) await settle(locker.acquire(unique('q-3down'), { waitMs: 20 }))
      expect(offline()).toEqual(before)
      for (const n of before) expect(n).toBeLessThanOrEqual(4)
      expect(l.of('unavailable').length).toBeGreaterThanOrEqual(3)
    } finally {
      for (const c of clients) c.disconnect()
      await Promise.all(servers.map((s) => s.dispose()))
    }
  })

  it('a node that stops answering (SIGSTOP): acquires go on without waiting for it, calls for it stop piling up, and it serves again after SIGCONT', async () => {
    const servers = await Promise.all([0, 1, 2].map(() => startRedisServer()))
    const clients = servers.map((s) => connect({ port: s.port }))
    const queued = () => (clients[1] as unknown as { commandQueue: { length: number } }).commandQueue.length
    try {
      for (const [i, c] of clients.entries()) await ready(c, servers[i]!.url)
      const locker = makeLocker(clients, { commandTimeoutMs: 1_000 })
      await (await locker.acquire(unique('q-warm'))).release()
      servers[1]!.pause()
      const cycles: number[] = []
      for (let i = 0; i < 50; i++) {
        const t = performance.now()
        await (await locker.acquire(unique('q-stopped'))).release()
        cycles.push(performance.now() - t)
      }
      // Not waiting for the stopped node's deadline (1 s) in each cycle. The typical cycle, not a
      // bound on them all together: a clean-clone CI run at load 16 took 10.2 s for 100 (~100 ms
      // each) while none waited for a deadline. (Cycle counts and the test's timeout are sized for
      // such a run: with 100 and 300 cycles another timed out at 30 s.)
      const median = cycles.sort((x, y) => x - y)[25]!
      expect(median, `cycles (ms): median ${median}, longest ${cycles.at(-1)}`).toBeLessThan(1_000 / 2)
      // New acquires stop going to it once it has not answered for a while (200 ms); releases of
      // locks whose acquire went to it, until its first call missed its deadline. From then on
      // one call at a time: nothing piles up.
      await sleep(1_100)
      const first = queued()
      const since = performance.now()
      for (let i = 0; i < 150; i++) await (await locker.acquire(unique('q-stopped'))).release()
      // At most one probe per deadline (1 s), each up to 2 calls (an acquire and its clean-up) that
      // stay queued: a slow machine takes longer than one deadline over the 150, so the bound grows
      // with the time taken — far below the 300 calls of one per acquire and release.
      const deadlines = 1 + Math.ceil((performance.now() - since) / 1_000)
      expect(queued()).toBeLessThanOrEqual(first + 2 * deadlines)
      servers[1]!.resume()
      const r = unique('q-resumed')
      await waitUntil(
        async () => {
          const lock = await locker.acquire(r)
          await lock.release()
          return (await clients[1]!.get(keysOf(r).fence)) !== null
        },
        { timeoutMs: 5_000, what: 'the resumed node granting again' },
      )
    } finally {
      await Promise.all(servers.map((s) => s.dispose()))
    }
  }, 120_000)

  it("a reply lost to a reconnect on one node: the lock is granted by the others, and the resent try's grant on that node is given back, not left for its TTL", async () => {
    const locker = nodes.locker({ ttlMs: 30_000, commandTimeoutMs: 2_000 })
    await (await locker.acquire(unique('q-warm'))).release()
    // Node 0 runs the try; its reply is lost. That it ran is read from the server's own count of
    // scripts run, not from the key: the key may already be gone again (the grant on the others
    // comes first, and a loaded machine's poll can miss a key that lived a few ms).
    const scriptsRun = async () => {
      const calls = await commandCalls(nodes.admins[0]!)
      return (calls.evalsha ?? 0) + (calls.eval ?? 0)
    }
    const reconnect = () => nodes.admins[0]!.call('CLIENT', 'KILL', 'TYPE', 'normal', 'SKIPME', 'yes') // ioredis resends
    // On a loaded machine the Locker may not ask node 0 at all (a call of the warm-up still
    // unanswered there while the others answered: node-health in quorum-node.ts); that try is not
    // the case under test, and it is made again, with node 0 reconnected.
    let r = ''
    let pending: Promise<Lock> | undefined
    for (let round = 1; pending === undefined; round++) {
      r = unique('q-lost-reply')
      const before = await scriptsRun()
      const dropped = nodes.proxies[0]!.dropped
      nodes.proxies[0]!.blackhole('replies')
      const acquiring = locker.acquire(r)
      const ran = await waitUntil(async () => (await scriptsRun()) > before, {
        timeoutMs: 5_000,
        what: 'the try ran on node 0',
      }).then(
        () => true,
        (error: unknown) => {
          if (round === 5) throw error
          return false
        },
      )
      // Its reply reached the proxy and was dropped (one that came after the restore would be delivered).
      if (ran) await waitUntil(() => nodes.proxies[0]!.dropped > dropped, { what: "the try's reply dropped" })
      nodes.proxies[0]!.restore()
      await reconnect()
      if (ran) pending = acquiring
      else await (await acquiring).release()
    }
    const lock = await pending
    expect(await lock.release()).toBe(true)
    await waitUntil(async () => (await state(r)).lock.every((v) => v === null), {
      timeoutMs: 3_000,
      what: 'nothing left on any node',
    })
  })

  it('partial grants are given back: with two nodes held by someone else, nothing of ours is left on the third', async () => {
    const r = unique('q-partial')
    const k = keysOf(r)
    await nodes.admins[0]!.set(k.lock, 'someone-else', 'PX', 5_000)
    await nodes.admins[1]!.set(k.lock, 'someone-else', 'PX', 5_000)
    const locker = nodes.locker()
    expect(await locker.tryAcquire(r)).toBeNull()
    const { error } = await settle(locker.acquire(r, { waitMs: 300 }))
    expect(error).toBeInstanceOf(LockTimeoutError)
    await waitUntil(async () => (await nodes.admins[2]!.get(k.lock)) === null, { what: 'the third node released' })
    await nodes.admins[0]!.del(k.lock)
    await nodes.admins[1]!.del(k.lock)
  })

  it('a grant that takes longer than its validity is not returned, and is released on every node', async () => {
    // Own proxies, 80 ms each way: a round trip of 160 ms against a 100 ms TTL.
    const { startLatencyProxy } = await import('./support/latency-proxy.js')
    const proxies = await Promise.all(nodes.servers.map((s) => startLatencyProxy({ port: s.port }, 80)))
    const locker = makeLocker(
      proxies.map((p) => connect({ port: p.port })),
      { ttlMs: 100, commandTimeoutMs: 2_000 },
    )
    const r = unique('q-too-slow')
    const { error } = await settle(locker.acquire(r, { waitMs: 0 }))
    expect(error).toBeInstanceOf(LockUnavailableError)
    await waitUntil(async () => (await state(r)).lock.every((v) => v === null), {
      timeoutMs: 2_000,
      what: 'no key left',
    })
    expect(locker.heldCount).toBe(0)
  })

  it('the watchdog renews on a majority, and the lock is lost (signal aborted) once a majority no longer holds it', async () => {
    // A lease of 3 s, renewed every second: three renewals on {B, C} count, not a sleep of three
    // short TTLs — a loaded machine that starves the watchdog past a 300 ms lease loses the lock
    // rightly, and that is not what this test is about.
    const log = eventLog()
    const locker = nodes.locker({ ttlMs: 3_000, onEvent: log.onEvent })
    const r = unique('q-watchdog')
    nodes.cut(0)
    try {
      const lock = await locker.acquire(r, { autoExtend: true })
      await waitUntil(() => log.of('extended', r).filter((e) => e.auto).length >= 3, {
        timeoutMs: 20_000,
        what: 'three renewals on a majority',
      })
      expect(lock.isHeld()).toBe(true)
      expect(lock.signal.aborted).toBe(false)
      // Someone deletes our key on B: C alone is no majority; the next renewal finds it out.
      await nodes.admins[1]!.del(keysOf(r).lock)
      await waitUntil(() => lock.signal.aborted, { timeoutMs: 10_000, what: 'the signal to abort' })
      expect(lock.signal.reason).toBeInstanceOf(LockLostError)
    } finally {
      nodes.mend(0)
    }
  })

  it('without autoExtend the signal aborts when the validity runs out', async () => {
    const locker = nodes.locker({ ttlMs: 200 })
    const lock: Lock = await locker.acquire(unique('q-expiry'))
    // Not before the validity ran out, and then without a renewal to wait for (a timer; how late
    // it fires is the event loop's business on a loaded machine, so only an upper bound of 1 s).
    const validUntil = performance.now() + lock.remainingMs()
    let abortedAt = Number.NaN
    lock.signal.addEventListener('abort', () => (abortedAt = performance.now()))
    await waitUntil(() => lock.signal.aborted, { timeoutMs: 1_000, what: 'the signal to abort' })
    expect(abortedAt).toBeGreaterThanOrEqual(validUntil - 1)
    expect(locker.heldCount).toBe(0)
  })
})

// Waiting, the fair queue across Lockers and close() in quorum mode: the Locker contract (test/contract).
