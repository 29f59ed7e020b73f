/**
 * The Locker on a 3-member etcd cluster of this file's own (spawned on loopback, stopped by PID):
 * the leader killed -9 while three Lockers contend — grants go on through the election, tokens
 * keep increasing, no two holders at once; with a majority down, acquires end with
 * LockUnavailableError within their wait, none hangs; the members restarted, grants resume.
 */
import { describe, expect, it } from 'vitest'
import { LockUnavailableError } from '../../src/index.js'
import { unique } from '../support/connections.js'
import { settle, sleep, waitUntil } from '../support/timing.js'
import { etcdClient, etcdLocker, startEtcdCluster, type EtcdMember } from './etcd-support.js'

/** The member the cluster says leads now (asked of each member in turn). */
async function leaderOf(members: readonly EtcdMember[]): Promise<EtcdMember> {
  for (const m of members) {
    if (!m.running) continue
    const status = await etcdClient(m.endpoint).maintenance.status()
    if (status.leader === status.header.member_id) return m
  }
  throw new Error('no member says it leads')
}

describe('the Locker on a 3-member etcd cluster', () => {
  it('kill -9 of the leader under load: grants go on, tokens increase, 0 overlaps; a majority down: LockUnavailableError within the wait; restarted: grants resume', async () => {
    const cluster = await startEtcdCluster(3)
    const r = unique('e-cluster')
    const lockers = [0, 1, 2].map(() => etcdLocker(cluster.endpoints, { ttlMs: 5_000, commandTimeoutMs: 1_000 }))
    let inside = 0
    let overlaps = 0
    const tokens: bigint[] = []
    const failures: unknown[] = []
    let killed: EtcdMember | undefined
    // Until 60 grants (a count, not a time), the leader killed after the 20th; within 90 s.
    const until = performance.now() + 90_000
    await Promise.all(
      lockers.map(async (locker) => {
        while (tokens.length < 60 && performance.now() < until) {
          try {
            const lock = await locker.acquire(r, { waitMs: 30_000 })
            if (++inside > 1) overlaps++
            tokens.push(lock.token)
            await sleep(2)
            inside--
            if (tokens.length === 20 && !killed) {
              killed = await leaderOf(cluster.members)
              await killed.kill()
            }
            // A release that meets the election may fail: the key is then deleted when etcd answers.
            await lock.release().catch(() => {})
          } catch (error) {
            failures.push(error)
          }
        }
      }),
    )
    expect(killed).toBeDefined()
    expect({ overlaps, failures }).toEqual({ overlaps: 0, failures: [] })
    expect(tokens.length).toBeGreaterThanOrEqual(60)
    for (let i = 1; i < tokens.length; i++) expect(tokens[i]! > tokens[i - 1]!).toBe(true)

    // A second member down: no majority. Acquires fail within their wait, typed.
    const second = cluster.members.find((m) => m.running)!
    await second.kill()
    const down = await settle(() => lockers[0]!.acquire(unique('e-cluster-down'), { waitMs: 1_500 }))
    expect(down.error).toBeInstanceOf(LockUnavailableError)
    expect(down.ms).toBeLessThan(15_000)
    const tried = await settle(() => lockers[1]!.tryAcquire(unique('e-cluster-down')))
    expect(tried.error).toBeInstanceOf(LockUnavailableError)
    expect(tried.ms).toBeLessThan(15_000)

    // Both back (same data directories): grants resume, above every token before.
    killed!.spawn()
    second.spawn()
    await Promise.all(cluster.members.map((m) => m.waitHealthy(30_000)))
    const last = tokens[tokens.length - 1]!
    await waitUntil(
      async () => {
        const lock = await lockers[2]!.tryAcquire(r).catch(() => null)
        if (!lock) return false
        expect(lock.token > last).toBe(true)
        await lock.release()
        return true
      },
      { timeoutMs: 30_000, everyMs: 100, what: 'a grant after the restart' },
    )
  }, 180_000)
})
