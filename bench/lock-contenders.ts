// The lock implementations `npm run bench:lock` compares, in one registry. Each runs in its own
// child process, set up the same way: one ioredis connection per redis-server (created by the
// harness, default options), the library at its defaults unless a note below says otherwise.
// The quorum scenarios run on N redis-servers, one connection to each.
//
// Adding a contender (e.g. "ours with metrics" for issue 4): append an entry to CONTENDERS, or
// keep it in its own module that exports `contenders: LockContender[]` and pass that module with
// `npm run bench:lock -- --contenders-module bench/lock-contenders-metrics.ts`. Set
// `targets: true` to have it judged against the targets like `ours`.
import { randomBytes } from 'node:crypto'
import { setTimeout as sleep } from 'node:timers/promises'
import { pathToFileURL } from 'node:url'
import { resolve } from 'node:path'
import { LOCK_SCRIPTS, Locker, resourceKeys } from '@fencelock/lock'
import type { Redis } from 'ioredis'
import { Redis as Valkey } from 'iovalkey'
import { createClient } from 'redis'
import { GlideClient, TimeUnit } from '@valkey/valkey-glide'
import { Mutex, RedlockMutex } from 'redis-semaphore'
import Redlock from 'redlock'

/**
 * On one redis-server: `uncontended`: each worker its own key. `contended`: 20 workers, one key,
 * 1 ms holds. `fair`: 18 workers, one key, 400 ms holds, 15 s waits: is everyone served in turn?
 */
export type SingleScenario = 'uncontended' | 'contended' | 'fair'

/**
 * Quorum mode, on N redis-servers (issue 15): `quorum-uncontended` and `quorum-contended` as
 * their single-server namesakes; `quorum-degraded`: 2 of 5 servers killed under load (and kept
 * down); `quorum-majority-down`: 3 of 5 killed, then single acquires that must fail in time.
 */
export type QuorumScenario = 'quorum-uncontended' | 'quorum-contended' | 'quorum-degraded' | 'quorum-majority-down'

export type Scenario = SingleScenario | QuorumScenario

export const SINGLE_SCENARIOS: readonly SingleScenario[] = ['uncontended', 'contended', 'fair']
export const QUORUM_SCENARIOS: readonly QuorumScenario[] = ['quorum-uncontended', 'quorum-contended', 'quorum-degraded', 'quorum-majority-down']

export function isQuorumScenario(scenario: Scenario): scenario is QuorumScenario {
  return scenario.startsWith('quorum-')
}

/** Releases a held lock; called exactly once. */
export type Release = () => Promise<unknown>

/** A contender set up on one connection, inside a child process. */
export interface ContenderInstance {
  /** Resolves once `key` is held, waiting as long as the library waits. */
  acquire(key: string): Promise<Release>
  close(): Promise<void>
}

export interface ContenderContext {
  /** The connection this instance runs on (the first of `nodes`); the harness closes it. */
  readonly redis: Redis
  /**
   * One connection per redis-server of the scenario, default ioredis options and an `'error'`
   * listener: `[redis]` on one server, N of them in the quorum scenarios. The harness closes them.
   */
  readonly nodes: readonly Redis[]
  readonly scenario: Scenario
  /** Lease time given to every library, in ms (redis-semaphore's default, 10 s). */
  readonly ttlMs: number
  /** How long an acquire may wait, in ms; undefined: the library's default. */
  readonly waitMs: number | undefined
}

export interface LockContender {
  /** Short id used on the command line (`--contenders raw,ours`) and in the child. */
  readonly id: string
  /** Row label in the tables. */
  readonly label: string
  /** What differs from the library's defaults, per scenario; printed under the tables. */
  readonly notes?: Partial<Record<Scenario, string>>
  /** Judged against the targets (ours and its variants). */
  readonly targets: boolean
  readonly scenarios: readonly Scenario[]
  /**
   * `shared`: the workers of a run share one instance on one connection (the usual set-up).
   * `per-worker`: each worker gets its own connection and instance, as separate processes would.
   */
  readonly layout: 'shared' | 'per-worker'
  create(ctx: ContenderContext): Promise<ContenderInstance>
}

/** The fastest correct thing one can write by hand: `SET NX PX`, then compare-and-delete. */
const RAW_RELEASE_LUA = `if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0`
/** How often the raw loop retries a held key (contended run only). */
const RAW_RETRY_MS = 1

