/**
 * The fault injectors. Each runs in the runner process, touches only processes the run started
 * (its worker PIDs through the Supervisor, its own redis-servers by PID), records every fault with
 * its start and end on CLOCK_MONOTONIC, and undoes what is in progress when stopped.
 */
import { randomInt } from 'node:crypto'
import { writeFileSync } from 'node:fs'
import { Redis } from 'ioredis'
import { startKillChaos } from '@fencelock/demo-shop/chaos'
import { seededRandom } from '@fencelock/demo-shop/random'
import type { Supervisor } from '@fencelock/demo-shop/supervisor'
import type { EtcdCluster } from '@fencelock/devkit/etcd-server'
import type { RedisServer } from '@fencelock/devkit/redis-server'
import type { ClusterSet, SentinelSet } from '@fencelock/devkit/redis-topology'
import { monoNow, type Recorder } from './history.js'

/** What an injector may touch. */
export interface FaultContext {
  readonly supervisor: Supervisor
  /** The run's redis-server (the first node in quorum mode). */
  readonly redis: RedisServer
  /** Every redis-server of the run: one, or the N independent masters of quorum mode. */
  readonly nodes: readonly RedisServer[]
  /** How long a worker's acquire waits, in ms. */
  readonly waitMs: number
  readonly recorder: Recorder
  readonly ttlMs: number
  /** The lock key prefix of the run (its keys only). */
  readonly lockPrefix: string
  /** The libfaketime control file of the faked worker (clock-jump only). */
  readonly fakeTimeFile?: string
  /** The run's Sentinel set (topology `sentinel`). */
  readonly sentinel?: SentinelSet
  /** The run's Cluster (topology `cluster`). */
  readonly cluster?: ClusterSet
  /** The run's etcd cluster, which the workers' locks are on (the etcd scenario). */
  readonly etcd?: EtcdCluster
  /** The longest gateway latency of the run, in ms (a kill mid-charge lands at a random moment of it). */
  readonly gatewayMaxMs?: number
}

/** A running injector. */
export interface Injector {
  stop(): Promise<void>
  /**
   * Resolves once the injector has done what its scenario needs (kill: a worker killed in a
   * charge, and a restarted one dead right after a charge), for an injector whose faults wait for
   * something the workers do: the run waits for it past its duration (bounded), so a starved
   * machine that made few charges still gets its faults instead of a run that proves nothing.
   */
  readonly enough?: Promise<void>
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms))

/** Runs `step` in a loop, `gapMs()` apart, until stopped; `step` must leave things undone-safe. */
function loop(gapMs: () => number, step: (stopped: () => boolean) => Promise<void>): Injector {
  let stopped = false
  const done = (async () => {
    while (!stopped) {
      const until = performance.now() + gapMs()
      while (!stopped && performance.now() < until) await sleep(Math.min(25, until - performance.now()))
      if (stopped) break
      await step(() => stopped)
    }
  })()
  return {
    async stop() {
      stopped = true
      await done
    },
  }
}

/** 0 to 3 × TTL. */
const upTo3Ttl = (ttlMs: number) => Math.random() * 3 * ttlMs

/**
 * SIGSTOP of a worker that is inside a gateway call under a lock, for 0-3 × TTL (or `freezeMs()`),
 * then SIGCONT.
 *
 * `enough` resolves once a freeze has landed: another worker made an external call on the frozen
 * holder's resource, under a later token, while it was stopped (its lease had gone and someone
 * else held the lock; the token rules out a call of an earlier holder whose message came late).
 * Only such a freeze tests anything, and whether one comes is chance (a freeze shorter than the
 * TTL, or no other worker wanting that resource then): 4 s of faults gave 4 freezes and none
 * landed in one CI run of the lock-only control. The overlap itself is still found by the checker
 * from the workers' own records, never from this signal.
 */
