import { createHash } from 'node:crypto'
import type { Redis } from 'ioredis'
import { beforeAll, describe, expect, it } from 'vitest'
import {
  InvalidLockOptionError,
  LOCK_DEFAULTS,
  LOCK_SCRIPTS,
  Locker,
  LockError,
  MAX_DURATION_MS,
  MAX_RESOURCE_BYTES,
  resourceKeys,
  type Lock,
} from '../src/index.js'
import { commandCalls, connect, makeLocker, ready, unique } from './support/connections.js'
import { startRedisServer, type RedisServer } from './support/redis-server.js'
import { settle } from './support/timing.js'

// Deliberately untyped: these are the calls a JavaScript caller (or a cast) can make.
type AnyLocker = {
  acquire(...args: unknown[]): Promise<unknown>
  tryAcquire(...args: unknown[]): Promise<unknown>
  using(...args: unknown[]): Promise<unknown>
  listen(...args: unknown[]): unknown
}
type Case = readonly [label: string, field: string, call: (locker: AnyLocker) => unknown]

const BAD_DURATIONS = [
  null,
  -1,
  1.5,
  Number.NaN,
  Number.POSITIVE_INFINITY,
  Number.NEGATIVE_INFINITY,
  '100',
  10n,
  true,
  {},
] as const
const BAD_TTLS = [0, ...BAD_DURATIONS, MAX_DURATION_MS + 1]
const BAD_WAITS = [...BAD_DURATIONS, MAX_DURATION_MS + 1]
const BAD_RESOURCES: readonly unknown[] = [
  '',
  undefined,
  null,
  42,
  {},
  ['a'],
  'a'.repeat(MAX_RESOURCE_BYTES + 1),
  'é'.repeat(513), // 513 characters, 1 026 UTF-8 bytes
  '€'.repeat(342), // 342 characters, 1 026 bytes
  '😀'.repeat(257), // 514 UTF-16 units, 1 028 bytes
  '}',
  '}x',
  '}{x}',
  '\uD800', // lone surrogates: UTF-8 turns each into U+FFFD, so two names would share one key
  'a\uDC00b',
  '😀'.slice(0, 1),
]
const BAD_SIGNALS: readonly unknown[] = [
  null,
  {},
  'abort',
  { aborted: false, addEventListener() {} },
  new AbortController(),
]
const show = (v: unknown) =>
  typeof v === 'string'
    ? JSON.stringify(v.length > 12 ? `${v.slice(0, 6)}…(${v.length})` : v)
    : typeof v === 'bigint'
      ? `${v}n`
      : String(v)