/**
 * The raw loop over a client's `SET NX PX` and its `EVALSHA` of the compare-and-delete: owner ids
 * unique per process and per grant (the raw limit skips the cost of a random owner id); a held key
 * is tried again every {@link RAW_RETRY_MS}.
 */
function rawLoop(setNx: (key: string, owner: string) => Promise<boolean>, release: (key: string, owner: string) => Promise<unknown>, close: () => Promise<void>): ContenderInstance {
  const prefix = randomBytes(8).toString('hex')
  let n = 0
  return {
    async acquire(key) {
      for (;;) {
        const owner = `${prefix}:${++n}`
        if (await setNx(key, owner)) return () => release(key, owner)
        await sleep(RAW_RETRY_MS)
      }
    },
    close,
  }
}

const raw: LockContender = {
  id: 'raw',
  label: 'raw SET NX PX + EVALSHA del',
  notes: { contended: `retries a held key every ${RAW_RETRY_MS} ms (a polling floor, not a library)` },
  targets: false,
  scenarios: ['uncontended', 'contended'],
  layout: 'shared',
  async create({ redis, ttlMs }) {
    const sha = (await redis.script('LOAD', RAW_RELEASE_LUA)) as string
    return rawLoop(
      async (key, owner) => (await redis.set(key, owner, 'PX', ttlMs, 'NX')) === 'OK',
      (key, owner) => redis.evalsha(sha, 1, key, owner),
      async () => {},
    )
  },
}

/**
 * Our protocol without our client code: the Locker's own two scripts (acquire minting a token,
 * owner-checked release) driven by a bare loop, like the raw one. What it loses to raw is what
 * the protocol costs on the server and the wire; what ours loses to it is the Locker's work in
 * the client (deadlines, the Lock object, events, waiting logic).
 */
const protocol: LockContender = {
  id: 'protocol',
  label: 'our scripts in a bare loop (no Locker)',
  targets: false,
  scenarios: ['uncontended'],
  layout: 'shared',
  async create({ redis, ttlMs }) {
    const { acquire, release } = LOCK_SCRIPTS
    // The loop sends arguments by position: fail loudly if the scripts' contracts change.
    expectContract('acquire', acquire.keys, ['lock', 'fence'], acquire.args, ['ownerId', 'ttlMs', 'fenceTtlMs', 'lockerId', 'reseed'])
    expectContract('release', release.keys, ['lock'], release.args, ['ownerId'])
    const acquireSha = (await redis.script('LOAD', acquire.lua)) as string
    const releaseSha = (await redis.script('LOAD', release.lua)) as string
    const lockerId = randomBytes(8).toString('hex')
    // 32 characters like the Locker's owner ids, unique per grant, without a CSPRNG draw each.
    const prefix = randomBytes(8).toString('hex')
    let n = 0
    return {
      async acquire(key) {
        const keys = resourceKeys('fencelock:', key)
        const owner = prefix + (++n).toString(16).padStart(16, '0')
        const reply = await redis.evalsha(acquireSha, 2, keys.lock, keys.fence, owner, ttlMs, 86_400_000, lockerId, '0')
        if (typeof reply !== 'number' && typeof reply !== 'string') throw new Error(`uncontended key was held: ${String(reply)}`)
        BigInt(reply) // the token, as the Locker parses it
        return () => redis.evalsha(releaseSha, 1, keys.lock, owner)
      },
      async close() {},
    }
  },
}

function expectContract(name: string, keys: readonly string[], wantKeys: readonly string[], args: readonly string[], wantArgs: readonly string[]): void {
  if (keys.join() !== wantKeys.join() || args.join() !== wantArgs.join()) {
    throw new Error(`LOCK_SCRIPTS.${name} takes KEYS ${keys.join(', ')} and ARGV ${args.join(', ')}: update the bare loop`)
  }
}

/** redis-semaphore's default acquireTimeout (10 s) lets a starved worker fail inside a 10 s run. */
const SEMAPHORE_CONTENDED_ACQUIRE_TIMEOUT_MS = 600_000

