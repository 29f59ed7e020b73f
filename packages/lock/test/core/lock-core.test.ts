/**
 * The machinery under the Locker (src/core/) over a backend that is not one of ours: a
 * LockBackend that forwards every call to a single-Redis backend and counts it, as an engine of
 * another kind (etcd, say) would stand in the same place. The lock, re-entry, a semaphore and a
 * leader election run on it unchanged — they see the interfaces of core/lock-source.ts only —
 * and every round trip goes through the stand-in.
 */
import type { Redis } from 'ioredis'
import { beforeAll, describe, expect, it } from 'vitest'
import type { AcquireRequest, BackendListener, LockBackend, LockResource } from '../../src/backend/backend.js'
import { RedisBackend } from '../../src/backend/redis-backend.js'
import { IoredisConnection } from '../../src/client/ioredis-client.js'
import { EventHub } from '../../src/core/event-hub.js'
import { LockCore } from '../../src/core/lock-core.js'
import type { Deadlines } from '../../src/deadline.js'
import { resolveLeadOptions } from '../../src/election/election-options.js'
import { Campaign } from '../../src/election/leadership.js'
import { HeldInContext } from '../../src/family/reentrancy.js'
import { resolveSemaphore, Semaphore } from '../../src/family/semaphore.js'
import { LockLostError, type LockEvent } from '../../src/index.js'
import { resolveLockerOptions, SINGLE_TTL_FLOOR } from '../../src/options.js'
import { connectShared, unique } from '../support/connections.js'
import { waitUntil } from '../support/timing.js'

let redis: Redis
beforeAll(async () => {
  redis = await connectShared()
})

/** A stand-in engine: every call counted by name, then done by a single-Redis backend. */
class CountingBackend implements LockBackend {
  readonly calls = new Map<string, number>()
  readonly #inner: RedisBackend

  constructor(inner: RedisBackend) {
    this.#inner = inner
  }

  get lockerId(): string {
    return this.#inner.lockerId
  }

  #count(name: string): void {
    this.calls.set(name, (this.calls.get(name) ?? 0) + 1)
  }

  resource(name: string): LockResource {
    return this.#inner.resource(name)
  }
  acquire(resource: LockResource, request: AcquireRequest) {
    this.#count('acquire')
    return this.#inner.acquire(resource, request)
  }
  extend(resource: LockResource, ownerId: string, ttlMs: number, timeoutMs: number) {
    this.#count('extend')
    return this.#inner.extend(resource, ownerId, ttlMs, timeoutMs)
  }
  release(resource: LockResource, ownerId: string, handOnAtOnce?: boolean) {
    this.#count('release')
    return this.#inner.release(resource, ownerId, handOnAtOnce)
  }
  leave(resource: LockResource): void {
    this.#inner.leave(resource)
  }
  subscribe(resource: LockResource) {
    this.#count('subscribe')
    return this.#inner.subscribe(resource)
  }
  unsubscribe(resource: LockResource): void {
    this.#inner.unsubscribe(resource)
  }
  inspect(resource: LockResource) {
    this.#count('inspect')
    return this.#inner.inspect(resource)
  }
  markDone(resource: LockResource, ownerId: string, token: bigint, ttlMs: number) {
    this.#count('markDone')
    return this.#inner.markDone(resource, ownerId, token, ttlMs)
  }
  readDone(resource: LockResource) {
    this.#count('readDone')
    return this.#inner.readDone(resource)
  }
  close(until?: number) {
    return this.#inner.close(until)
  }
}

/**
 * A stand-in whose renewals answer late: Redis extends the lease, but the reply is handed over only
 * once the lease it grants has run out, with the event loop held the whole time (a process frozen
 * or starved with the reply waiting in its socket, which Node reads before its overdue timers).
 */
class LateRenewalBackend extends CountingBackend {
  override async extend(resource: LockResource, ownerId: string, ttlMs: number, timeoutMs: number) {
    const validUntil = await super.extend(resource, ownerId, ttlMs, timeoutMs)
    // The event loop held until the lease is over: no timer runs meanwhile.
    if (validUntil !== undefined) while (performance.now() <= validUntil + 20) continue
    return validUntil
  }
}