export function sigstopHolder(ctx: FaultContext, freezeMs: () => number = () => upTo3Ttl(ctx.ttlMs)): Injector {
  let armedAt = performance.now() + ctx.ttlMs
  let current: { pid: number; resource: string; token: bigint | undefined; wake: () => void } | undefined
  let running: Promise<void> = Promise.resolve()
  let stopped = false
  let landed!: () => void
  const enough = new Promise<void>((resolve) => (landed = resolve))
  const unsubscribe = ctx.supervisor.onExternalCall((call) => {
    const token = call.token === null ? undefined : BigInt(call.token)
    if (current !== undefined && call.pid !== current.pid && call.resource === current.resource && (token === undefined || current.token === undefined || token > current.token)) landed()
    if (stopped || current !== undefined || performance.now() < armedAt || Math.random() > 0.5) return
    if (!ctx.supervisor.freeze(call.pid)) return
    const ms = freezeMs()
    const start = monoNow()
    const frozen = { pid: call.pid, resource: call.resource, token, wake: () => {} }
    current = frozen
    running = new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, ms)
      frozen.wake = () => (clearTimeout(timer), resolve())
    }).then(() => {
      ctx.supervisor.thaw(call.pid)
      ctx.recorder.record({ k: 'fault', kind: 'sigstop', start, end: monoNow(), detail: `${call.instance} in ${call.resource} for ${Math.round(ms)} ms` })
      current = undefined
      armedAt = performance.now() + ctx.ttlMs / 2
    })
  })
  return {
    async stop() {
      stopped = true
      unsubscribe()
      current?.wake()
      await running
    },
    enough,
  }
}

/** kill -9 of the run's redis-server and a restart on the same port, without persistence. */
export function killRedis(ctx: FaultContext): Injector {
  return loop(
    () => 2 * ctx.ttlMs + Math.random() * 2 * ctx.ttlMs,
    async () => {
      const start = monoNow()
      await ctx.redis.restart()
      ctx.recorder.record({ k: 'fault', kind: 'redis-kill-9', start, end: monoNow(), detail: 'SIGKILL + restart, no persistence' })
    },
  )
}

/** Redis stalled for 0-3 × TTL: `DEBUG SLEEP` and SIGSTOP of redis-server, in turn. */
export function stallRedis(ctx: FaultContext): Injector {
  let n = 0
  // Its own connection: the reply to DEBUG SLEEP comes when the server wakes up.
  const conn = new Redis(ctx.redis.port, ctx.redis.host, { maxRetriesPerRequest: 1 })
  conn.on('error', () => {})
  const injector = loop(
    () => ctx.ttlMs / 2 + Math.random() * ctx.ttlMs,
    async () => {
      // 1.5-3×TTL: a stall shorter than the lease expires nothing, so it could never bite.
      const ms = ctx.ttlMs * (1.5 + Math.random() * 1.5)
      const start = monoNow()
      if (n++ % 2 === 0) {
        await conn.call('DEBUG', 'SLEEP', (ms / 1000).toFixed(3)).catch(() => {})
        ctx.recorder.record({ k: 'fault', kind: 'redis-debug-sleep', start, end: monoNow(), detail: `${Math.round(ms)} ms` })
      } else {
        ctx.redis.pause()
        try {
          await sleep(ms)
        } finally {
          ctx.redis.resume()
        }
        ctx.recorder.record({ k: 'fault', kind: 'redis-sigstop', start, end: monoNow(), detail: `${Math.round(ms)} ms` })
      }
    },
  )
  return {
    async stop() {
      await injector.stop()
      conn.disconnect()
    },
  }
}

/** A held lock's key DELeted or PEXPIREd (1 ms) from outside, before its lease ends. */
export function expireEarly(ctx: FaultContext): Injector {
  const conn = new Redis(ctx.redis.port, ctx.redis.host, { maxRetriesPerRequest: 1 })
  conn.on('error', () => {})
  const injector = loop(
    () => ctx.ttlMs / 4 + Math.random() * (ctx.ttlMs / 2),
    async () => {
      const [, keys] = await conn.scan('0', 'MATCH', `${ctx.lockPrefix}*:lock`, 'COUNT', 1000)
      const key = keys[Math.floor(Math.random() * keys.length)]
      if (key === undefined) return
      const start = monoNow()
      const del = Math.random() < 0.5
      const hit = del ? await conn.del(key) : await conn.pexpire(key, 1)
      if (hit === 1) ctx.recorder.record({ k: 'fault', kind: del ? 'lock-key-del' : 'lock-key-pexpire', start, end: monoNow(), detail: key })
    },
  )
  return {
    async stop() {
      await injector.stop()
      conn.disconnect()
    },
  }
}