function semaphoreContender(id: string, label: string, layout: LockContender['layout'], scenarios: readonly Scenario[]): LockContender {
  return {
    id,
    label,
    notes: {
      contended: `acquireTimeout ${SEMAPHORE_CONTENDED_ACQUIRE_TIMEOUT_MS / 1000} s instead of 10 s, so no worker gives up; retryInterval stays 10 ms`,
      fair: 'acquireTimeout 15 s (the wait every contender gets here); retryInterval stays 10 ms',
    },
    targets: false,
    scenarios,
    layout,
    async create({ redis, scenario, waitMs }) {
      // One Mutex per acquisition, as its README does; lockTimeout (10 s) and the rest at defaults.
      const options = scenario === 'contended' ? { acquireTimeout: SEMAPHORE_CONTENDED_ACQUIRE_TIMEOUT_MS } : waitMs !== undefined ? { acquireTimeout: waitMs } : {}
      return {
        async acquire(key) {
          const mutex = new Mutex(redis, key, options)
          await mutex.acquire()
          return () => mutex.release()
        },
        async close() {},
      }
    },
  }
}

const redlock: LockContender = {
  id: 'redlock',
  label: 'redlock 5.0.0-beta.2 (1 client)',
  notes: { contended: 'retryCount -1 (unlimited) instead of 10, so no worker gives up after ~2 s; retryDelay stays 200 ± 100 ms' },
  targets: false,
  scenarios: ['uncontended', 'contended'],
  layout: 'shared',
  async create({ redis, scenario, ttlMs }) {
    return redlockInstance(new Redlock([redis], scenario === 'contended' ? { retryCount: -1 } : {}), ttlMs)
  },
}

/** A redlock instance as a contender: acquire one key for `ttlMs`, release what it got. */
function redlockInstance(lock: Redlock, ttlMs: number): ContenderInstance {
  return {
    async acquire(key) {
      const held = await lock.acquire([key], ttlMs)
      return () => held.release()
    },
    async close() {},
  }
}

function oursContender(
  id: string,
  label: string,
  layout: LockContender['layout'],
  scenarios: readonly Scenario[],
  extra: { coalesceWrites?: boolean } = {},
): LockContender {
  return {
    id,
    label,
    targets: extra.coalesceWrites === undefined,
    scenarios,
    layout,
    async create({ redis, ttlMs, waitMs }) {
      // Defaults (waitMs 10 s, pollMs 1 s, commandTimeoutMs 2 s, handoffMs 500) except the
      // common lease time, and the wait where the scenario sets one.
      const locker = new Locker(redis, { ...(waitMs === undefined ? { ttlMs } : { ttlMs, waitMs }), ...extra })
      return {
        async acquire(key) {
          const lock = await locker.acquire(key)
          return () => lock.release()
        },
        close: () => locker.close(),
      }
    },
  }
}

// --- the other clients (issue 37): ours and the raw floor on node-redis and on iovalkey ---------

/**
 * A client of another library on the same redis-server as the harness's ioredis connection
 * (default options but the address): `setNx` sends `SET key owner PX ttl NX`, `evalSha` the raw
 * release, `locker` the Locker on it. Closed by `close()`.
 */
interface OtherClient {
  setNx(key: string, owner: string, ttlMs: number): Promise<boolean>
  scriptLoad(lua: string): Promise<string>
  evalSha(sha: string, key: string, arg: string): Promise<unknown>
  locker(options: { ttlMs: number; waitMs?: number }): Locker
  close(): Promise<void>
}

type ClientLibrary = 'node-redis' | 'iovalkey' | 'glide'

async function otherClient(library: ClientLibrary, redis: Redis): Promise<OtherClient> {
  const { host, port } = redis.options
  if (library === 'node-redis') {
    const client = createClient({ socket: { host, port } })
    client.on('error', () => {})
    await client.connect()
    return {
      setNx: async (key, owner, ttlMs) => (await client.set(key, owner, { expiration: { type: 'PX', value: ttlMs }, condition: 'NX' })) === 'OK',
      scriptLoad: (lua) => client.scriptLoad(lua),
      evalSha: (sha, key, arg) => client.evalSha(sha, { keys: [key], arguments: [arg] }),
      locker: (options) => new Locker(client, options),
      close: async () => void (await client.quit()),
    }
  }
  if (library === 'glide') {
    // Its default requestTimeout (250 ms) is below the Locker's commandTimeoutMs: set above it, as docs/LOCK.md says.
    const client = await GlideClient.createClient({ addresses: [{ host: host ?? '127.0.0.1', port: port ?? 6379 }], requestTimeout: 5_000 })
    return {
      setNx: async (key, owner, ttlMs) =>
        (await client.set(key, owner, { conditionalSet: 'onlyIfDoesNotExist', expiry: { type: TimeUnit.Milliseconds, count: ttlMs } })) === 'OK',
      scriptLoad: async (lua) => String(await client.customCommand(['SCRIPT', 'LOAD', lua])),
      evalSha: (sha, key, arg) => client.customCommand(['EVALSHA', sha, '1', key, arg]),
      locker: (options) => new Locker(client, options),
      close: async () => client.close(),
    }
  }
  const client = new Valkey({ host, port })
  client.on('error', () => {})
  await new Promise<void>((resolve, reject) => {
    client.once('ready', resolve)
    client.once('error', reject)
  })
  return {
    setNx: async (key, owner, ttlMs) => (await client.set(key, owner, 'PX', ttlMs, 'NX')) === 'OK',
    scriptLoad: async (lua) => (await client.script('LOAD', lua)) as string,
    evalSha: (sha, key, arg) => client.evalsha(sha, 1, key, arg),
    locker: (options) => new Locker(client, options),
    close: async () => void (await client.quit()),
  }
}

