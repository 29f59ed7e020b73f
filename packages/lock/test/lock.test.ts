import type { Redis } from 'ioredis'
import { beforeAll, describe, expect, it } from 'vitest'
import { LockLostError, LockUnavailableError, resourceKeys, type Lock, type Locker } from '../src/index.js'
import { connectShared, makeLocker, unique } from './support/connections.js'
import { eventLog, type EventLog } from './support/events.js'
import { settle, sleep } from './support/timing.js'

const PREFIX = unique('fl-test-lock') + ':'

let redis: Redis
let log: EventLog
let mine: Locker
let theirs: Locker
const keyOf = (lock: Lock) => resourceKeys(PREFIX, lock.resource).lock

beforeAll(async () => {
  redis = await connectShared()
  log = eventLog()
  mine = makeLocker(redis, { prefix: PREFIX, onEvent: log.onEvent })
  theirs = makeLocker(await connectShared(), { prefix: PREFIX })
})

describe('only the owner releases or extends', () => {
  it('after our lease expired and another locker took it: release() is false and extend() throws, their lock untouched', async () => {
    const resource = unique('takeover')
    const ours = await mine.acquire(resource, { ttlMs: 100 })
    await sleep(130)
    const next = await theirs.tryAcquire(resource, { ttlMs: 5_000 })
    expect(next).not.toBeNull()
    expect(next!.token).toBeGreaterThan(ours.token)
    const theirOwner = await redis.get(keyOf(next!))
    const theirPttl = await redis.pttl(keyOf(next!))

    const extend = await settle(ours.extend(60_000))
    expect(extend.error).toBeInstanceOf(LockLostError)
    // Lost when its lease ran out on our clock, before anyone took it.
    expect(extend.error).toMatchObject({ resource, token: ours.token, reason: 'expired' })
    expect(await ours.release()).toBe(false)

    // Their key still holds their owner id, with its own TTL (not stretched to 60 s).
    expect(await redis.get(keyOf(next!))).toBe(theirOwner)
    expect(await redis.pttl(keyOf(next!))).toBeLessThanOrEqual(theirPttl)
    expect(await mine.tryAcquire(resource)).toBeNull()
    expect(await next!.release()).toBe(true)

    // Control: a release without the owner check (a plain DEL) would have freed their lock.
    const again = (await theirs.tryAcquire(resource, { ttlMs: 5_000 }))!
    await redis.del(keyOf(again))
    expect(await mine.tryAcquire(resource)).not.toBeNull()
  })

  it('a released handle stays released: a second release() returns the first result and leaves the next holder alone', async () => {
    const resource = unique('twice')
    const first = await mine.acquire(resource, { ttlMs: 5_000 })
    expect(await first.release()).toBe(true)
    const second = await mine.acquire(resource, { ttlMs: 5_000, waitMs: 0 })
    expect(await first.release()).toBe(true)
    expect(await redis.exists(keyOf(second))).toBe(1)
    expect(second.isHeld()).toBe(true)
    await expect(first.extend()).rejects.toBeInstanceOf(LockLostError)
    expect(await redis.pttl(keyOf(second))).toBeLessThanOrEqual(5_000)
    expect(await second.release()).toBe(true)
  })
})

