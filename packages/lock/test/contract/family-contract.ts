/**
 * The lock family's contract (issue 22), run over every backend next to locker-contract.ts:
 * reentrancy, inspect(), and (as they come) several resources at once and semaphores.
 */
import { describe, expect, it } from 'vitest'
import { InvalidLockOptionError, LockTimeoutError, type Lock } from '../../src/index.js'
import { unique } from '../support/connections.js'
import { eventLog } from '../support/events.js'
import { settle, waitUntil } from '../support/timing.js'
import type { ContractDeployment } from './locker-contract.js'

/** A fenced register like the stores a holder writes to: it takes a write whose token is not below the last. */
export interface FencedStore {
  write(name: string, token: bigint): Promise<boolean>
}

export function familyContract(name: string, deployment: ContractDeployment, store: () => FencedStore): void {
  describe(`the lock family on ${name}`, () => {
    it('reentrancy: nested three deep with the same token and signal; only the outermost release frees; the outer write after the inner ones is not stale', async () => {
      const r = unique('f-reenter')
      const log = eventLog()
      const locker = deployment.locker({ ttlMs: 5_000, onEvent: log.onEvent })
      const fence = store()
      const accepted: boolean[] = []
      const outerHolds = deferred<Lock>()
      const parallelWaits = deferred<void>()
      const outerRun = locker.using(r, async (outer) => {
        outerHolds.resolve(outer)
        await parallelWaits.promise
        const second = await locker.acquire(r)
        expect(second).not.toBe(outer)
        expect(second.token).toBe(outer.token)
        expect(second.signal).toBe(outer.signal)
        accepted.push(await fence.write(r, second.token))
        await locker.using(r, async (third) => {
          expect(third.token).toBe(outer.token)
          expect(third.holds).toBe(3)
          accepted.push(await fence.write(r, third.token))
        })
        expect(await second.release()).toBe(true)
        expect(second.isHeld()).toBe(false)
        expect(outer.isHeld()).toBe(true)
        expect(outer.holds).toBe(1)
        expect((await deployment.traces(r)).held).toBeGreaterThan(0)
        // The outer holder's write after the inner ones finished: the same token, not stale.
        accepted.push(await fence.write(r, outer.token))
        expect(parallelDone).toBe(false)
        return outer.token
      })
      // Another request of this process: the test's own async context, not the routine's.
      const outerLock = await outerHolds.promise
      let parallelDone = false
      const contended = log.next('contended', { resource: r })
      const parallel = locker.acquire(r, { waitMs: 10_000 }).finally(() => (parallelDone = true))
      await contended
      parallelWaits.resolve()
      expect(await outerRun).toBe(outerLock.token)
      const next = await parallel
      expect(next.token).toBeGreaterThan(outerLock.token)
      expect(accepted).toEqual([true, true, true])
      expect(log.of('reentered', r).map((e) => e.holds)).toEqual([2, 3])
      expect(log.of('acquired', r)).toHaveLength(2)
      await next.release()
    })

    it('reentrancy stops at the Locker: another Locker in the same context waits, and with reentrant: false a nested acquire waits for itself until its timeout', async () => {
      const r = unique('f-reenter-off')
      const a = deployment.locker()
      const b = deployment.locker()
      await a.using(r, async () => {
        expect((await settle(b.acquire(r, { waitMs: 300 }))).error).toBeInstanceOf(LockTimeoutError)
      })
      const off = deployment.locker({ reentrant: false })
      await off.using(r, async () => {
        const { error, ms } = await settle(off.acquire(r, { waitMs: 300 }))
        expect(error).toBeInstanceOf(LockTimeoutError)
        expect(ms).toBeGreaterThanOrEqual(295)
      })
      expect(() => deployment.locker({ reentrant: 'yes' as unknown as boolean })).toThrow(InvalidLockOptionError)
    })

    it('lock.run(): a lock taken by hand is re-entered inside run() only', async () => {
      const r = unique('f-run')
      const locker = deployment.locker()
      const lock = await locker.acquire(r)
      const inner = await lock.run(() => locker.tryAcquire(r))
      expect(inner?.token).toBe(lock.token)
      await inner!.release()
      // Outside run(), the same context is anyone: the lock is held.
      expect(await locker.tryAcquire(r)).toBeNull()
      expect(await lock.release()).toBe(true)
      await waitUntil(async () => (await deployment.traces(r)).held === 0, { what: 'freed everywhere' })
    })

    it('inspect(): free, held with its TTL and token, waiting lockers; read-only: it neither takes the lock nor queues', async () => {
      const r = unique('f-inspect')
      const locker = deployment.locker()
      expect(await locker.inspect(r)).toMatchObject({ resource: r, state: 'free', holderTtlMs: 0, waiting: 0 })
      expect((await locker.inspect(r)).lastToken).toBeUndefined()
      const lock = await locker.acquire(r, { ttlMs: 10_000 })
      const held = await deployment.locker().inspect(r)
      expect(held).toMatchObject({ state: 'held', lastToken: lock.token, waiting: 0 })
      expect(held.holderTtlMs).toBeGreaterThan(5_000)
      expect(held.holderTtlMs).toBeLessThanOrEqual(10_000)
      expect(await deployment.traces(r)).toMatchObject({ queued: 0 })
      const waiter = deployment.locker()
      const waiting = waiter.acquire(r, { waitMs: 10_000 })
      await waitUntil(async () => (await locker.inspect(r)).waiting === 1, { what: 'one locker waiting' })
      await lock.release()
      const next = await waiting
      const after = await locker.inspect(r)
      expect(after).toMatchObject({ state: 'held', lastToken: next.token, waiting: 0 })
      await next.release()
      await waitUntil(async () => (await locker.inspect(r)).state === 'free', { what: 'free' })
      expect((await locker.inspect(r)).lastToken).toBe(next.token)
      await expect(locker.inspect('')).rejects.toBeInstanceOf(InvalidLockOptionError)
    })
  })
}

function deferred<T>(): { promise: Promise<T>; resolve: (value: T) => void } {
  let resolve!: (value: T) => void
  const promise = new Promise<T>((r) => (resolve = r))
  return { promise, resolve }
}