/** Every bad argument of the acquire-side entry points, with the field the error must name. */
const CALL_CASES: Case[] = [
  ['acquire options []', 'options', (l) => l.acquire('r', [])],
  ['acquire options inherited waitMs', 'options.waitMs', (l) => l.acquire('r', Object.create({ waitMs: 1 }))],
  ['using options inherited ttlMs', 'options.ttlMs', (l) => l.using('r', () => 1, Object.create({ ttlMs: 1 }))],
  ...BAD_RESOURCES.flatMap((r): Case[] => [
    [`acquire resource ${show(r)}`, 'resource', (l) => l.acquire(r)],
    [`tryAcquire resource ${show(r)}`, 'resource', (l) => l.tryAcquire(r)],
    [`using resource ${show(r)}`, 'resource', (l) => l.using(r, async () => 1)],
  ]),
  ...BAD_TTLS.flatMap((v): Case[] => [
    [`acquire ttlMs ${show(v)}`, 'ttlMs', (l) => l.acquire('r', { ttlMs: v })],
    [`tryAcquire ttlMs ${show(v)}`, 'ttlMs', (l) => l.tryAcquire('r', { ttlMs: v })],
    [`using ttlMs ${show(v)}`, 'ttlMs', (l) => l.using('r', async () => 1, { ttlMs: v })],
  ]),
  ...BAD_WAITS.flatMap((v): Case[] => [
    [`acquire waitMs ${show(v)}`, 'waitMs', (l) => l.acquire('r', { waitMs: v })],
    [`using waitMs ${show(v)}`, 'waitMs', (l) => l.using('r', async () => 1, { waitMs: v })],
  ]),
  ...BAD_SIGNALS.flatMap((v): Case[] => [
    [`acquire signal ${show(v)}`, 'signal', (l) => l.acquire('r', { signal: v })],
    [`using signal ${show(v)}`, 'signal', (l) => l.using('r', async () => 1, { signal: v })],
  ]),
  ...['yes', 1, null].map((v): Case => [
    `acquire autoExtend ${show(v)}`,
    'autoExtend',
    (l) => l.acquire('r', { autoExtend: v }),
  ]),
  ...['x', 5, null].flatMap((v): Case[] => [
    [`acquire options ${show(v)}`, 'options', (l) => l.acquire('r', v)],
    [`tryAcquire options ${show(v)}`, 'options', (l) => l.tryAcquire('r', v)],
    [`using options ${show(v)}`, 'options', (l) => l.using('r', async () => 1, v)],
  ]),
  ...[undefined, 'fn', {}].map((v): Case => [`using fn ${show(v)}`, 'fn', (l) => l.using('r', v)]),
  // A misspelled or foreign option is bad input too: it would otherwise be ignored without a word.
  ['acquire waitMS (misspelled)', 'options.waitMS', (l) => l.acquire('r', { waitMS: 5 })],
  ['acquire ttl (unknown)', 'options.ttl', (l) => l.acquire('r', { ttl: 5 })],
  ['tryAcquire waitMs (not an option of tryAcquire)', 'options.waitMs', (l) => l.tryAcquire('r', { waitMs: 5 })],
  [
    'using autoExtend (always on in using)',
    'options.autoExtend',
    (l) => l.using('r', async () => 1, { autoExtend: false }),
  ],
  ...[undefined, 'fn'].map((v): Case => [`listen ${show(v)}`, 'listener', (l) => l.listen(v)]),
]

/** Every bad option of the Locker constructor. */
const CONSTRUCTOR_CASES: (readonly [label: string, field: string, options: unknown])[] = [
  ...['x', 5, null].map((v) => [`options ${show(v)}`, 'options', v] as const),
  ...[null, 5, 'a{', 'b}', '{x}', 'p'.repeat(257)].map((v) => [`prefix ${show(v)}`, 'prefix', { prefix: v }] as const),
  ...['fn', 5, {}, null].map((v) => [`onEvent ${show(v)}`, 'onEvent', { onEvent: v }] as const),
  ...BAD_TTLS.map((v) => [`ttlMs ${show(v)}`, 'ttlMs', { ttlMs: v }] as const),
  ...BAD_WAITS.map((v) => [`waitMs ${show(v)}`, 'waitMs', { waitMs: v }] as const),
  ...[0, -1, 1.5, Number.NaN, Number.POSITIVE_INFINITY, '100', 60_001].map(
    (v) => [`commandTimeoutMs ${show(v)}`, 'commandTimeoutMs', { commandTimeoutMs: v }] as const,
  ),
  ...[9, 60_001, 1.5, Number.NaN, '100'].map((v) => [`pollMs ${show(v)}`, 'pollMs', { pollMs: v }] as const),
  ...[999, 30 * MAX_DURATION_MS + 1, Number.NaN].map(
    (v) => [`fenceTtlMs ${show(v)}`, 'fenceTtlMs', { fenceTtlMs: v }] as const,
  ),
  ...[0, 60_001, 1.5, Number.NaN, null, '500'].map(
    (v) => [`handoffMs ${show(v)}`, 'handoffMs', { handoffMs: v }] as const,
  ),
  ...[-1, 86_400_001, 1.5, Number.NaN, null, '500'].map(
    (v) => [`nodeRestartDelayMs ${show(v)}`, 'nodeRestartDelayMs', { nodeRestartDelayMs: v }] as const,
  ),
  ...[-1, 17, 1.5, '1', null].map((v) => [`replicas ${show(v)}`, 'replicas', { replicas: v }] as const),
  ...[0, 60_001, 1.5, null].map(
    (v) => [`replicasTimeoutMs ${show(v)}`, 'replicasTimeoutMs', { replicasTimeoutMs: v }] as const,
  ),
  ['ttlMS (misspelled)', 'options.ttlMS', { ttlMS: 5 }],
  ['retries (unknown)', 'options.retries', { retries: 3 }],
  // Issue 33 item 8: an array is not an options object; an option inherited through the
  // prototype would be read but not checked by name; nodeRestartDelayMs means nothing on one Redis.
  ['[] (an array)', 'options', []],
  ['Object.create({ waitMs: 1 })', 'options.waitMs', Object.create({ waitMs: 1 }) as object],
  ['Object.create({ waitMS: 1 })', 'options.waitMS', Object.create({ waitMS: 1 }) as object],
  ['nodeRestartDelayMs 0 on one Redis', 'nodeRestartDelayMs', { nodeRestartDelayMs: 0 }],
  ['nodeRestartDelayMs 1000 on one Redis', 'nodeRestartDelayMs', { nodeRestartDelayMs: 1_000 }],
  ["pubsub 'shard'", 'pubsub', { pubsub: 'shard' }],
  ['pubsub true', 'pubsub', { pubsub: true }],
  ["pubsub 'sharded' on one Redis (not a Cluster)", 'pubsub', { pubsub: 'sharded' }],
]