/** SCRIPT FLUSH in a loop: every EVALSHA must fall back to EVAL. */
export function flushScripts(ctx: FaultContext): Injector {
  const conn = new Redis(ctx.redis.port, ctx.redis.host, { maxRetriesPerRequest: 1 })
  conn.on('error', () => {})
  const injector = loop(
    () => 30 + Math.random() * 40,
    async () => {
      const start = monoNow()
      await conn.script('FLUSH')
      ctx.recorder.record({ k: 'fault', kind: 'script-flush', start, end: monoNow() })
    },
  )
  return {
    async stop() {
      await injector.stop()
      conn.disconnect()
    },
  }
}

/** Offsets the faked worker's wall clock jumps between (libfaketime's relative format). */
const CLOCK_OFFSETS = ['-1h', '+2d', '-10m', '+0', '+45s', '-3d', '+7h']

/**
 * Jumps the wall clock of the worker started under libfaketime, by rewriting its control file
 * (`FAKETIME_TIMESTAMP_FILE` with `FAKETIME_NO_CACHE=1`: read at every clock call). Its
 * CLOCK_MONOTONIC is left alone (`FAKETIME_DONT_FAKE_MONOTONIC=1`), as NTP stepping the clock does.
 */
export function jumpClock(ctx: FaultContext): Injector {
  const file = ctx.fakeTimeFile
  if (file === undefined) throw new Error('clock-jump needs the faked worker')
  let i = 0
  const injector = loop(
    () => 200 + Math.random() * 300,
    async () => {
      const offset = CLOCK_OFFSETS[i++ % CLOCK_OFFSETS.length] as string
      const start = monoNow()
      writeFileSync(file, `${offset}\n`)
      ctx.recorder.record({ k: 'fault', kind: 'wall-clock-jump', start, end: monoNow(), detail: offset })
    },
  )
  return {
    async stop() {
      await injector.stop()
      writeFileSync(file, '+0\n')
    },
  }
}

/** Sleeps `ms`, or less when `stopped()` turns true (checked every 25 ms). */
async function pauseFor(ms: number, stopped: () => boolean): Promise<void> {
  const until = performance.now() + ms
  while (!stopped() && performance.now() < until) await sleep(Math.min(25, until - performance.now()))
}

/** Takes a node down: SIGKILL (and waits until it is gone), or SIGSTOP. */
async function takeDown(node: RedisServer, how: 'kill' | 'sigstop'): Promise<void> {
  if (how === 'kill') await node.stop()
  else node.pause()
}

/** Brings a node back: SIGCONT if it was SIGSTOPped, a fresh process (empty) if it was killed. */
async function bringBack(node: RedisServer, how: 'kill' | 'sigstop'): Promise<void> {
  if (how === 'sigstop') node.resume()
  else if (!node.running) await node.spawn()
}

/**
 * How the nodes of a majority fault go down, in turn: some killed and the others SIGSTOPped
 * (both ways a node fails at once: a connection refused, and one that answers nothing), all
 * SIGSTOPped, all killed.
 */
const MAJORITY_FAULTS = ['kill+sigstop', 'sigstop', 'kill'] as const