/** A LockCore over a counting stand-in, with its events recorded. */
function core(prefix: string, reentrant: boolean, late = false) {
  const options = resolveLockerOptions({ prefix, ttlMs: 5_000, waitMs: 5_000 })
  const events = new EventHub()
  const seen: LockEvent[] = []
  events.add((e) => seen.push(e))
  let backend: CountingBackend | undefined
  const c = new LockCore({
    options,
    ttlFloor: SINGLE_TTL_FLOOR,
    store: 'Redis',
    events,
    backend: (deadlines: Deadlines, listener: BackendListener) => {
      const queueLeaseMs = 3 * options.pollMs + options.commandTimeoutMs
      const inner = new RedisBackend(new IoredisConnection(redis), { ...options, queueLeaseMs }, deadlines, listener)
      backend = late ? new LateRenewalBackend(inner) : new CountingBackend(inner)
      return backend
    },
    context: reentrant ? new HeldInContext() : undefined,
  })
  return { core: c, backend: backend!, seen, options, events }
}

describe('LockCore over a LockBackend of another kind', () => {
  it('acquire, re-entry, tryAcquire, inspect: every round trip goes through the stand-in, and the events are the Locker’s', async () => {
    const { core: c, backend, seen } = core(unique('fl-core') + ':', true)
    const r = unique('core-lock')
    const lock = await c.acquire(r)
    expect(typeof lock.token).toBe('bigint')
    // Inside lock.run(), an acquire of the same resource re-enters: the same token, no round trip.
    const inner = await lock.run(() => c.acquire(r))
    expect(inner.token).toBe(lock.token)
    expect(backend.calls.get('acquire')).toBe(1)
    await inner.release()
    expect(await c.tryAcquire(r)).toBeNull()
    expect((await c.inspect(r)).state).toBe('held')
    expect(await lock.release()).toBe(true)
    expect(backend.calls.get('release')).toBe(1)
    expect(backend.calls.get('inspect')).toBe(1)
    expect(seen.map((e) => e.type)).toEqual(['acquired', 'reentered', 'contended', 'released'])
    await c.close(performance.now() + 2_000)
  })

  it('a semaphore and a leader election run on it through the small interfaces, never a Locker', async () => {
    const prefix = unique('fl-core') + ':'
    const main = core(prefix, true)
    const permits = core(prefix + 'sem:', false)
    const s = resolveSemaphore(unique('core-sem'), { permits: 2 })
    const semaphore = new Semaphore(
      {
        permits: () => permits.core,
        defaults: main.options,
        ttlFloor: SINGLE_TTL_FLOOR,
        emit: main.events.emit,
        get listening() {
          return main.events.listening
        },
        get closed() {
          return main.core.closed
        },
      },
      s.name,
      s.permits,
      s.names,
    )
    const [a, b] = [await semaphore.acquire(), await semaphore.acquire()]
    expect(await semaphore.tryAcquire()).toBeNull()
    await Promise.all([a.release(), b.release()])
    expect(permits.backend.calls.get('acquire')).toBeGreaterThanOrEqual(3)

    const terms: bigint[] = []
    const campaign = new Campaign(
      { acquire: (r, o) => main.core.acquire(r, o), emit: main.events.emit, closed: false },
      resolveLeadOptions(
        unique('core-lead'),
        { onElected: (term: bigint) => void terms.push(term) },
        5_000,
        SINGLE_TTL_FLOOR,
      ),
    )
    await waitUntil(() => campaign.isLeader, { timeoutMs: 30_000, what: 'elected' })
    expect(terms).toEqual([campaign.term])
    await campaign.stop()
    expect(main.backend.calls.get('release')).toBeGreaterThanOrEqual(1)
    await Promise.all([main.core.close(performance.now() + 2_000), permits.core.close(performance.now() + 2_000)])
  })
})

describe('a renewal whose reply is read after the lease it grants ran out', () => {
  it('is a lost lock (expired), never an extension: extend() throws LockLostError, the watchdog emits no extended', async () => {
    const { core: c, seen } = core(unique('fl-core') + ':', false, true)
    const byHand = await c.acquire(unique('core-late'), { ttlMs: 300, autoExtend: false })
    await expect(byHand.extend(300)).rejects.toBeInstanceOf(LockLostError)
    expect(byHand.isHeld()).toBe(false)
    expect(byHand.signal.reason).toMatchObject({ reason: 'expired' })
    const watched = await c.acquire(unique('core-late'), { ttlMs: 300, autoExtend: true })
    await waitUntil(() => watched.signal.aborted, { timeoutMs: 5_000, what: 'the watched lock lost' })
    expect(watched.signal.reason).toMatchObject({ reason: 'expired' })
    expect(seen.filter((e) => e.type === 'extended')).toEqual([])
    expect(seen.filter((e) => e.type === 'lost').map((e) => (e as { reason: string }).reason)).toEqual([
      'expired',
      'expired',
    ])
    await c.close(performance.now() + 2_000)
  })
})
