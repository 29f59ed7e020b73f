/**
 * A semaphore whose permit holder is busy (issue 33 item 4): a holder doing 3 s of synchronous
 * work right after acquire() kept a free permit from the next waiter for those 3 s (5 of 7 runs):
 * the hand-on of the semaphore's queue lock needed a second round trip from the holder's event
 * loop. The waiter must get the free permit while the holder is still busy: an ordering fact
 * (its "acquired" before the holder's "busy-done"), 3 rounds, real processes.
 */
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process'
import { dirname, join } from 'node:path'
import { createInterface } from 'node:readline'
import { fileURLToPath } from 'node:url'
import { afterAll, beforeAll, expect, it } from 'vitest'
import type { Lock } from '../../src/index.js'
import { connect, makeLocker, ready, unique } from '../support/connections.js'
import { startRedisServer, type RedisServer } from '../support/redis-server.js'
import { waitUntil } from '../support/timing.js'

const here = dirname(fileURLToPath(import.meta.url))
let server: RedisServer
const children: ChildProcessWithoutNullStreams[] = []
beforeAll(async () => {
  server = await startRedisServer()
  await ready(connect({ port: server.port }), server.url)
})
afterAll(() => {
  for (const child of children) child.kill('SIGKILL')
})

/**
 * A permit-worker process, once connected (it waits for `go()` before it asks for a permit); `seen`
 * gets each line it prints, in the order the processes' lines arrive.
 */
function worker(
  name: string,
  busyMs: number,
  label: string,
  seen: string[],
  library: 'ioredis' | 'node-redis' | 'glide',
): Promise<{ go(): void; exited: Promise<unknown> }> {
  const child = spawn(
    process.execPath,
    ['--import', 'tsx', join(here, '..', 'fixtures', 'permit-worker.ts'), server.url, name, '2', `${busyMs}`, library],
    { stdio: ['pipe', 'pipe', 'pipe'] },
  )
  children.push(child)
  let errors = ''
  child.stderr.on('data', (chunk: Buffer) => (errors += chunk.toString()))
  const exited = new Promise((resolve) => child.once('exit', resolve))
  return new Promise((resolve, reject) => {
    child.once('exit', (code) => {
      if (code !== 0) reject(new Error(`${label} exited ${code}: ${errors}`))
    })
    createInterface({ input: child.stdout }).on('line', (line) => {
      if (line === 'ready') resolve({ go: () => child.stdin.write('go\n'), exited })
      else seen.push(`${label} ${line}`)
    })
  })
}

it.each(['ioredis', 'node-redis', 'glide'] as const)(
  '%s: a holder busy for 3 s right after acquire() does not keep the free permit from the next waiter (3 rounds)',
  async (library) => {
    const locker = makeLocker(connect({ port: server.port }))
    for (let round = 0; round < 3; round++) {
      const name = unique('busy-holder')
      const semaphore = locker.semaphore(name, { permits: 2 })
      // Both permits held here: the holder waits for one holding the queue lock, the waiter queues behind it.
      const held: Lock[] = [await semaphore.acquire(), await semaphore.acquire()]
      const seen: string[] = []
      // Both processes start together (a start is most of a round's time on a loaded machine),
      // then queue in turn: the holder first.
      const [holder, waiter] = await Promise.all([
        worker(name, 3_000, 'holder', seen, library),
        worker(name, 0, 'waiter', seen, library),
      ])
      holder.go()
      await waitUntil(async () => (await semaphore.inspect()).waiting === 1, {
        what: `round ${round}: the holder to wait`,
        timeoutMs: 30_000,
        everyMs: 50,
      })
      waiter.go()
      await waitUntil(async () => (await semaphore.inspect()).waiting === 2, {
        what: `round ${round}: the waiter to queue`,
        everyMs: 50,
        timeoutMs: 30_000,
      })
      await held[0]!.release() // the holder gets it, then works 3 s without yielding
      await waitUntil(() => seen.includes('holder acquired'), { what: 'the holder to acquire', timeoutMs: 10_000 })
      await held[1]!.release() // free: the waiter must get it while the holder is busy
      await waitUntil(() => seen.includes('holder busy-done') && seen.includes('waiter acquired'), {
        what: 'both',
        timeoutMs: 15_000,
      })
      expect(seen.indexOf('waiter acquired'), `round ${round}: ${seen.join(', ')}`).toBeLessThan(
        seen.indexOf('holder busy-done'),
      )
      await Promise.all([holder.exited, waiter.exited])
    }
  },
  240_000,
)