/**
 * Quorum mode (N independent masters, a majority needed): a majority down, then faults on the
 * nodes one at a time, each on the next node, so that successive grants are won on different
 * majorities, and again:
 * - a majority down for `waitMs` + 2×TTL (`majority-kill+sigstop`, then `majority-sigstop`, then
 *   `majority-kill`, in turn; see {@link MAJORITY_FAULTS}): no lock can be granted, and every
 *   acquire asked then must fail with the lock's typed error within its wait;
 * - `node-kill`: kill -9, down for 1.5-3×TTL (longer than a lease: Redlock's "delayed restart"),
 *   then a fresh process on the same port, empty;
 * - `node-restart`: kill -9 and a fresh process at once: restarted without persistence, every
 *   lock and counter on it gone while their holders still count on it. Aimed: it waits (up to a
 *   TTL) for a lock held on exactly a majority that includes this node (one granted during the
 *   `node-kill` just before, whose node came back empty), the case where a restart without
 *   persistence hands a live holder's lock to the next comer (Redlock's "delayed restarts");
 * - `node-sigstop`: SIGSTOP for 1.5-3×TTL (its keys' expiry passes while it answers nothing),
 *   then SIGCONT;
 * 0.5-1×TTL between faults.
 * Each fault is recorded with `quorumDown` and, as that field says, `start`..`end` is when its
 * nodes were down for sure.
 */
export function quorumFaults(ctx: FaultContext): Injector {
  const nodes = ctx.nodes
  const n = nodes.length
  if (n < 3) throw new Error(`the quorum faults need 3 or more nodes (got ${n})`)
  const minority = Math.floor((n - 1) / 2)
  const majority = n - minority
  // One connection per node to look at the run's lock keys (never its lock's own connections).
  const conns = nodes.map((node) => {
    const conn = new Redis(node.port, node.host, { maxRetriesPerRequest: 1 })
    conn.on('error', () => {})
    return conn
  })
  // The majority first: the runs' acceptance needs one, and a short run may end before a turn does.
  const steps = ['majority', 'node-kill', 'node-restart', 'node-sigstop'] as const
  let step = 0
  let next = 0
  let majorities = 0
  const stall = () => ctx.ttlMs * (1.5 + Math.random() * 1.5)
  const injector = loop(
    () => ctx.ttlMs * (0.5 + Math.random() * 0.5),
    async (stopped) => {
      const kind = steps[step++ % steps.length] as (typeof steps)[number]
      if (kind === 'majority') {
        const mix = MAJORITY_FAULTS[majorities++ % MAJORITY_FAULTS.length] as (typeof MAJORITY_FAULTS)[number]
        const down = Array.from({ length: majority }, (_, i) => {
          const how: 'kill' | 'sigstop' = mix === 'kill+sigstop' ? (i < majority / 2 ? 'kill' : 'sigstop') : mix
          return { node: nodes[(next + i) % n] as RedisServer, how }
        })
        next = (next + 1) % n
        try {
          await Promise.all(down.map((d) => takeDown(d.node, d.how)))
          const start = monoNow()
          await pauseFor(ctx.waitMs + 2 * ctx.ttlMs, stopped)
          const end = monoNow()
          const detail = `${majority} of ${n} nodes (${down.map((d) => `${d.node.port} ${d.how === 'kill' ? 'killed' : 'SIGSTOPped'}`).join(', ')}) for ${Math.round(end - start)} ms`
          ctx.recorder.record({ k: 'fault', kind: `majority-${mix}`, start, end, quorumDown: 'majority', detail })
        } finally {
          await Promise.all(down.map((d) => bringBack(d.node, d.how)))
        }
        return
      }
      const node = nodes[next] as RedisServer
      const which = `node ${next} (${node.port})`
      next = (next + 1) % n
      if (kind === 'node-restart') {
        const aimed = await heldOnBareMajority(conns, nodes.indexOf(node), majority, ctx.lockPrefix, ctx.ttlMs, stopped)
        await node.stop()
        const start = monoNow()
        try {
          const aim = aimed === undefined ? 'no lock was held on exactly a majority with it' : `${aimed} was held on exactly a majority with it`
          ctx.recorder.record({ k: 'fault', kind, start, end: start, quorumDown: 'minority', detail: `${which}: SIGKILL and a fresh process at once, no persistence; ${aim}` })
        } finally {
          await node.spawn()
        }
        return
      }
      const how = kind === 'node-kill' ? 'kill' : 'sigstop'
      try {
        await takeDown(node, how)
        const start = monoNow()
        await pauseFor(stall(), stopped)
        const end = monoNow()
        ctx.recorder.record({ k: 'fault', kind, start, end, quorumDown: 'minority', detail: `${which} ${how === 'kill' ? 'killed, back empty' : 'SIGSTOPped'} after ${Math.round(end - start)} ms` })
      } finally {
        await bringBack(node, how)
      }
    },
  )
  return {
    async stop() {
      await injector.stop()
      for (const conn of conns) conn.disconnect()
    },
  }
}

