// What each of our Lua scripts costs Redis per call, as `INFO commandstats` counts it (µs inside
// the server, the calls the script makes included), next to what a bare `SET NX PX` and a plain
// compare-and-delete (what redis-semaphore and the raw loop run) cost on the same server. Each
// case runs alone, its keys set up beforehand, so that the evalsha line of commandstats is that
// one script's; `npm run bench:lock` runs this after its measurements, on its own redis-server.
import { randomBytes } from 'node:crypto'
import { LOCK_SCRIPTS, resourceKeys } from '@fencelock/lock'
import { Redis } from 'ioredis'
import { parseCommandStats } from './support/redis-info.js'

export interface ScriptCost {
  /** What was measured, e.g. "acquire (lean), granted". */
  readonly label: string
  /** The command whose line is read: evalsha, or set for the bare SET. */
  readonly command: string
  readonly calls: number
  /** µs per call of that command (its inner calls included, for a script). */
  readonly usPerCall: number
  /** Calls made inside the script per call, by command. */
  readonly inner: Record<string, number>
}

/** Calls per case; enough for a stable mean, few enough to take a second or two. */
const CALLS = 20_000
/** In flight at once, so the numbers are those of a busy server, as in the 50-worker run. */
const IN_FLIGHT = 50
const RAW_RELEASE_LUA = `if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0`

/** The probe sends arguments by position: fail loudly, before any call, if a script's contract changed. */
function expectContracts(): void {
  const want: Partial<Record<keyof typeof LOCK_SCRIPTS, [keys: string[], args: string[]]>> = {
    acquire: [['lock', 'fence'], ['ownerId', 'ttlMs', 'fenceTtlMs', 'lockerId', 'reseed']],
    queuedAcquire: [['lock', 'fence', 'queue', 'leases'], ['ownerId', 'ttlMs', 'fenceTtlMs', 'lockerId', 'leaseMs', 'mode', 'reseed', 'ticket', 'stayTicket']],
    release: [['lock'], ['ownerId']],
    handoffRelease: [['lock', 'queue', 'leases'], ['ownerId', 'channel', 'lockerId', 'handoffMs']],
    leave: [['lock', 'queue', 'leases'], ['channel', 'lockerId', 'handoffMs']],
    extend: [['lock'], ['ownerId', 'ttlMs']],
    raiseFence: [['fence'], ['token', 'fenceTtlMs']],
  }
  for (const [name, [keys, args]] of Object.entries(want) as [keyof typeof LOCK_SCRIPTS, [string[], string[]]][]) {
    const script = LOCK_SCRIPTS[name]
    if (script.keys.join() !== keys.join() || script.args.join() !== args.join()) {
      throw new Error(`LOCK_SCRIPTS.${name} takes KEYS ${script.keys.join(', ')} and ARGV ${script.args.join(', ')}: update bench/lock-script-costs.ts`)
    }
  }
}

