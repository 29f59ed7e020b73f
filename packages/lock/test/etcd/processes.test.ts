/**
 * Two processes contend for one lock on etcd, each with its own client and Locker, doing a
 * read-modify-write of a counter under it; the checker is Redis, outside both (fixtures/contender.ts).
 * Under the lock: no overlap, no lost update. The same processes without it (the unprotected
 * control) overlap.
 */
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process'
import { dirname, join } from 'node:path'
import { createInterface } from 'node:readline'
import { fileURLToPath } from 'node:url'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { connectShared, SHARED_REDIS_URL, unique } from '../support/connections.js'
import { startEtcdServer, type EtcdMember } from './etcd-support.js'

const here = dirname(fileURLToPath(import.meta.url))
let member: EtcdMember
const children: ChildProcessWithoutNullStreams[] = []
beforeAll(async () => {
  member = await startEtcdServer()
})
afterAll(() => {
  for (const child of children) child.kill('SIGKILL')
})

/** Starts the contenders, lets them go together once both are ready, and waits for both to finish. */
async function contend(mode: 'lock' | 'none', rounds: number): Promise<string> {
  const prefix = `${unique('fl-test-etcd-contend')}:`
  const resource = unique('e-contend')
  const started = [0, 1].map(() => {
    const child = spawn(
      process.execPath,
      [
        '--import',
        'tsx',
        join(here, 'fixtures', 'contender.ts'),
        member.endpoint,
        resource,
        SHARED_REDIS_URL,
        prefix,
        String(rounds),
        mode,
      ],
      { stdio: ['pipe', 'pipe', 'pipe'] },
    )
    children.push(child)
    let stderr = ''
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()))
    const lines = createInterface({ input: child.stdout })
    const said = (word: string) =>
      new Promise<void>((resolve, reject) => {
        lines.on('line', (line) => {
          if (line === word) resolve()
        })
        child.once('exit', (code) => reject(new Error(`contender exited (${code}) before "${word}":\n${stderr}`)))
      })
    return { child, ready: said('ready'), done: said('done') }
  })
  await Promise.all(started.map((s) => s.ready))
  for (const s of started) s.child.stdin.write('go\n')
  await Promise.all(started.map((s) => s.done))
  return prefix
}

describe('two processes on etcd', () => {
  it('under the lock: 0 overlaps and no lost update, counted in Redis; without it the same processes overlap', async () => {
    const redis = await connectShared()
    const locked = await contend('lock', 40)
    expect(Number(await redis.get(`${locked}overlaps`))).toBe(0)
    expect(Number(await redis.get(`${locked}counter`))).toBe(80)
    const bare = await contend('none', 400)
    expect(Number(await redis.get(`${bare}overlaps`))).toBeGreaterThan(0)
    await redis.del(...[locked, bare].flatMap((p) => [`${p}overlaps`, `${p}counter`, `${p}inside`]))
  }, 120_000)
})