describe('expiry', () => {
  it('release() returns false after the lease expired (outcome "expired"); true while held (outcome "released")', async () => {
    const short = await mine.acquire(unique('exp'), { ttlMs: 60 })
    await sleep(90)
    expect(short.isHeld()).toBe(false)
    expect(short.remainingMs()).toBe(0)
    expect(await short.release()).toBe(false)
    const held = await mine.acquire(unique('held'), { ttlMs: 5_000 })
    expect(held.isHeld()).toBe(true)
    expect(held.remainingMs()).toBeGreaterThan(4_000)
    expect(await held.release()).toBe(true)
    expect(held.isHeld()).toBe(false)
    // The lease ran out first: the lock was lost ('expired') before release() came.
    expect(log.of('lost', short.resource)).toMatchObject([{ reason: 'expired', token: short.token }])
    expect(log.of('released', short.resource)).toMatchObject([
      { outcome: 'expired', wasLost: true, token: short.token },
    ])
    expect(log.of('released', held.resource)).toMatchObject([
      { outcome: 'released', wasLost: false, token: held.token },
    ])
    expect(log.of('released', held.resource)[0]!.heldMs).toBeGreaterThanOrEqual(0)
  })

  it('extend() after expiry (nobody took it) throws the LockLostError the signal aborted with, and lost was emitted once', async () => {
    const lock = await mine.acquire(unique('exp-extend'), { ttlMs: 60 })
    await sleep(90)
    const { error } = await settle(lock.extend())
    expect(error).toBeInstanceOf(LockLostError)
    expect(lock.signal.aborted).toBe(true)
    expect(lock.signal.reason).toBe(error)
    expect(log.of('lost', lock.resource)).toMatchObject([{ token: lock.token, reason: 'expired' }])
    expect(await redis.exists(keyOf(lock))).toBe(0)
    expect(await lock.release()).toBe(false)
    expect(log.of('released', lock.resource)).toMatchObject([{ outcome: 'expired', wasLost: true }])
  })

  it('without autoExtend, a lease that runs out on our clock is lost: signal aborted ("expired"), lost event, off heldCount', async () => {
    // Issue 13, defect 4: the signal never aborted and heldCount kept counting the lock, though
    // isHeld() was already false and another holder could take the lock.
    const l = eventLog()
    const locker = makeLocker(redis, { prefix: PREFIX, onEvent: l.onEvent })
    const lock = await locker.acquire(unique('runs-out'), { ttlMs: 150 })
    const signal = lock.signal
    expect(locker.heldCount).toBe(1)
    const lost = l.next('lost', { resource: lock.resource, timeoutMs: 1_000 })
    await sleep(200)
    const next = await theirs.tryAcquire(lock.resource, { ttlMs: 5_000 })
    expect(next).not.toBeNull()
    expect(lock.isHeld()).toBe(false)
    expect(signal.aborted).toBe(true)
    expect(signal.reason).toBeInstanceOf(LockLostError)
    expect(signal.reason).toMatchObject({ reason: 'expired', token: lock.token })
    expect(await lost).toMatchObject({ reason: 'expired', token: lock.token })
    expect(locker.heldCount).toBe(0)
    expect(await lock.release()).toBe(false)
    expect(l.of('released', lock.resource)).toMatchObject([{ outcome: 'expired', wasLost: true }])
    expect(await next!.release()).toBe(true)
  })

  it('extend(ttlMs) resets the lease from now while we own it', async () => {
    // A lease of 2 s, renewed half-way: a stall of this process under 1 s loses nothing (with a
    // 200 ms lease renewed at 120 ms, a clean-clone CI run at load 16 lost it before the renewal).
    const lock = await mine.acquire(unique('extend'), { ttlMs: 2_000 })
    await sleep(1_000)
    await lock.extend(10_000)
    expect(lock.ttlMs).toBe(10_000)
    // From now: not added to what was left (~1 s).
    const pttl = await redis.pttl(keyOf(lock))
    expect(pttl).toBeGreaterThan(9_000)
    expect(pttl).toBeLessThanOrEqual(10_000)
    expect(lock.remainingMs()).toBeGreaterThan(9_000)
    await sleep(1_200) // past the original 2 s
    expect(lock.isHeld()).toBe(true)
    expect(await theirs.tryAcquire(lock.resource)).toBeNull()
    expect(log.of('extended', lock.resource)).toMatchObject([{ ttlMs: 10_000, auto: false, token: lock.token }])
    expect(await lock.release()).toBe(true)
  })
})