/** `promise`, or undefined after `ms` or when it fails. */
function within<T>(promise: Promise<T>, ms: number): Promise<T | undefined> {
  return Promise.race([promise.catch(() => undefined), sleep(ms).then(() => undefined)])
}

/**
 * Waits up to `ms` for a lock key of the run that node `target` holds with exactly `majority - 1`
 * other nodes (a bare majority: restarting `target` without persistence leaves its holder a
 * minority), and returns it; undefined when none came.
 */
async function heldOnBareMajority(conns: readonly Redis[], target: number, majority: number, prefix: string, ms: number, stopped: () => boolean): Promise<string | undefined> {
  const until = performance.now() + ms
  while (!stopped() && performance.now() < until) {
    const [, keys] = (await within((conns[target] as Redis).scan('0', 'MATCH', `${prefix}*:lock`, 'COUNT', 1000), 100)) ?? ['0', []]
    for (const key of keys) {
      const others = await Promise.all(conns.map((conn, i) => (i === target ? Promise.resolve(0) : within(conn.exists(key), 100))))
      if (others.filter((found) => found === 1).length === majority - 1) return key
    }
    await sleep(20)
  }
  return undefined
}

/** How long a worker killed by {@link killWorker} stays down before its restart, in TTLs. */
export const KILLED_DOWN_TTLS = 2

/**
 * kill -9 of a worker mid-charge, with the demo shop's kill chaos (`startKillChaos`): when a
 * worker reports a gateway charge, at a random moment of the gateway's latency, SIGKILL; after
 * {@link KILLED_DOWN_TTLS}×TTL it is restarted with `FENCELOCK_DIE_AFTER_CHARGE=<1-3>`, so it
 * kills itself right after the gateway answered a charge and before the payment row (recorded by
 * the worker itself); then restarted again, and after a TTL the next kill. Each kill is recorded
 * right before the SIGKILL, naming the instance (the checker ends its open sections there).
 */
export function killWorker(ctx: FaultContext): Injector {
  const seed = randomInt(2 ** 31)
  let killed: () => void = () => {}
  let diedAfterCharge: () => void = () => {}
  const enough = Promise.all([new Promise<void>((resolve) => (killed = resolve)), new Promise<void>((resolve) => (diedAfterCharge = resolve))]).then(() => {})
  // Every exit during the run that is not one of our kills is a worker that killed itself after
  // a charge (FENCELOCK_DIE_AFTER_CHARGE; the worker records it in its own history).
  const ourKills = new Set<number>()
  let stopping = false
  const offExit = ctx.supervisor.onExit((_id, pid) => {
    if (!stopping && pid !== undefined && !ourKills.has(pid)) diedAfterCharge()
  })
  const chaos = startKillChaos(ctx.supervisor, {
    random: seededRandom(seed),
    restartAfterMs: KILLED_DOWN_TTLS * ctx.ttlMs,
    gapMs: ctx.ttlMs,
    latencyMaxMs: ctx.gatewayMaxMs ?? ctx.ttlMs,
    firstAfterMs: 0,
    onKill: (call) => {
      ourKills.add(call.pid)
      const at = monoNow()
      ctx.recorder.record({ k: 'fault', kind: 'worker-kill-9', inst: call.instance, start: at, end: at, detail: `${call.instance} (pid ${call.pid}) SIGKILLed in a charge of ${call.resource} (kill seed ${seed})` })
      killed()
    },
  })
  return {
    async stop() {
      stopping = true
      offExit()
      await chaos.stop()
    },
    enough,
  }
}