/** Runs `call` and returns the InvalidLockOptionError it threw or rejected with. */
async function invalidOption(call: () => unknown): Promise<InvalidLockOptionError> {
  let outcome: unknown
  try {
    await call()
    outcome = 'no error'
  } catch (error) {
    outcome = error
  }
  if (!(outcome instanceof InvalidLockOptionError))
    throw new Error(`expected InvalidLockOptionError, got ${String(outcome)}`)
  expect(outcome).toBeInstanceOf(LockError)
  expect(outcome.name).toBe('InvalidLockOptionError')
  return outcome
}

/**
 * A client that records every command called on it and answers nothing. Listening for its events
 * (`on`, `off`: no I/O) is allowed and not recorded.
 */
function recordingClient(): { client: Redis; calls: string[] } {
  const calls: string[] = []
  const client: object = new Proxy(
    {},
    {
      get(_, property) {
        if (property === 'then') return undefined
        if (property === 'on' || property === 'off') return () => client
        return (...args: unknown[]) => {
          calls.push(`${String(property)}(${args.length} args)`)
          return Promise.reject(new Error('the recording client does no I/O'))
        }
      },
    },
  )
  return { client: client as Redis, calls }
}

describe('bad input throws InvalidLockOptionError naming the field, before any I/O', () => {
  it.each(CONSTRUCTOR_CASES)('new Locker(%s) -> field %s', async (_label, field, options) => {
    const { client, calls } = recordingClient()
    const error = await invalidOption(() => new Locker(client, options as never))
    expect(error.field).toBe(field)
    expect(calls).toEqual([])
  })

  it.each([null, undefined, {}, 'redis://127.0.0.1', { evalsha() {} }])(
    'new Locker(redis = %s) -> field redis',
    async (redis) => {
      const error = await invalidOption(() => new Locker(redis as never))
      expect(error.field).toBe('redis')
    },
  )

  it.each(CALL_CASES)('%s -> field %s', async (_label, field, call) => {
    const { client, calls } = recordingClient()
    const locker = new Locker(client) as unknown as AnyLocker
    const error = await invalidOption(() => call(locker))
    expect(error.field).toBe(field)
    expect(calls).toEqual([])
  })

  it('control: the recording client does see the I/O of a valid acquire', async () => {
    const { client, calls } = recordingClient()
    const locker = new Locker(client, { commandTimeoutMs: 50 })
    await expect(locker.tryAcquire('r')).rejects.toThrow()
    expect(calls.some((c) => c.startsWith('evalsha'))).toBe(true)
  })

  it('names the rule and the value in the message, and keeps it short for long strings', async () => {
    const { client } = recordingClient()
    const error = await invalidOption(() => new Locker(client).acquire('x'.repeat(2000)))
    expect(error.rule).toMatch(/1024 bytes/)
    expect(error.message.length).toBeLessThan(200)
  })
})