describe('the watchdog (acquire with autoExtend)', () => {
  it('keeps the lock across 5x its TTL, isHeld() true throughout; control: without it the lock is gone after one TTL', async () => {
    // 600 ms: a renewal every 200 ms, so a stall of the test process under ~400 ms loses nothing.
    const ttlMs = 600
    const kept = await mine.acquire(unique('watchdog'), { ttlMs, autoExtend: true })
    const keptToo = (await mine.tryAcquire(unique('watchdog-try'), { ttlMs, autoExtend: true }))!
    const control = await mine.acquire(unique('no-watchdog'), { ttlMs })
    let heldSamples = 0
    let notHeldSamples = 0
    let stolen = 0
    const end = performance.now() + 5 * ttlMs
    while (performance.now() < end) {
      if (kept.isHeld()) heldSamples++
      else notHeldSamples++
      if (await theirs.tryAcquire(kept.resource, { ttlMs: 5_000 })) stolen++
      await sleep(25)
    }
    expect(notHeldSamples).toBe(0)
    expect(heldSamples).toBeGreaterThan(20)
    expect(stolen).toBe(0)
    expect(kept.signal.aborted).toBe(false)
    // About one renewal per ttl/3: 15 in 5 TTLs; allow for a loaded machine.
    const renewals = log.of('extended', kept.resource)
    expect(renewals.length).toBeGreaterThanOrEqual(10)
    expect(renewals.every((e) => e.auto && e.ttlMs === ttlMs)).toBe(true)
    expect(log.of('lost', kept.resource)).toEqual([])
    expect(await kept.release()).toBe(true)
    // tryAcquire({ autoExtend }) runs the same watchdog.
    expect(keptToo.isHeld()).toBe(true)
    expect(await theirs.tryAcquire(keptToo.resource)).toBeNull()
    expect(await keptToo.release()).toBe(true)

    expect(control.isHeld()).toBe(false)
    const taken = await theirs.tryAcquire(control.resource)
    expect(taken?.token).toBeGreaterThan(control.token)
    await taken?.release()
  })

  it('a DEL of the key from outside fires lost and aborts lock.signal with LockLostError within one renewal period', async () => {
    const ttlMs = 300
    const period = ttlMs / 3
    // Slack over one period: one Redis round trip (<1 ms here) plus timer and event-loop delay
    // on a loaded 2-core machine running several test files at once.
    const slackMs = 60
    const lock = await mine.acquire(unique('del'), { ttlMs, autoExtend: true })
    const bystander = await mine.acquire(unique('bystander'), { ttlMs, autoExtend: true })
    const unhandled: unknown[] = []
    const onUnhandled = (reason: unknown) => unhandled.push(reason)
    process.on('unhandledRejection', onUnhandled)
    try {
      let abortedAt = 0
      lock.signal.addEventListener('abort', () => {
        abortedAt = performance.now()
      })
      await sleep(period * 1.5) // land somewhere inside a renewal period
      const lost = log.next('lost', { resource: lock.resource, timeoutMs: 2_000 })
      expect(await redis.del(keyOf(lock))).toBe(1)
      const deletedAt = performance.now()
      const event = await lost
      expect(event.at - deletedAt).toBeLessThanOrEqual(period + slackMs)
      expect(event).toMatchObject({ token: lock.token, reason: 'not-owner' })
      expect(abortedAt - deletedAt).toBeLessThanOrEqual(period + slackMs)
      expect(lock.signal.reason).toBeInstanceOf(LockLostError)
      expect(lock.signal.reason).toMatchObject({ resource: lock.resource, token: lock.token, reason: 'not-owner' })
      expect(lock.isHeld()).toBe(false)
      await expect(lock.extend()).rejects.toBe(lock.signal.reason)
      expect(await lock.release()).toBe(false)
      // Control: the lock nobody touched was not lost.
      expect(bystander.signal.aborted).toBe(false)
      expect(bystander.isHeld()).toBe(true)
      await sleep(50)
      expect(unhandled).toEqual([])
    } finally {
      process.off('unhandledRejection', onUnhandled)
      await bystander.release()
    }
  })

  it('extend() and release() fail with LockUnavailableError, state unchanged, when Redis stops answering', async () => {
    // Forwards script calls to the real client until `hang` is set; then they never answer.
    let hang = false
    const never = () => new Promise(() => {})
    const flaky = {
      evalsha: (...args: unknown[]) =>
        hang ? never() : (redis.evalsha as (...a: unknown[]) => Promise<unknown>)(...args),
      eval: (...args: unknown[]) => (hang ? never() : (redis.eval as (...a: unknown[]) => Promise<unknown>)(...args)),
      duplicate: () => redis.duplicate(),
    } as unknown as Redis
    const flog = eventLog()
    const locker = makeLocker(flaky, { prefix: PREFIX, commandTimeoutMs: 80, onEvent: flog.onEvent })
    const lock = await locker.acquire(unique('hung'), { ttlMs: 5_000 })
    hang = true
    const extend = await settle(lock.extend())
    expect(extend.error).toBeInstanceOf(LockUnavailableError)
    expect(extend.error).toMatchObject({ operation: 'extend', resource: lock.resource })
    expect(extend.ms).toBeLessThan(80 + 300)
    expect(lock.isHeld()).toBe(true)
    expect(lock.signal.aborted).toBe(false)
    const release = await settle(lock.release())
    expect(release.error).toBeInstanceOf(LockUnavailableError)
    expect(release.error).toMatchObject({ operation: 'release' })
    expect(flog.of('error').map((e) => e.operation)).toEqual(['extend', 'release'])
    // The key is still ours in Redis: it will expire after its TTL.
    expect(await redis.pttl(keyOf(lock))).toBeGreaterThan(4_000)
    await redis.del(keyOf(lock))
  })
})