/** The raw floor (as `raw`) on another client library. */
function rawOnClient(library: ClientLibrary): LockContender {
  return {
    id: `raw-${library}`,
    label: `raw SET NX PX + EVALSHA del on ${library}`,
    notes: { contended: `retries a held key every ${RAW_RETRY_MS} ms (a polling floor, not a library)` },
    targets: false,
    scenarios: ['uncontended', 'contended'],
    layout: 'shared',
    async create({ redis, ttlMs }) {
      const client = await otherClient(library, redis)
      const sha = await client.scriptLoad(RAW_RELEASE_LUA)
      return rawLoop(
        (key, owner) => client.setNx(key, owner, ttlMs),
        (key, owner) => client.evalSha(sha, key, owner),
        () => client.close(),
      )
    },
  }
}

/** Ours (as `ours`: one Locker, defaults but the lease and the wait) on another client library. */
function oursOnClient(library: ClientLibrary): LockContender {
  return {
    id: `ours-${library}`,
    label: `ours (1 Locker) on ${library}`,
    targets: false,
    scenarios: ['uncontended', 'contended'],
    layout: 'shared',
    async create({ redis, ttlMs, waitMs }) {
      const client = await otherClient(library, redis)
      const locker = client.locker(waitMs === undefined ? { ttlMs } : { ttlMs, waitMs })
      return {
        async acquire(key) {
          const lock = await locker.acquire(key)
          return () => lock.release()
        },
        async close() {
          await locker.close()
          await client.close()
        },
      }
    },
  }
}

/** The client libraries of the per-client rows, beside ioredis (`raw`, `ours`). */
export const OTHER_CLIENTS: readonly ClientLibrary[] = ['node-redis', 'iovalkey', 'glide']

// --- quorum mode (issue 15): N independent redis-servers, one connection to each -------------

/** redis-semaphore's RedlockMutex, one per acquisition as its README does. */
const semaphoreRedlock: LockContender = {
  id: 'semaphore-redlock',
  label: 'redis-semaphore 5.8 RedlockMutex',
  notes: {
    'quorum-contended': `acquireTimeout ${SEMAPHORE_CONTENDED_ACQUIRE_TIMEOUT_MS / 1000} s instead of 10 s, so no worker gives up; retryInterval stays 10 ms`,
    'quorum-majority-down': "acquireTimeout = the run's waitMs instead of 10 s; retryInterval stays 10 ms",
  },
  targets: false,
  scenarios: ['quorum-uncontended', 'quorum-contended', 'quorum-degraded', 'quorum-majority-down'],
  layout: 'shared',
  async create({ nodes, scenario, waitMs }) {
    const options =
      scenario === 'quorum-contended' ? { acquireTimeout: SEMAPHORE_CONTENDED_ACQUIRE_TIMEOUT_MS } : scenario === 'quorum-majority-down' && waitMs !== undefined ? { acquireTimeout: waitMs } : {}
    const clients = [...nodes]
    return {
      async acquire(key) {
        const mutex = new RedlockMutex(clients, key, options)
        await mutex.acquire()
        return () => mutex.release()
      },
      async close() {},
    }
  },
}

/** redlock's default retry delay, the unit of its retry window. */
const REDLOCK_RETRY_DELAY_MS = 200