describe('accepted boundary values (on a spawned redis-server)', () => {
  let server: RedisServer
  let redis: Redis

  beforeAll(async () => {
    server = await startRedisServer()
    redis = connect({ port: server.port })
    await ready(redis, server.url)
  })

  it('accepts ttl 1 ms and 24 h, wait 0 and 24 h, 1 KiB resources counted in UTF-8 bytes, and a prefix of 256 or 0 characters', async () => {
    const locker = makeLocker(redis, {
      prefix: 'p'.repeat(256),
      ttlMs: MAX_DURATION_MS,
      waitMs: MAX_DURATION_MS,
      commandTimeoutMs: 60_000,
    })
    expect(makeLocker(redis, { prefix: '', commandTimeoutMs: 1, pollMs: 10, fenceTtlMs: 1_000 }).options.prefix).toBe(
      '',
    )
    const names = ['a'.repeat(MAX_RESOURCE_BYTES), 'é'.repeat(512), '€'.repeat(341), '😀'.repeat(256), 'x}y', 'a{b}c']
    for (const name of names) {
      const resource = `${name.slice(0, -8)}${unique('').slice(1, 9)}`.slice(-name.length)
      expect(Buffer.byteLength(resource)).toBeLessThanOrEqual(MAX_RESOURCE_BYTES)
      const lock = (await locker.acquire(resource, { waitMs: 0, ttlMs: 1_000 })) as Lock
      expect(lock.resource).toBe(resource)
      await lock.release()
    }
    // A 1 ms lease is accepted; its grant is returned only when it arrives within that 1 ms (a
    // lease that ran out on the way is given back, never returned as held).
    const tiny = await settle(locker.acquire(unique('ttl-1'), { waitMs: 0, ttlMs: 1 }))
    if (tiny.error)
      expect(tiny.error).toMatchObject({
        name: 'LockUnavailableError',
        message: expect.stringContaining('lease of 1 ms had run out'),
      })
    else expect(tiny.value!.ttlMs).toBe(1)
    const long = await locker.tryAcquire(unique('ttl-max'), { ttlMs: MAX_DURATION_MS })
    expect(await redis.pttl(`${'p'.repeat(256)}{${long!.resource}}:lock`)).toBeGreaterThan(MAX_DURATION_MS - 5_000)
    expect(await long!.release()).toBe(true)
  })

  it('proves "before I/O" on a real server: INFO commandstats and connections are unchanged by bad calls', async () => {
    const locker = makeLocker(redis)
    const lock = await locker.acquire(unique('held'), { ttlMs: 5_000 })
    const connectionsBefore = (await redis.info('stats')).match(/total_connections_received:(\d+)/)![1]
    const statsBefore = await commandCalls(redis)

    for (const [, field, call] of CALL_CASES) {
      expect((await invalidOption(() => call(locker as unknown as AnyLocker))).field).toBe(field)
    }
    for (const [, field, options] of CONSTRUCTOR_CASES) {
      expect((await invalidOption(() => new Locker(redis, options as never))).field).toBe(field)
    }
    for (const ttl of BAD_TTLS) expect((await invalidOption(() => lock.extend(ttl as never))).field).toBe('ttlMs')

    const statsAfter = await commandCalls(redis)
    // The only command in between is the INFO commandstats that took the first snapshot.
    expect({ ...statsAfter, info: 0 }).toEqual({ ...statsBefore, info: 0 })
    expect(statsAfter.info).toBe((statsBefore.info ?? 0) + 1)
    expect((await redis.info('stats')).match(/total_connections_received:(\d+)/)![1]).toBe(connectionsBefore)
    expect(lock.isHeld()).toBe(true)

    // Control: valid calls show up in the same statistics (3 calls when the extend script is new
    // on this server: EVALSHA, NOSCRIPT, EVAL).
    await lock.extend(5_000)
    await lock.release()
    const statsControl = await commandCalls(redis)
    expect((statsControl.evalsha ?? 0) + (statsControl.eval ?? 0)).toBeGreaterThanOrEqual(
      (statsAfter.evalsha ?? 0) + (statsAfter.eval ?? 0) + 2,
    )
  })
})

