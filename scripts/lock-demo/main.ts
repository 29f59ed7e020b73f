// `npm run demo:lock`: two processes contend for one lock; the holder is paused (SIGSTOP) past
// its TTL, the other takes the lock with a larger fencing token, the first wakes up, still
// believes for a moment that it holds the lock, and writes. A store that checks tokens rejects
// that stale write; one that does not, takes it.
import { fork, type ChildProcess } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { EXIT_CODES, runCommand, type CliSpec } from '@fencelock/devkit/cli'
import { resolveRedis } from '@fencelock/devkit/redis-endpoint'

const CLI: CliSpec = {
  command: 'npm run demo:lock --',
  summary:
    'Two processes contend for one lock; the holder is frozen (SIGSTOP) past its TTL, the other takes the lock with a larger fencing token, and the first wakes up and writes: once to a store that ignores tokens, once to one that checks them.',
  flags: {},
  notes: 'REDIS_URL, else 127.0.0.1:6379 when it answers, else a redis-server it spawns.',
  failure: 'the checking store took the stale write, or the demo broke off with an error',
}

const TTL_MS = 1_500
const resource = `order:42:demo:${process.pid}`

type Message = { from: string; event: string; [key: string]: unknown }
const children: ChildProcess[] = []
const inbox: Message[] = []
const waiters: Array<() => void> = []

function start(name: string): ChildProcess {
  const child = fork(fileURLToPath(new URL('./instance.ts', import.meta.url)), [name], {
    execArgv: ['--import', 'tsx'],
    env: { ...process.env, REDIS_URL: url },
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  })
  child.on('message', (m) => {
    inbox.push(m as Message)
    for (const w of waiters.splice(0)) w()
  })
  children.push(child)
  return child
}

async function next(from: string, event: string, timeoutMs = 15_000): Promise<Message> {
  const deadline = performance.now() + timeoutMs
  for (;;) {
    const i = inbox.findIndex((m) => m.from === from && m.event === event)
    if (i >= 0) return inbox.splice(i, 1)[0] as Message
    if (performance.now() > deadline) throw new Error(`no "${event}" from ${from} within ${timeoutMs} ms`)
    await new Promise<void>((r) => {
      waiters.push(r)
      setTimeout(r, 100)
    })
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))
const step = (text: string) => console.log(`\n▸ ${text}`)

// The storage: a row with a stored fence token. `fenced` rejects a token below the stored one.
const row = { value: 'unpaid', fenceToken: 0n }
function write(value: string, token: bigint, fenced: boolean): string {
  if (fenced && token < row.fenceToken) return `REJECTED (token ${token} < stored ${row.fenceToken})`
  row.value = value
  if (token > row.fenceToken) row.fenceToken = token
  return `accepted → row = "${value}"`
}

/** Runs one scenario; true when the row ends with the newer holder's write. */
async function scenario(fenced: boolean): Promise<boolean> {
  console.log(`\n━━ ${fenced ? 'Lock + fencing token checked by the store' : 'Lock alone (the store ignores tokens)'} ━━`)
  row.value = 'unpaid'
  row.fenceToken = 0n
  const a = start('A')
  const b = start('B')
  await next('A', 'ready')
  await next('B', 'ready')

  step(`A acquires "${resource}" (ttl ${TTL_MS} ms, watchdog renews every ${TTL_MS / 3} ms)`)
  a.send({ do: 'acquire', resource: `${resource}:${fenced}`, ttlMs: TTL_MS })
  const tokenA = BigInt((await next('A', 'acquired')).token as string)
  console.log(`  A holds it, token ${tokenA}`)

  step('B asks for the same lock and waits (pub/sub, no polling)')
  b.send({ do: 'acquire', resource: `${resource}:${fenced}`, ttlMs: TTL_MS })
  await sleep(300)

  step(`A is frozen with SIGSTOP for ${2 * TTL_MS} ms: a GC pause, a VM migration — its watchdog freezes too`)
  a.kill('SIGSTOP')
  const tokenB = BigInt((await next('B', 'acquired')).token as string)
  console.log(`  the lease ran out in Redis; B got the lock with token ${tokenB} (> ${tokenA}: ${tokenB > tokenA})`)
  console.log(`  B writes: ${write('paid by B', tokenB, fenced)}`)
  await sleep(2 * TTL_MS - 300)

  step('A wakes up (SIGCONT) and, in the same breath, writes what it computed before the pause')
  a.kill('SIGCONT')
  a.send({ do: 'write', value: 'paid by A' })
  const w = await next('A', 'write')
  console.log(`  A writes with token ${tokenA}: ${write(String(w.value), tokenA, fenced)}`)
  const lost = await next('A', 'lost')
  console.log(`  A's watchdog then finds out: lock lost (${String(lost.reason)}); lock.signal aborted with ${String((await next('A', 'signal')).reason)}`)

  b.send({ do: 'release' })
  await next('B', 'released')
  a.send({ do: 'exit' })
  b.send({ do: 'exit' })
  const correct = row.value === 'paid by B'
  console.log(`\n  final row: "${row.value}" → ${correct ? 'correct: the stale write was stopped' : 'WRONG: a stale holder overwrote the newer one'}`)
  return correct
}

const killChildren = () => {
  for (const c of children) if (c.exitCode === null) c.kill('SIGKILL')
}

let url = ''
await runCommand(CLI, process.argv.slice(2), async () => {
  const redis = await resolveRedis()
  url = redis.url
  console.log(`Redis: ${redis.origin}\n`)
  process.on('SIGINT', () => {
    killChildren()
    process.exit(EXIT_CODES.interrupted) // a redis-server spawned for the demo is killed on exit (the devkit's exit hook)
  })
  try {
    await scenario(false)
    const fencedHeld = await scenario(true)
    console.log('\nThe lock keeps contenders out most of the time; only the fencing token makes the store safe.')
    return fencedHeld ? EXIT_CODES.ok : EXIT_CODES.failed
  } finally {
    await sleep(200)
    killChildren()
    await redis.stop()
  }
})