const redlockQuorum: LockContender = {
  id: 'redlock-quorum',
  label: 'redlock 5.0.0-beta.2 (N clients)',
  notes: {
    'quorum-contended': 'retryCount -1 (unlimited) instead of 10, so no worker gives up after ~2 s; retryDelay stays 200 ± 100 ms',
    'quorum-majority-down': `retryCount = waitMs ÷ ${REDLOCK_RETRY_DELAY_MS} ms instead of 10, so its retry window is about the run's waitMs (it has no wait option); retryDelay stays 200 ± 100 ms`,
  },
  targets: false,
  scenarios: ['quorum-uncontended', 'quorum-contended', 'quorum-degraded', 'quorum-majority-down'],
  layout: 'shared',
  async create({ nodes, scenario, ttlMs, waitMs }) {
    const settings =
      scenario === 'quorum-contended'
        ? { retryCount: -1 }
        : scenario === 'quorum-majority-down' && waitMs !== undefined
          ? { retryCount: Math.max(0, Math.round(waitMs / REDLOCK_RETRY_DELAY_MS)) }
          : {}
    return redlockInstance(new Redlock([...nodes], settings), ttlMs)
  },
}

/** Ours in quorum mode: one Locker over the N connections (`new Locker([a, b, c, ...])`). */
function oursQuorumContender(id: string, label: string, layout: LockContender['layout'], scenarios: readonly QuorumScenario[]): LockContender {
  return {
    id,
    label,
    targets: true,
    scenarios,
    layout,
    async create({ nodes, ttlMs, waitMs }) {
      // Defaults but the common lease time and the wait where the scenario sets one, as `ours`.
      const locker = new Locker([...nodes], waitMs === undefined ? { ttlMs } : { ttlMs, waitMs })
      return {
        async acquire(key) {
          const lock = await locker.acquire(key)
          return () => lock.release()
        },
        close: () => locker.close(),
      }
    },
  }
}

/** The built-in contenders, in the order of the tables and of each round. */
export const CONTENDERS: readonly LockContender[] = [
  raw,
  protocol,
  semaphoreContender('semaphore', 'redis-semaphore 5.8 Mutex', 'shared', ['uncontended', 'contended']),
  redlock,
  oursContender('ours', 'ours (1 Locker)', 'shared', ['uncontended', 'contended']),
  // Cross-process behaviour: every worker its own Locker and connections, like 20 processes.
  oursContender('ours-20', 'ours (20 Lockers)', 'per-worker', ['contended']),
  // The fair queue across processes under long holds (issue 13's starvation case).
  oursContender('ours-18', 'ours (18 Lockers)', 'per-worker', ['fair']),
  // Ours writing each command as ioredis sends it, like the raw floor (docs/LOCK.md, "Write
  // coalescing"): the like-for-like reference of the per-client quotient (lock-clients-report.ts).
  oursContender('ours-uncoalesced', 'ours (1 Locker), coalesceWrites: false', 'shared', ['uncontended'], { coalesceWrites: false }),
  // The same two on the other client libraries (issue 37): is ours as close to the floor on each?
  ...OTHER_CLIENTS.flatMap((library) => [rawOnClient(library), oursOnClient(library)]),
  semaphoreContender('semaphore-18', 'redis-semaphore 5.8 Mutex (18 connections)', 'per-worker', ['fair']),
  // Quorum mode: the anchors, then ours.
  semaphoreRedlock,
  redlockQuorum,
  oursQuorumContender('ours-quorum', 'ours (1 Locker over N)', 'shared', ['quorum-uncontended', 'quorum-contended', 'quorum-degraded', 'quorum-majority-down']),
  // Across processes: every worker its own Locker and N connections, like 20 processes.
  oursQuorumContender('ours-quorum-20', 'ours (20 Lockers over N)', 'per-worker', ['quorum-contended']),
]

/** Built-in contenders plus those exported (`contenders`) by each extra module, ids unique. */
export async function loadContenders(modules: readonly string[] = []): Promise<LockContender[]> {
  const all = [...CONTENDERS]
  for (const m of modules) {
    const mod = (await import(pathToFileURL(resolve(m)).href)) as { contenders?: unknown }
    if (!Array.isArray(mod.contenders)) throw new Error(`${m}: must export "contenders: LockContender[]"`)
    all.push(...(mod.contenders as LockContender[]))
  }
  const ids = new Set<string>()
  for (const c of all) {
    if (ids.has(c.id)) throw new Error(`duplicate contender id "${c.id}"`)
    ids.add(c.id)
  }
  return all
}
