/**
 * Failover faults of the highly available deployments (issue 21): kill -9 of the Sentinel set's
 * primary; in a Cluster, kill -9 of the primary of the shard that owns the hot resource, and a
 * manual `CLUSTER FAILOVER` from its replica. Each touches only the processes the run spawned (by
 * PID), waits until the deployment named a new primary, brings the killed server back (it rejoins
 * as a replica), and records the fault from the kill to the moment the killed process was gone,
 * with the lock resources the failover took away: the checker's recovery is then from the kill to
 * the next grant of one of them, that is, on the new primary.
 */
import { resourceKeys } from '@fencelock/lock'
import { lockResource } from '@fencelock/demo-shop/shop-keys'
import { redisCommand } from '@fencelock/devkit/redis-command'
import type { RedisServer } from '@fencelock/devkit/redis-server'
import type { ClusterSet, SentinelSet } from '@fencelock/devkit/redis-topology'
import type { FaultContext, Injector } from './faults.js'
import { monoNow } from './history.js'

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms))

/**
 * Runs `step` every `gapMs()` until stopped; a step is never cut short (a failover half done
 * would leave the deployment without a primary for the workers' drain).
 */
function every(gapMs: () => number, step: () => Promise<void>): Injector {
  let stopped = false
  const done = (async () => {
    while (!stopped) {
      const until = performance.now() + gapMs()
      while (!stopped && performance.now() < until) await sleep(Math.min(25, until - performance.now()))
      if (stopped) break
      await step()
    }
  })()
  return {
    async stop() {
      stopped = true
      await done
    },
  }
}

/** The hot resources of the shop (both products): every worker locks one of them in each purchase. */
const HOT = [lockResource.product('flash-1'), lockResource.product('flash-2')]

/** Waits until `probe` holds, polling every 50 ms, for at most `timeoutMs`. */
async function until(probe: () => Promise<boolean>, timeoutMs: number, what: string): Promise<void> {
  const deadline = performance.now() + timeoutMs
  while (performance.now() < deadline) {
    if (await probe().catch(() => false)) return
    await sleep(50)
  }
  throw new Error(`${what}: not within ${timeoutMs} ms`)
}

/**
 * kill -9 of the Sentinel set's primary 1.5-2.5 s after the previous one healed: the Sentinels
 * promote a replica (down-after 1 s), the workers' ioredis Sentinel clients follow it. The killed
 * server comes back empty and the Sentinels make it a replica of the new primary.
 */
export function killSentinelPrimary(ctx: FaultContext): Injector {
  const set = ctx.sentinel as SentinelSet
  return every(
    () => 1_500 + Math.random() * 1_000,
    async () => {
      const old = await set.primary()
      const start = monoNow()
      await old.stop()
      const killed = monoNow()
      const now = await set.failedOver(old, 30_000)
      const promotedMs = monoNow() - start
      ctx.recorder.record({
        k: 'fault',
        kind: 'sentinel-primary-kill-9',
        start,
        end: killed,
        detail: `:${old.port} killed, :${now.port} named primary after ${Math.round(promotedMs)} ms`,
        resources: HOT,
      })
      await old.spawn()
      // Healed: the old primary is a replica again and in sync, so every kill starts from 2 replicas.
      await until(async () => /master_link_status:up/.test(await redisCommand(old.port, ['INFO', 'replication'])), 20_000, 'the killed primary to resync as a replica')
    },
  )
}

/** The primary and its replica of the shard that owns `resource`'s keys now. */
async function shardOf(set: ClusterSet, prefix: string, resource: string): Promise<{ primary: RedisServer; replica: RedisServer; slot: number }> {
  const slot = await set.keySlot(resourceKeys(prefix, resource).lock)
  const primary = await set.primaryOf(slot)
  const nodes = await redisCommand(primary.port, ['CLUSTER', 'NODES'])
  const id = nodes.split('\n').find((line) => line.includes('myself'))?.split(' ')[0]
  const replicaLine = nodes.split('\n').find((line) => id !== undefined && line.includes(`slave ${id}`) && !line.includes('fail'))
  const port = Number(replicaLine?.split(' ')[1]?.split(':')[1]?.split('@')[0])
  const replica = set.servers.find((s) => s.port === port && s.running)
  if (!replica) throw new Error(`no running replica of the primary :${primary.port} of slot ${slot}`)
  return { primary, replica, slot }
}

/** The resources of {@link HOT} whose keys are in the same shard as `slot`'s. */
async function hotOn(set: ClusterSet, prefix: string, primary: RedisServer): Promise<string[]> {
  const on: string[] = []
  for (const r of HOT) if ((await set.primaryOf(await set.keySlot(resourceKeys(prefix, r).lock))) === primary) on.push(r)
  return on
}

/**
 * Cluster: kill -9 of the primary of the shard that owns `product:flash-2` (the product that never
 * sells out, so it is locked all run long) 1.5-2.5 s after the previous kill healed; its replica takes over once the other
 * primaries agree it failed (cluster-node-timeout 1 s). The killed node restarts with its
 * nodes.conf and rejoins as the new primary's replica.
 */
export function killClusterPrimary(ctx: FaultContext): Injector {
  const set = ctx.cluster as ClusterSet
  return every(
    () => 1_500 + Math.random() * 1_000,
    async () => {
      const { primary, replica, slot } = await shardOf(set, ctx.lockPrefix, HOT[1] as string)
      const resources = await hotOn(set, ctx.lockPrefix, primary)
      const start = monoNow()
      await primary.stop()
      const killed = monoNow()
      await until(async () => (await set.primaryOf(slot)) === replica, 30_000, `the replica :${replica.port} to take slot ${slot} over`)
      await set.ready(30_000)
      const promotedMs = monoNow() - start
      ctx.recorder.record({
        k: 'fault',
        kind: 'cluster-primary-kill-9',
        start,
        end: killed,
        detail: `:${primary.port} killed, :${replica.port} primary of slot ${slot} after ${Math.round(promotedMs)} ms`,
        resources,
      })
      await primary.spawn()
      await until(async () => /master_link_status:up/.test(await redisCommand(primary.port, ['INFO', 'replication'])), 20_000, 'the killed primary to resync as a replica')
      await set.ready(30_000)
    },
  )
}

/**
 * Cluster: `CLUSTER FAILOVER` sent to the replica of the shard that owns `product:flash-2`, every
 * 2-3 s: a manual failover, which waits for the replica to catch up with its primary and stops the
 * primary's clients meanwhile, so nothing acknowledged is lost. The roles swap; the next one swaps
 * them back.
 */
export function clusterFailover(ctx: FaultContext): Injector {
  const set = ctx.cluster as ClusterSet
  return every(
    () => 2_000 + Math.random() * 1_000,
    async () => {
      const { primary, replica, slot } = await shardOf(set, ctx.lockPrefix, HOT[1] as string)
      const resources = await hotOn(set, ctx.lockPrefix, primary)
      const start = monoNow()
      await redisCommand(replica.port, ['CLUSTER', 'FAILOVER'])
      await until(async () => (await set.primaryOf(slot)) === replica, 30_000, `the replica :${replica.port} to take slot ${slot} over`)
      const end = monoNow()
      ctx.recorder.record({
        k: 'fault',
        kind: 'cluster-manual-failover',
        start,
        end: start,
        detail: `:${replica.port} primary of slot ${slot} (was :${primary.port}) after ${Math.round(end - start)} ms`,
        resources,
      })
      await set.ready(30_000)
    },
  )
}
