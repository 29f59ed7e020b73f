// In `npm test`; alone: `npm run test:orphans -w @fencelock/demo-shop` (it starts the whole live demo: ~5 s on a quiet machine, a minute at load 30).
// `npm run demo` killed outright (SIGKILL: no signal reaches the demo) must leave nothing behind:
// the demo sees itself re-parented and stops what it started — the live shop's instances, their
// payment gateway — as on SIGTERM. Without that watch (demo.ts with it removed, run once by hand
// in a copy) this test failed: 7 processes still alive 20 s after the kill. The parent here is a shell standing in for npm (`npm run demo`
// ends in `sh -c '... exec node demo.ts'`). Every process is watched by PID through /proc.
import { spawn } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { readdirSync, readFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import pg from 'pg'
import { afterAll, describe, expect, it } from 'vitest'

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..')
const databaseUrl = new URL(process.env.DATABASE_URL || 'postgresql://postgres@127.0.0.1:5432/test')
databaseUrl.searchParams.delete('schema')
const schema = `demo_orphans_${process.pid}_${randomBytes(3).toString('hex')}`

/** Parent pid of `pid` from /proc, or undefined when it has exited. */
function parentOf(pid: number): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
    // The command may hold spaces and parentheses: the fields after the last ')' are fixed.
    const state = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
    return state[0] === 'Z' ? undefined : Number(state[1])
  } catch {
    return undefined
  }
}

/** Every live descendant of `pid`. */
function descendants(pid: number): number[] {
  const children = new Map<number, number[]>()
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue
    const ppid = parentOf(Number(entry))
    if (ppid !== undefined) children.set(ppid, [...(children.get(ppid) ?? []), Number(entry)])
  }
  const found: number[] = []
  const walk = (p: number) => {
    for (const c of children.get(p) ?? []) {
      found.push(c)
      walk(c)
    }
  }
  walk(pid)
  return found
}

const alive = (pids: readonly number[]) => pids.filter((p) => parentOf(p) !== undefined)
let leftovers: number[] = []

afterAll(async () => {
  for (const pid of alive(leftovers)) process.kill(pid, 'SIGKILL')
  const client = new pg.Client({ connectionString: databaseUrl.toString() })
  await client.connect()
  await client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`).finally(() => client.end())
})

describe('npm run demo, its parent killed', () => {
  it('stops the demo, its instances and its gateway: no process left', async () => {
    const env = {
      ...process.env,
      DATABASE_URL: `${databaseUrl.toString()}${databaseUrl.search ? '&' : '?'}schema=${schema}`,
    }
    const parent = spawn(
      'sh',
      ['-c', `${JSON.stringify(process.execPath)} --import tsx apps/demo-shop/src/demo.ts --port 0 --shop-port 0 & wait`],
      {
        cwd: root,
        env,
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    )
    let log = ''
    parent.stderr?.on('data', (d: Buffer) => (log += d.toString()))
    await new Promise<void>((resolve, reject) => {
      parent.stdout?.on('data', (d: Buffer) => {
        log += d.toString()
        if (log.includes('Open the dashboard:')) resolve()
      })
      parent.once('exit', (code) => reject(new Error(`the demo exited (${code}) before serving:\n${log}`)))
    })
    const tree = descendants(parent.pid as number)
    leftovers = tree
    // demo.ts, 4 instances and the live shop's gateway at least.
    expect(tree.length, log).toBeGreaterThanOrEqual(6)
    process.kill(parent.pid as number, 'SIGKILL')
    await expect.poll(() => alive(tree), { timeout: 45_000, interval: 250 }).toEqual([])
  }, 120_000)
})
