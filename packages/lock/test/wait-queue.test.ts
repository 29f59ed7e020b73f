/**
 * The local wait queues on their own, over a scripted host: when the head tries, what ends a
 * waiter, what the queues ask of the backend. What Redis decides (grant or miss) is decided here
 * by the script of each test; every such decision is exercised against real redis-servers in the
 * other files. This file checks the scheduling rules, which no backend can change: the queues
 * are the same over any backend.
 */
import { AsyncLocalStorage } from 'node:async_hooks'
import { describe, expect, it } from 'vitest'
import type { LockBackend, LockResource, QueueMode } from '../src/backend/backend.js'
import { LockAbortedError, LockTimeoutError, resourceKeys, type Lock } from '../src/index.js'
import type { ResolvedAcquire } from '../src/options.js'
import { WaitQueues, type Attempt, type WaitHost } from '../src/waiting/wait-queues.js'
import { settle, sleep, waitUntil } from './support/timing.js'

interface Try {
  readonly at: number
  readonly queue: QueueMode
  readonly first: boolean
  answer(attempt: Attempt): void
}

/**
 * A host whose tries wait for the test to answer them, and a backend that records calls;
 * `outcome` hears each outcome the queues report (its event, in a Locker).
 */
function scripted(pollMs: number, outcome: (what: 'acquired' | 'timeout' | 'aborted') => void = () => {}) {
  const tries: Try[] = []
  const calls: string[] = []
  const released: Lock[] = []
  const backend = {
    subscribe: async (r: LockResource) => void calls.push(`subscribe ${r.name}`),
    unsubscribe: (r: LockResource) => void calls.push(`unsubscribe ${r.name}`),
    leave: (r: LockResource) => void calls.push(`leave ${r.name}`),
  } as unknown as LockBackend
  const host: WaitHost = {
    backend,
    pollMs,
    closed: false,
    attempt: (_r, _o, _sentAt, _waitUntil, first, queue) =>
      new Promise<Attempt>((resolve) => tries.push({ at: performance.now(), queue, first, answer: resolve })),
    contended: () => {},
    acquired: () => outcome('acquired'),
    giveUp: (resource, start) => (outcome('timeout'), new LockTimeoutError(resource, performance.now() - start)),
    aborted: (resource, start, signal) => (
      outcome('aborted'),
      new LockAbortedError(resource, performance.now() - start, signal?.reason)
    ),
    closedError: () => new Error('closed'),
  }
  const lock = (): Lock => {
    const l = { release: async () => (released.push(l), true), ttlMs: 1_000 } as unknown as Lock
    return l
  }
  return { queues: new WaitQueues(host), tries, calls, released, lock }
}

const MISS: Attempt = { granted: false, holderTtlMs: 60_000 }
const resource: LockResource = { name: 'r', keys: resourceKeys('t:', 'r') }
const options = (o: Partial<ResolvedAcquire> = {}): ResolvedAcquire => ({
  ttlMs: 1_000,
  waitMs: 10_000,
  signal: undefined,
  autoExtend: false,
  ...o,
})

/** Answers each try as it comes with a miss (until stopped). */
function missAll(tries: Try[]): () => void {
  let answered = 0
  const timer = setInterval(() => {
    while (answered < tries.length) tries[answered++]!.answer(MISS)
  }, 1)
  return () => clearInterval(timer)
}

