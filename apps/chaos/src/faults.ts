/**
 * The fault injectors. Each runs in the runner process, touches only processes the run started
 * (its worker PIDs through the Supervisor, its own redis-server by PID), records every fault with
 * its start and end on CLOCK_MONOTONIC, and undoes what is in progress when stopped.
 */
import { writeFileSync } from 'node:fs'
import { Redis } from 'ioredis'
import type { Supervisor } from '@fencelock/demo-shop/supervisor'
import type { RedisServer } from '@fencelock/devkit/redis-server'
import { monoNow, type Recorder } from './history.js'

/** What an injector may touch. */
export interface FaultContext {
  readonly supervisor: Supervisor
  readonly redis: RedisServer
  readonly recorder: Recorder
  readonly ttlMs: number
  /** The lock key prefix of the run (its keys only). */
  readonly lockPrefix: string
  /** The libfaketime control file of the faked worker (clock-jump only). */
  readonly fakeTimeFile?: string
}

/** A running injector. */
export interface Injector {
  stop(): Promise<void>
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

/** SIGSTOP of a worker that is inside a gateway call under a lock, for 0-3 × TTL, then SIGCONT. */
export function sigstopHolder(ctx: FaultContext): Injector {
  let armedAt = performance.now() + ctx.ttlMs
  let current: { pid: number; wake: () => void } | undefined
  let running: Promise<void> = Promise.resolve()
  let stopped = false
  const unsubscribe = ctx.supervisor.onExternalCall((call) => {
    if (stopped || current !== undefined || performance.now() < armedAt || Math.random() > 0.5) return
    if (!ctx.supervisor.freeze(call.pid)) return
    const ms = upTo3Ttl(ctx.ttlMs)
    const start = monoNow()
    current = { pid: call.pid, wake: () => {} }
    running = new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, ms)
      current = { pid: call.pid, wake: () => (clearTimeout(timer), resolve()) }
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