export async function measureScriptCosts(host: string, port: number): Promise<ScriptCost[]> {
  expectContracts()
  const redis = new Redis({ host, port })
  const run = randomBytes(4).toString('hex')
  const lockerId = randomBytes(8).toString('hex')
  const owner = (i: number) => `${run}${String(i).padStart(24, '0')}`
  const keysOf = (label: string, i: number) => resourceKeys(`probe:${run}:${label}:`, `r${i}`)
  const sha = async (lua: string) => (await redis.script('LOAD', lua)) as string
  const shas = {
    acquire: await sha(LOCK_SCRIPTS.acquire.lua),
    queuedAcquire: await sha(LOCK_SCRIPTS.queuedAcquire.lua),
    release: await sha(LOCK_SCRIPTS.release.lua),
    handoffRelease: await sha(LOCK_SCRIPTS.handoffRelease.lua),
    leave: await sha(LOCK_SCRIPTS.leave.lua),
    extend: await sha(LOCK_SCRIPTS.extend.lua),
    raiseFence: await sha(LOCK_SCRIPTS.raiseFence.lua),
    rawRelease: await sha(RAW_RELEASE_LUA),
  }
  const costs: ScriptCost[] = []
  const nowMs = async () => {
    const [s, us] = (await redis.time()) as unknown as [string, string]
    return Number(s) * 1000 + Math.floor(Number(us) / 1000)
  }

  /** Runs `call(i)` for i < CALLS, IN_FLIGHT at a time, and records the line of `command`. */
  const measure = async (label: string, command: string, call: (i: number) => Promise<unknown>) => {
    await redis.config('RESETSTAT')
    let next = 0
    await Promise.all(
      Array.from({ length: IN_FLIGHT }, async () => {
        while (next < CALLS) await call(next++)
      }),
    )
    const stats = parseCommandStats(await redis.info('commandstats'))
    const line = stats.get(command) ?? { calls: 0, usec: 0 }
    const inner: Record<string, number> = {}
    if (command === 'evalsha') {
      // The probe's own CONFIG RESETSTAT and INFO are not the script's (Redis 7 names them config|resetstat).
      for (const [name, stat] of stats) if (name !== 'evalsha' && !/^(config|info)\b/.test(name)) inner[name] = stat.calls / line.calls
    }
    costs.push({ label, command, calls: line.calls, usPerCall: line.usec / Math.max(1, line.calls), inner })
  }
  // Sets up CALLS resources with `setup(i)` in pipelines, outside the measured part.
  const prepare = async (setup: (p: ReturnType<Redis['pipeline']>, i: number) => void) => {
    for (let base = 0; base < CALLS; base += 1000) {
      const p = redis.pipeline()
      for (let i = base; i < Math.min(CALLS, base + 1000); i++) setup(p, i)
      await p.exec()
    }
  }

  try {
    // The uncontended pair, and the bare commands others run for the same.
    await measure('bare SET NX PX (raw, redis-semaphore acquire)', 'set', (i) => redis.set(`probe:${run}:raw:${i}`, owner(i), 'PX', 10_000, 'NX'))
    await measure('plain compare-and-delete (raw, redis-semaphore release)', 'evalsha', (i) => redis.evalsha(shas.rawRelease, 1, `probe:${run}:raw:${i}`, owner(i)))
    // A resource's first grant seeds its counter from the clock; later ones INCR it.
    await prepare((p, i) => p.set(keysOf('acq', i).fence, String(1_700_000_000_000_000 + i)))
    await measure('acquire (lean): granted', 'evalsha', (i) => {
      const k = keysOf('acq', i)
      return redis.evalsha(shas.acquire, 2, k.lock, k.fence, owner(i), 10_000, 86_400_000, lockerId, '0')
    })
    await measure('acquire (lean): granted, counter seeded from the clock', 'evalsha', (i) => {
      const k = keysOf('seed', i)
      return redis.evalsha(shas.acquire, 2, k.lock, k.fence, owner(i), 10_000, 86_400_000, lockerId, '0')
    })
    await measure('release (lean): ours, nobody waiting', 'evalsha', (i) => redis.evalsha(shas.release, 1, keysOf('acq', i).lock, owner(i)))
    await prepare((p, i) => {
      const k = keysOf('held', i)
      p.set(k.lock, owner(i), 'PX', 60_000)
      p.set(k.fence, String(1_700_000_000_000_000 + i))
    })
    await measure('acquire (lean): missed', 'evalsha', (i) => {
      const k = keysOf('held', i)
      return redis.evalsha(shas.acquire, 2, k.lock, k.fence, owner(CALLS + i), 10_000, 86_400_000, lockerId, '0')
    })
    await measure('extend: ours', 'evalsha', (i) => redis.evalsha(shas.extend, 1, keysOf('held', i).lock, owner(i), 60_000))
    // Quorum mode's second phase, on a node whose counter is behind the grant's token.
    await measure('raise fence (quorum mode): counter behind, raised', 'evalsha', (i) =>
      redis.evalsha(shas.raiseFence, 1, keysOf('held', i).fence, String(1_700_000_000_000_000 + CALLS + i), 86_400_000),
    )
    // ticket and stayTicket '': the server's clock places the joiner (a single node's order of arrival).
    await measure('queued acquire: missed, joins the queue and marks the holder', 'evalsha', (i) => {
      const k = keysOf('held', i)
      return redis.evalsha(shas.queuedAcquire, 4, k.lock, k.fence, k.queue, k.leases, owner(CALLS + i), 10_000, 86_400_000, lockerId, 5_000, 'join', '0', '', '')
    })
    await measure('release of a marked key: answers "hand it on"', 'evalsha', (i) => redis.evalsha(shas.release, 1, keysOf('held', i).lock, owner(i)))
    await measure('hand-off release: hands the lock to the queued locker, publishes', 'evalsha', (i) => {
      const k = keysOf('held', i)
      return redis.evalsha(shas.handoffRelease, 3, k.lock, k.queue, k.leases, owner(i), k.channel, 'releaser', 500)
    })
    await measure('queued acquire: takes the lock handed to it', 'evalsha', (i) => {
      const k = keysOf('held', i)
      return redis.evalsha(shas.queuedAcquire, 4, k.lock, k.fence, k.queue, k.leases, owner(2 * CALLS + i), 10_000, 86_400_000, lockerId, 5_000, 'join', '0', '', '')
    })
    const now = await nowMs()
    await prepare((p, i) => {
      const k = keysOf('leave', i)
      p.zadd(k.queue, now, lockerId)
      p.hset(k.leases, lockerId, now + 60_000)
    })
    await measure('leave: out of the queue (no hand-off to pass on)', 'evalsha', (i) => {
      const k = keysOf('leave', i)
      return redis.evalsha(shas.leave, 3, k.lock, k.queue, k.leases, k.channel, lockerId, 500)
    })
  } finally {
    redis.disconnect()
  }
  return costs
}
