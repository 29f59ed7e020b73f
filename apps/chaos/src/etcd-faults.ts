/**
 * The faults of the etcd scenario (issue 36): the workers' Locker is on a 3-member etcd cluster the
 * devkit spawned (`startEtcdCluster`), and two faults run side by side:
 *
 * - kill -9 of the member that is the Raft leader (asked of the members themselves, etcd's
 *   `/v3/maintenance/status`), recorded from the kill to the moment the two others have elected a
 *   new one; the killed member is started again on its data directory 3-5 × TTL later and rejoins
 *   as a follower, and the next kill waits until all three are healthy again (never two down: one
 *   member down of three leaves a majority, so grants go on);
 * - SIGSTOP of a worker inside a gateway call under a lock for longer than its lease (etcd counts
 *   leases in whole seconds, at least 2 s: a lock of TTL 500 ms lives on a 2 s lease), then
 *   SIGCONT: `sigstopHolder`, with freezes of lease + 0-3 × TTL.
 */
import { request } from 'node:http'
import type { EtcdCluster, EtcdMember } from '@fencelock/devkit/etcd-server'
import { sigstopHolder, type FaultContext, type Injector } from './faults.js'
import { monoNow } from './history.js'

/** etcd's shortest lease, in ms, which the lock's lease is rounded up to (packages/lock's `leaseSeconds`). */
export const ETCD_MIN_LEASE_MS = 2_000

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms))

/** A member's view of the cluster: its own id and the leader's, or undefined when it did not answer within 1 s. */
export function memberStatus(member: EtcdMember): Promise<{ self: string; leader: string } | undefined> {
  return new Promise((resolve) => {
    const body = '{}'
    const call = request(
      {
        host: '127.0.0.1',
        port: member.clientPort,
        path: '/v3/maintenance/status',
        method: 'POST',
        timeout: 1_000,
        headers: { 'content-type': 'application/json', 'content-length': body.length },
      },
      (response) => {
        let text = ''
        response.on('data', (chunk: Buffer) => (text += chunk.toString()))
        response.on('end', () => {
          try {
            const status = JSON.parse(text) as { header?: { member_id?: string }; leader?: string }
            const self = status.header?.member_id
            const leader = status.leader
            resolve(self && leader && leader !== '0' ? { self, leader } : undefined)
          } catch {
            resolve(undefined)
          }
        })
      },
    )
    call.on('timeout', () => call.destroy())
    call.on('error', () => resolve(undefined))
    call.end(body)
  })
}

/** The running member that is the leader, as the running members say; undefined when they do not agree on one. */
export async function findLeader(members: readonly EtcdMember[]): Promise<EtcdMember | undefined> {
  const running = members.filter((m) => m.running)
  const statuses = await Promise.all(running.map((m) => memberStatus(m)))
  const leaderId = statuses.find((s) => s !== undefined)?.leader
  if (leaderId === undefined || statuses.some((s) => s !== undefined && s.leader !== leaderId)) return undefined
  const index = statuses.findIndex((s) => s?.self === leaderId)
  return index < 0 ? undefined : running[index]
}

/** Waits until the running members other than `gone` agree on a leader; resolves with it, or undefined after `ms`. */
async function awaitLeader(members: readonly EtcdMember[], ms: number, stopped: () => boolean): Promise<EtcdMember | undefined> {
  const deadline = performance.now() + ms
  while (performance.now() < deadline && !stopped()) {
    const leader = await findLeader(members)
    if (leader !== undefined) return leader
    await sleep(20)
  }
  return undefined
}

/** kill -9 of the etcd leader, restarted 3-5 × TTL later; the next kill once the cluster is whole again, 1-2 s after. */
export function killEtcdLeader(ctx: FaultContext, cluster: EtcdCluster): Injector {
  let stopped = false
  const isStopped = () => stopped
  const done = (async () => {
    while (!stopped) {
      const until = performance.now() + 1_000 + Math.random() * 1_000
      while (!stopped && performance.now() < until) await sleep(Math.min(25, until - performance.now()))
      if (stopped) break
      const leader = await awaitLeader(cluster.members, 10_000, isStopped)
      if (leader === undefined || stopped) continue
      const start = monoNow()
      const killedAt = performance.now()
      await leader.kill()
      const next = await awaitLeader(cluster.members, 15_000, () => false)
      const end = monoNow()
      ctx.recorder.record({
        k: 'fault',
        kind: 'etcd-leader-kill',
        start,
        end,
        detail: `kill -9 of leader ${leader.name}; ${next === undefined ? 'no new leader within 15 s' : `new leader ${next.name} after ${Math.round(performance.now() - killedAt)} ms`}`,
      })
      // Down a while (the cluster runs on two members), then back on its data directory.
      const downUntil = performance.now() + (3 + Math.random() * 2) * ctx.ttlMs
      while (!stopped && performance.now() < downUntil) await sleep(25)
      leader.spawn()
      await leader.waitHealthy(20_000).catch(() => {})
    }
  })()
  return {
    async stop() {
      stopped = true
      await done
      // The cluster whole before the workers drain and the reconciler runs.
      for (const m of cluster.members) if (!m.running) m.spawn()
      await Promise.all(cluster.members.map((m) => m.waitHealthy(20_000).catch(() => {})))
    },
  }
}

/** The etcd scenario's injector: the leader kills and the holder freezes past the lease, side by side. */
export function etcdFaults(ctx: FaultContext): Injector {
  const cluster = ctx.etcd
  if (cluster === undefined) throw new Error('the etcd scenario needs the run to spawn an etcd cluster (Scenario.etcdMembers)')
  const kills = killEtcdLeader(ctx, cluster)
  const freezes = sigstopHolder(ctx, () => ETCD_MIN_LEASE_MS + Math.random() * 3 * ctx.ttlMs)
  return {
    async stop() {
      await Promise.all([freezes.stop(), kills.stop()])
    },
    ...(freezes.enough === undefined ? {} : { enough: freezes.enough }),
  }
}
