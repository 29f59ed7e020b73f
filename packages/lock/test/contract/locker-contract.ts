/**
 * The Locker's contract, one suite for every backend of the LockBackend seam: the same tests run
 * over a single Redis, over a quorum of independent masters (and, as they come, Sentinel, Cluster
 * and others), each through a factory of its own (the *.test.ts files next to this one). What one
 * backend alone promises (its faults, its formats) stays in its own test files.
 */
import { describe, expect, it } from 'vitest'
import {
  LockAbortedError,
  LockLostError,
  LockTimeoutError,
  LockUnavailableError,
  type Locker,
  type LockerOptions,
} from '../../src/index.js'
import { unique } from '../support/connections.js'
import { settle, sleep, waitUntil } from '../support/timing.js'

/** A deployment the contract runs over; its methods are called inside the tests (after beforeAll). */
export interface ContractDeployment {
  /** A Locker over new connections to the deployment. */
  locker(options?: LockerOptions): Locker
  /** Deletes the resource's lock key wherever it lives: the lock is lost behind its holder's back. */
  steal(resource: string): Promise<void>
  /** How many copies of the resource's lock key exist, and how many lockers its queues hold, in all. */
  traces(resource: string): Promise<{ held: number; queued: number }>
}

export function lockerContract(name: string, deployment: ContractDeployment): void {
  describe(`the Locker contract on ${name}`, () => {
    it('excludes: 3 Lockers × 4 workers on one key never overlap, and every token is larger than the one before', async () => {
      const r = unique('c-mutex')
      const lockers = [0, 1, 2].map(() => deployment.locker({ ttlMs: 5_000, waitMs: 10_000 }))
      let inside = 0
      let overlaps = 0
      const tokens: bigint[] = []
      // Until 40 grants (a count, not a time: a loaded machine made 12 in 1.5 s), within 60 s.
      const until = performance.now() + 60_000
      await Promise.all(
        lockers.flatMap((locker) =>
          [0, 1, 2, 3].map(async () => {
            while (tokens.length < 40 && performance.now() < until) {
              const lock = await locker.acquire(r)
              if (++inside > 1) overlaps++
              tokens.push(lock.token)
              await sleep(1)
              inside--
              await lock.release()
            }
          }),
        ),
      )
      expect(overlaps).toBe(0)
      expect(tokens.length).toBeGreaterThan(20)
      for (let i = 1; i < tokens.length; i++) expect(tokens[i]!).toBeGreaterThan(tokens[i - 1]!)
    })

    it('tryAcquire: null while another Locker holds it, a Lock with a larger token once released; release says whether it was ours', async () => {
      const r = unique('c-try')
      const a = deployment.locker()
      const b = deployment.locker()
      const held = await a.acquire(r)
      expect(await b.tryAcquire(r)).toBeNull()
      expect(await held.release()).toBe(true)
      const next = await b.tryAcquire(r)
      expect(next?.token).toBeGreaterThan(held.token)
      expect(await next!.release()).toBe(true)
      expect(await next!.release()).toBe(true) // idempotent: the same answer
      await waitUntil(async () => (await deployment.traces(r)).held === 0, { what: 'freed everywhere' })
      expect((await deployment.traces(r)).queued).toBe(0)
    })

    it('acquire waits waitMs and ends with LockTimeoutError while the lock stays held; nothing of the waiter is left', async () => {
      const r = unique('c-timeout')
      const held = await deployment.locker().acquire(r, { ttlMs: 10_000 })
      const waiter = deployment.locker()
      // Warmed first: a new quorum Locker checks its nodes (restart guard) before its first grant,
      // which on a loaded machine could take part of the 300 ms being measured.
      await (await waiter.acquire(unique('c-warm'))).release()
      const { error, ms } = await settle(() => waiter.acquire(r, { waitMs: 300 }))
      expect(error).toBeInstanceOf(LockTimeoutError)
      expect(ms).toBeGreaterThanOrEqual(295)
      expect(ms).toBeLessThan(1_000)
      await waitUntil(async () => (await deployment.traces(r)).queued === 0, { what: 'the waiter out of the queue' })
      await held.release()
    })

    it('a waiter in another Locker is woken by the release (pub/sub), not by polling', async () => {
      const r = unique('c-wake')
      const lock = await deployment.locker().acquire(r)
      const waiting = deployment.locker({ pollMs: 30_000 }).acquire(r, { waitMs: 10_000 })
      await waitUntil(async () => (await deployment.traces(r)).queued > 0, { what: 'the waiter queued' })
      const t = performance.now()
      await lock.release()
      const next = await waiting
      expect(performance.now() - t).toBeLessThan(300)
      expect(next.token).toBeGreaterThan(lock.token)
      await next.release()
    })

    it('the fair queue holds across Lockers: 6 Lockers looping on one key are all served, none waits past 1.5× the fair wait', async () => {
      // The fair wait counted in grants, not milliseconds (a loaded machine stretches holds and
      // hand-offs alike): while one Locker waits, the others are served about once each (n − 1);
      // a starved waiter would see them served again and again.
      const n = 6
      const holdMs = 150
      // A command deadline far above a starved process's stall: at 500 ms a quorum release failed in a
      // loaded npm test (3 of 3 nodes "did not answer": the test process was off the CPU). It only
      // lengthens how long a waiter that stops trying keeps its place, which this test never does.
      const lockers = Array.from({ length: n }, () => deployment.locker({ pollMs: 300, commandTimeoutMs: 5_000 }))
      for (const locker of lockers) await (await locker.acquire(unique('c-warm'))).release()
      const r = unique('c-fair')
      const grants = lockers.map(() => 0)
      const failures: unknown[] = []
      let served = 0
      let mostServedMeanwhile = 0
      const until = performance.now() + 3_000
      await Promise.all(
        lockers.map(async (locker, i) => {
          while (performance.now() < until) {
            const servedBefore = served
            try {
              const lock = await locker.acquire(r, { ttlMs: 5_000, waitMs: 15_000 })
              mostServedMeanwhile = Math.max(mostServedMeanwhile, served - servedBefore)
              served++
              grants[i]!++
              await sleep(holdMs)
              await lock.release()
            } catch (error) {
              failures.push(error)
            }
          }
        }),
      )
      expect({ failures, neverServed: grants.filter((g) => g === 0).length }).toEqual({ failures: [], neverServed: 0 })
      expect(mostServedMeanwhile).toBeLessThanOrEqual(Math.floor(1.5 * (n - 1)))
    })

    it('the watchdog keeps a lock past 3 TTLs; a lock lost behind its back aborts lock.signal with LockLostError, and its release says false', async () => {
      const r = unique('c-watchdog')
      // 1 s: a renewal every 333 ms, so a stall of the test process under ~650 ms loses nothing
      // (600 ms lost a Cluster lock at load 20).
      const lock = await deployment.locker({ ttlMs: 1_000 }).acquire(r, { autoExtend: true })
      await sleep(3_100)
      expect(lock.isHeld()).toBe(true)
      expect(lock.signal.aborted).toBe(false)
      await deployment.steal(r)
      await waitUntil(() => lock.signal.aborted, { timeoutMs: 1_000, what: 'the signal to abort' })
      expect(lock.signal.reason).toBeInstanceOf(LockLostError)
      expect(await lock.release()).toBe(false)
    })

    it('extend renews the lease for its new ttlMs; an abort while waiting rejects with LockAbortedError at once and leaves nothing queued', async () => {
      const r = unique('c-extend')
      const lock = await deployment.locker({ ttlMs: 1_000 }).acquire(r)
      await lock.extend(20_000)
      expect(lock.remainingMs()).toBeGreaterThan(19_000)
      const controller = new AbortController()
      const waiting = settle(deployment.locker().acquire(r, { waitMs: 10_000, signal: controller.signal }))
      await waitUntil(async () => (await deployment.traces(r)).queued > 0, { what: 'the waiter queued' })
      const t = performance.now()
      controller.abort(new Error('gone'))
      const { error } = await waiting
      expect(error).toBeInstanceOf(LockAbortedError)
      expect(performance.now() - t).toBeLessThan(100)
      await waitUntil(async () => (await deployment.traces(r)).queued === 0, { what: 'the waiter out of the queue' })
      await lock.release()
    })

    it('using() returns what fn returns and releases; fn that throws is released and rethrown', async () => {
      const r = unique('c-using')
      const locker = deployment.locker()
      // Released: freed on every node (in quorum mode release() resolves once a majority freed it).
      const freed = () => waitUntil(async () => (await deployment.traces(r)).held === 0, { what: 'freed everywhere' })
      expect(await locker.using(r, (lock) => lock.token > 0n)).toBe(true)
      await freed()
      const boom = new Error('boom')
      await expect(locker.using(r, () => Promise.reject(boom))).rejects.toBe(boom)
      await freed()
      expect((await deployment.traces(r)).queued).toBe(0)
    })

    it('close() rejects a blocked waiter and releases what it holds: nothing of it is left held or queued', async () => {
      const r = unique('c-close-held')
      const busy = unique('c-close-busy')
      const other = await deployment.locker().acquire(busy, { ttlMs: 10_000 })
      const closing = deployment.locker()
      await closing.acquire(r, { ttlMs: 10_000 })
      const blocked = settle(closing.acquire(busy, { waitMs: 10_000 }))
      await waitUntil(async () => (await deployment.traces(busy)).queued > 0, { what: 'the waiter queued' })
      await closing.close()
      expect((await blocked).error).toBeInstanceOf(LockUnavailableError)
      await waitUntil(async () => (await deployment.traces(r)).held === 0, { what: 'freed everywhere' })
      expect((await deployment.traces(r)).queued).toBe(0)
      expect((await deployment.traces(busy)).queued).toBe(0)
      expect(await other.release()).toBe(true)
    })
  })
}