describe('the wait queue', () => {
  it('the head tries at least every pollMs (× 1.2) while hand-offs to other lockers keep arriving', async () => {
    const { queues, tries } = scripted(200)
    const stop = missAll(tries)
    const waiting = settle(queues.acquire(resource, options({ waitMs: 2_500 }), performance.now()))
    await waitUntil(() => tries.length >= 2, { what: 'the first tries' })
    const from = performance.now()
    // A hand-off to another locker every 50 ms, each saying "try again in 501 ms".
    while (performance.now() - from < 2_000) {
      queues.handedElsewhere('r', 500)
      await sleep(50)
    }
    const gaps = tries.slice(1).map((t, i) => t.at - tries[i]!.at)
    // At most a poll (× 1.2 jitter) plus timer delay; a loaded machine's delay is given room up to
    // well below what the defect looked like (every hand-off pushing the try 501 ms on: no try at all).
    expect(Math.max(...gaps.slice(1))).toBeLessThanOrEqual(200 * 1.2 + 150)
    expect(tries.every((t, i) => i === 0 || t.queue === 'join')).toBe(true)
    expect((await waiting).error).toBeInstanceOf(LockTimeoutError)
    stop()
  })

  it('a hint brings the next try earlier: a hand-off that runs out in 100 ms, under a 5 s poll', async () => {
    const { queues, tries } = scripted(5_000)
    const stop = missAll(tries)
    const waiting = settle(queues.acquire(resource, options({ waitMs: 1_000 }), performance.now()))
    await waitUntil(() => tries.length === 2, { what: 'the subscribed try' })
    await sleep(50)
    const hintedAt = performance.now()
    queues.handedElsewhere('r', 100)
    await waitUntil(() => tries.length === 3, { timeoutMs: 1_000, what: 'the hinted try' })
    expect(tries[2]!.at - hintedAt).toBeGreaterThanOrEqual(95)
    expect(tries[2]!.at - hintedAt).toBeLessThan(600) // the poll alone: 5 s
    await waiting
    stop()
  })

  it('a release wakes the head at once; the first try is lean unless the queue lingers, later ones join', async () => {
    const { queues, tries, calls, lock } = scripted(5_000)
    const first = queues.acquire(resource, options(), performance.now())
    await waitUntil(() => tries.length === 1)
    expect(tries[0]).toMatchObject({ first: true, queue: 'none' })
    tries[0]!.answer(MISS)
    await waitUntil(() => tries.length === 2, { what: 'the try after subscribing' })
    expect(calls).toEqual(['subscribe r'])
    expect(tries[1]).toMatchObject({ first: false, queue: 'join' })
    tries[1]!.answer(MISS)
    await sleep(20)
    queues.wake('r')
    // At once: the woken try is made inside wake() (an ordering fact, not a bound a loaded
    // machine can miss); the poll alone would take 5 s.
    expect(tries).toHaveLength(3)
    const granted = lock()
    tries[2]!.answer({ granted: true, lock: granted })
    expect(await first).toBe(granted)
    // Our waiter is served: the queue tells the backend to leave the Redis queue.
    expect(calls).toEqual(['subscribe r', 'leave r'])
    // The queue lingers (pollMs): the next acquire's first try joins at once.
    const second = queues.acquire(resource, options(), performance.now())
    await waitUntil(() => tries.length === 4)
    expect(tries[3]).toMatchObject({ first: true, queue: 'join' })
    tries[3]!.answer({ granted: true, lock: lock() })
    await second
  })

  it('an abort while the head’s try is in flight rejects at once; a grant that comes later is released', async () => {
    const { queues, tries, released, lock, calls } = scripted(5_000)
    const controller = new AbortController()
    const waiting = settle(queues.acquire(resource, options({ signal: controller.signal }), performance.now()))
    await waitUntil(() => tries.length === 1)
    tries[0]!.answer(MISS)
    await waitUntil(() => tries.length === 2)
    controller.abort()
    // An ordering check, not a clock: the acquire rejects while the head's try is still unanswered
    // (it is answered only below) and before any other try; its wait (10 s) is far off. A bound of
    // 20 ms here failed once on a machine at load 25 (724 ms).
    const { error } = await waiting
    expect(error).toBeInstanceOf(LockAbortedError)
    expect(tries).toHaveLength(2)
    expect(calls).toContain('leave r')
    const late = lock()
    tries[1]!.answer({ granted: true, lock: late })
    await waitUntil(() => released.includes(late), { what: 'the late grant to be released' })
  })

  it('an abort while the first try is in flight rejects at once; its late grant is released', async () => {
    const { queues, tries, released, lock } = scripted(5_000)
    const controller = new AbortController()
    const waiting = settle(queues.acquire(resource, options({ signal: controller.signal }), performance.now()))
    await waitUntil(() => tries.length === 1)
    controller.abort()
    expect((await waiting).error).toBeInstanceOf(LockAbortedError)
    const late = lock()
    tries[0]!.answer({ granted: true, lock: late })
    await waitUntil(() => released.includes(late), { what: 'the late grant to be released' })
  })

  it('waiters are served oldest first; one behind another does not try (no barging), and the head says more of ours wait', async () => {
    const { queues, tries, lock } = scripted(5_000)
    const order: number[] = []
    const a = queues.acquire(resource, options(), performance.now()).then(() => order.push(1))
    await waitUntil(() => tries.length === 1)
    tries[0]!.answer(MISS)
    await waitUntil(() => tries.length === 2)
    tries[1]!.answer(MISS)
    const b = queues.acquire(resource, options(), performance.now()).then(() => order.push(2))
    await sleep(20)
    expect(tries).toHaveLength(2) // b queued behind a without a try of its own
    queues.wake('r')
    await waitUntil(() => tries.length === 3)
    expect(tries[2]!.queue).toBe('stay') // a tries, and b waits here too: keep our place in Redis
    tries[2]!.answer({ granted: true, lock: lock() })
    // a holds the lock now; b tries when a's release wakes it (here, a release elsewhere).
    await sleep(20)
    expect(tries).toHaveLength(3)
    queues.wake('r')
    await waitUntil(() => tries.length === 4)
    expect(tries[3]!.queue).toBe('join')
    tries[3]!.answer({ granted: true, lock: lock() })
    await Promise.all([a, b])
    expect(order).toEqual([1, 2])
  })

  it('reports each waiter’s outcome in the async context of its acquire, whatever settled it: a wake from elsewhere, a timer, an abort', async () => {
    // A listener (a tracer making the acquire's span) reads the caller's context when it hears
    // the outcome: granted after a wake that arrived on another context (a pub/sub message, another
    // waiter's release), timed out by a timer, aborted by someone else's abort().
    const als = new AsyncLocalStorage<string>()
    const heard: [string, string | undefined][] = []
    const { queues, tries, lock } = scripted(5_000, (what) => heard.push([what, als.getStore()]))
    const controller = new AbortController()
    const a = als.run('caller a', () => settle(queues.acquire(resource, options(), performance.now())))
    await waitUntil(() => tries.length === 1)
    als.run('redis', () => tries[0]!.answer(MISS))
    await waitUntil(() => tries.length === 2)
    als.run('redis', () => tries[1]!.answer(MISS))
    const b = als.run('caller b', () => settle(queues.acquire(resource, options({ waitMs: 150 }), performance.now())))
    const c = als.run('caller c', () =>
      settle(queues.acquire(resource, options({ signal: controller.signal }), performance.now())),
    )
    als.run('aborter', () => controller.abort())
    await waitUntil(() => heard.length === 1)
    als.run('subscriber', () => queues.wake('r'))
    await waitUntil(() => tries.length === 3)
    als.run('redis', () => tries[2]!.answer({ granted: true, lock: lock() }))
    expect((await a).error).toBeUndefined()
    expect((await b).error).toBeInstanceOf(LockTimeoutError)
    expect((await c).error).toBeInstanceOf(LockAbortedError)
    // (Sorted: under load the timeout may come before the grant.)
    expect(heard.sort()).toEqual([
      ['aborted', 'caller c'],
      ['acquired', 'caller a'],
      ['timeout', 'caller b'],
    ])
  })
})