describe('the cache of key names (resources are checked once, when they go in)', () => {
  let redis: Redis

  beforeAll(async () => {
    const server = await startRedisServer()
    redis = connect({ port: server.port })
    await ready(redis, server.url)
  })

  it('never lets a bad name in: it is rejected on every call, before and after good names are cached', async () => {
    const locker = makeLocker(redis)
    const bad = ['', 'x\uD800', '}x', 'a'.repeat(MAX_RESOURCE_BYTES + 1)]
    for (let round = 0; round < 2; round++) {
      for (const name of bad) expect((await invalidOption(() => locker.acquire(name))).field).toBe('resource')
      for (const name of bad) expect((await invalidOption(() => locker.tryAcquire(name))).field).toBe('resource')
      const lock = await locker.acquire(unique('good'))
      expect(await lock.release()).toBe(true)
    }
  })

  it('keeps working past its size (1,024 names): it starts over, and every lock is still on its own key', async () => {
    const locker = makeLocker(redis)
    const base = unique('many')
    const locks = []
    for (let i = 0; i < 1_100; i++) locks.push((await locker.tryAcquire(`${base}:${i}`))!)
    expect(new Set(locks.map((l) => l.resource)).size).toBe(1_100)
    // The first names were built before the cache started over: same keys as a fresh build.
    expect(await redis.get(resourceKeys('fencelock:', `${base}:0`).lock)).not.toBeNull()
    expect(await locker.tryAcquire(`${base}:0`)).toBeNull()
    expect((await Promise.all(locks.map((l) => l.release()))).every(Boolean)).toBe(true)
    expect(await redis.exists(resourceKeys('fencelock:', `${base}:0`).lock)).toBe(0)
  })
})

describe('LOCK_SCRIPTS', () => {
  it('are the sources the Locker runs: after a grant, an extend, a release and a wait that gives up, each SHA1 is loaded', async () => {
    const server = await startRedisServer()
    const redis = connect({ port: server.port })
    await ready(redis, server.url)
    const locker = makeLocker(redis)
    const resource = unique('scripts')
    const lock = await locker.acquire(resource)
    await lock.extend()
    // A waiter on another Locker queues in Redis, then gives up and leaves the queue.
    await expect(makeLocker(redis, { pollMs: 50 }).acquire(resource, { waitMs: 300 })).rejects.toBeInstanceOf(LockError)
    await lock.release()
    const shas = Object.values(LOCK_SCRIPTS).map((script) => createHash('sha1').update(script.lua).digest('hex'))
    expect(shas).toEqual(Object.values(LOCK_SCRIPTS).map((script) => script.sha))
    expect(shas).toHaveLength(29)
    // All but inspect (only inspect() runs it), markDone and readDone (only runOnce() runs them),
    // the read-write lock's (only readWrite() runs them), the quorum-only ones and the sharded
    // pub/sub ones (only on a Cluster: test/cluster-pubsub.test.ts).
    const quorumOnly = [
      'raiseFence',
      'recordLease',
      'readLeaseRecord',
      'markNode',
      'markedAcquire',
      'markedQueuedAcquire',
      'markedRaiseFence',
    ]
    const single = Object.entries(LOCK_SCRIPTS).filter(
      ([name]) =>
        ![...quorumOnly, 'inspect', 'markDone', 'readDone'].includes(name) &&
        !name.startsWith('rw') &&
        !name.startsWith('sharded'),
    )
    expect(await redis.script('EXISTS', ...single.map(([, script]) => script.sha))).toEqual([1, 1, 1, 1, 1, 1])
    expect(Object.isFrozen(LOCK_SCRIPTS)).toBe(true)
  })
})

describe('defaults', () => {
  it('are one frozen object with the documented values, and fill in what a Locker was not given', () => {
    expect(Object.isFrozen(LOCK_DEFAULTS)).toBe(true)
    expect(LOCK_DEFAULTS).toEqual({
      ttlMs: 30_000,
      waitMs: 10_000,
      prefix: 'fencelock:',
      commandTimeoutMs: 2_000,
      pollMs: 1_000,
      fenceTtlMs: 86_400_000,
      handoffMs: 500,
      replicas: 0,
      replicasTimeoutMs: 500,
      reentrant: true,
      pubsub: 'auto',
    })
    const { client } = recordingClient()
    // nodeRestartDelayMs (quorum mode) is automatic unless given: the lease records decide.
    expect(new Locker(client).options).toEqual({ ...LOCK_DEFAULTS, nodeRestartDelayMs: undefined })
    expect(new Locker(client, { ttlMs: 500, prefix: 'x:' }).options).toEqual({
      ...LOCK_DEFAULTS,
      ttlMs: 500,
      prefix: 'x:',
      nodeRestartDelayMs: undefined,
    })
    expect(MAX_DURATION_MS).toBe(24 * 3600 * 1000)
    expect(MAX_RESOURCE_BYTES).toBe(1024)
  })
})
