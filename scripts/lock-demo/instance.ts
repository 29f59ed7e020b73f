// One contender of the terminal demo, run as its own process so that SIGSTOP really stops it
// (its event loop, its watchdog, everything), as a GC pause or a frozen VM would.
import { Redis } from 'ioredis'
import { Locker, type Lock } from '@fencelock/lock'

type Command = { do: 'acquire'; resource: string; ttlMs: number } | { do: 'write'; value: string } | { do: 'release' } | { do: 'exit' }

const name = process.argv[2] ?? 'instance'
const redis = new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379', { lazyConnect: false, maxRetriesPerRequest: 1 })
const locker = new Locker(redis, {
  onEvent: (e) => {
    if (e.type === 'lost') send({ event: 'lost', reason: e.reason, token: String(e.token) })
  },
})
let lock: Lock | undefined

function send(message: Record<string, unknown>): void {
  process.send?.({ from: name, ...message })
}

process.on('message', (raw: unknown) => {
  void handle(raw as Command).catch((error: unknown) => send({ event: 'error', message: String(error) }))
})

async function handle(command: Command): Promise<void> {
  if (command.do === 'acquire') {
    lock = await locker.acquire(command.resource, { ttlMs: command.ttlMs, waitMs: 10_000, autoExtend: true })
    lock.signal.addEventListener('abort', () => send({ event: 'signal', reason: (lock?.signal.reason as Error).name }))
    send({ event: 'acquired', token: String(lock.token) })
  } else if (command.do === 'write') {
    // The write goes out whether or not the lock is still ours: the code has no way to know
    // between its last check and the write. That is what fencing is for.
    send({ event: 'write', value: command.value, token: String(lock?.token ?? 0n), heldLocally: lock?.isHeld() ?? false })
  } else if (command.do === 'release') {
    const released = await lock?.release()
    send({ event: 'released', released })
  } else {
    await locker.close()
    redis.disconnect()
    process.exit(0)
  }
}

send({ event: 'ready' })
