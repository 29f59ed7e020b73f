/**
 * `locker.semaphore()` beyond the contract (test/contract/family-contract.ts runs it on every
 * backend): 20 Lockers in 4 processes with 3 permits, counted by a redis-server of its own that
 * the lock never touches; the same workers without the semaphore; more permits than one round of
 * tries; bad input.
 */
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process'
import { dirname, join } from 'node:path'
import { createInterface } from 'node:readline'
import { fileURLToPath } from 'node:url'
import type { Redis } from 'ioredis'
import { beforeAll, describe, expect, it } from 'vitest'
import { InvalidLockOptionError, Locker, MAX_PERMITS } from '../../src/index.js'
import { connect, makeLocker, ready, unique } from '../support/connections.js'
import { waitUntil } from '../support/timing.js'
import { startRedisServer, type RedisServer } from '../support/redis-server.js'

const here = dirname(fileURLToPath(import.meta.url))
let lockServer: RedisServer
let counterServer: RedisServer
let counter: Redis
let client: Redis

beforeAll(async () => {
  ;[lockServer, counterServer] = await Promise.all([startRedisServer(), startRedisServer()])
  counter = connect({ port: counterServer.port })
  client = connect({ port: lockServer.port })
  await Promise.all([ready(counter, counterServer.url), ready(client, lockServer.url)])
})

/** A worker process (fixtures/semaphore-worker.ts), read line by line. */
function worker(name: string): { child: ChildProcessWithoutNullStreams; next: () => Promise<string> } {
  const child = spawn(
    process.execPath,
    [
      '--import',
      'tsx',
      join(here, '..', 'fixtures', 'semaphore-worker.ts'),
      lockServer.url,
      counterServer.url,
      name,
      '5',
      '3',
    ],
    { stdio: ['pipe', 'pipe', 'pipe'] },
  )
  let errors = ''
  child.stderr.on('data', (chunk: Buffer) => (errors += chunk.toString()))
  const lines = createInterface({ input: child.stdout })[Symbol.asyncIterator]()
  const next = async () => {
    const line = await lines.next()
    if (line.done) throw new Error(`worker ended: ${errors}`)
    return line.value
  }
  return { child, next }
}

describe('a semaphore with 3 permits', () => {
  it('20 Lockers in 4 processes: the counter they share never sees more than 3 holders (and sees 3); without the semaphore it sees more', async () => {
    const name = unique('sem-procs')
    const workers = Array.from({ length: 4 }, () => worker(name))
    try {
      for (const w of workers) expect(await w.next()).toBe('ready')
      for (const phase of ['semaphore', 'none']) {
        for (const w of workers) w.child.stdin.write(`${phase}\n`)
        for (const w of workers) expect(await w.next()).toBe(`done ${phase}`)
      }
      for (const w of workers) w.child.stdin.write('quit\n')
      await Promise.all(workers.map((w) => new Promise((resolve) => w.child.once('exit', resolve))))
    } finally {
      for (const w of workers) w.child.kill('SIGKILL')
    }
    expect(Number(await counter.get(`${name}:semaphore:most`))).toBe(3)
    expect(Number(await counter.get(`${name}:semaphore`))).toBe(0)
    // The control: the same 20 workers with nothing in the way.
    expect(Number(await counter.get(`${name}:none:most`))).toBeGreaterThan(3)
  }, 60_000)

  it('more permits than one round of tries (10): all usable at once, one each; when all are held, the first released goes to the waiter', async () => {
    const locker = makeLocker(client)
    const semaphore = locker.semaphore(unique('sem-ten'), { permits: 10 })
    const permits = await Promise.all(Array.from({ length: 10 }, () => semaphore.acquire({ waitMs: 10_000 })))
    expect(new Set(permits.map((p) => p.resource)).size).toBe(10)
    expect(await semaphore.tryAcquire()).toBeNull()
    expect(await semaphore.inspect()).toMatchObject({ permits: 10, held: 10 })
    // All held: a waiter tries them all (in rounds), then waits on all; the one released comes to it.
    const waiting = semaphore.acquire({ waitMs: 10_000 })
    await waitUntil(async () => (await semaphore.inspect()).waiting === 1, { what: 'the waiter at the head' })
    const freed = permits[6]!
    await freed.release()
    const next = await waiting
    expect(next.resource).toBe(freed.resource)
    expect(next.token).toBeGreaterThan(freed.token)
    await Promise.all([next, ...permits].map((p) => p.release()))
    expect(await semaphore.inspect()).toMatchObject({ held: 0 })
  })
})

describe('semaphore: bad input is refused before any I/O, naming the field and the rule', () => {
  // A client that is never connected: any I/O would hang, not throw.
  const offline = () => new Locker(connect({ port: 1 }, { lazyConnect: true, enableOfflineQueue: false }))

  it.each([
    ['a missing options object', [unique('s')], 'options', /required/],
    ['permits missing', [unique('s'), {}], 'permits', /required/],
    ['permits 0', [unique('s'), { permits: 0 }], 'permits', /integer from 1 to 64/],
    ['permits 1.5', [unique('s'), { permits: 1.5 }], 'permits', /integer/],
    ['permits "3"', [unique('s'), { permits: '3' }], 'permits', /integer/],
    ['too many permits', [unique('s'), { permits: MAX_PERMITS + 1 }], 'permits', /from 1 to 64/],
    ['an unknown option', [unique('s'), { permits: 3, ttl: 5 }], 'options.ttl', /not an option of semaphore\(\)/],
    ['an empty name', ['', { permits: 3 }], 'name', /not be empty/],
    ['a name that is not a string', [42, { permits: 3 }], 'name', /string/],
    ['a name too long for its permits', ['x'.repeat(1_020), { permits: 3 }], 'name', /at most 1015 bytes/],
  ])('%s', (_, args, field, rule) => {
    const locker = offline()
    const call = () => (locker.semaphore as (...a: unknown[]) => unknown)(...(args as unknown[]))
    expect(call).toThrow(InvalidLockOptionError)
    try {
      call()
    } catch (error) {
      expect(error).toMatchObject({ field })
      expect((error as InvalidLockOptionError).rule).toMatch(rule)
    }
  })

  it('the calls check their options as a lock acquire does', async () => {
    const semaphore = offline().semaphore(unique('s'), { permits: 2 })
    await expect(semaphore.acquire({ waitMs: -1 })).rejects.toMatchObject({ field: 'waitMs' })
    await expect(semaphore.acquire({ wait: 5 } as never)).rejects.toMatchObject({ field: 'options.wait' })
    await expect(semaphore.tryAcquire({ waitMs: 5 } as never)).rejects.toMatchObject({ field: 'options.waitMs' })
    await expect(semaphore.using('nope' as never)).rejects.toMatchObject({ field: 'fn' })
    expect(() => new Locker(client, { prefix: 'p'.repeat(254) }).semaphore('s', { permits: 1 })).toThrow(
      /prefix: must be at most 252 characters/,
    )
  })
})
