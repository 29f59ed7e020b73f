/**
 * Write coalescing for ioredis and iovalkey (their `Redis` client; not a `Cluster`): the Locker's
 * acquires and releases sent on one connection in one tick of the event loop go out in a few
 * socket writes instead of one each.
 *
 * ioredis writes every command to its socket as it is sent, one `write` system call each; on
 * loopback that call also runs the server side of TCP, and it was most of the client's CPU per
 * lock operation (docs/BENCHMARKS.md). node-redis already writes a tick's commands together (GLIDE
 * is batched by glide-batching.ts); ioredis does only with `enableAutoPipelining`, a setting of
 * the user's client that the Locker does not change.
 *
 * So, for the scripts marked `batched` — the acquires' tries, and the release of a lock nobody
 * waits for (its hand-on to a waiter is another script): the first command of a tick is written
 * at once (a lone acquire or release loses nothing: no added latency, and the server starts on it
 * at once); further ones in the same tick are held in the socket (`cork`) and written together
 * every {@link COALESCE_BATCH} commands and at the end of the tick (`uncork` on the next
 * `process.nextTick`, after the microtasks that sent them). Every other command of the Locker (a
 * hand-on, a renewal, a clean-up: others may be waiting for it) writes what is held and itself at
 * once ({@link writeNow}). A command of the user's sent on the client while commands are held is
 * written with them.
 * The batch is bounded so that the server works on the first commands while the client still
 * prepares the rest: a whole tick in one write left the two taking turns and lost throughput.
 * Only what is written, and when within the tick, changes: each command, its reply and its
 * promise are ioredis's as before, and ioredis's reconnection (its offline queue, the commands it
 * sends again) sees the same commands.
 */

/** The part of a Node.js socket used here. */
interface Corkable {
  cork(): void
  uncork(): void
}

/**
 * How many commands at most are held before they are written. Chosen by a one-off in-process
 * sweep while this was built (50 workers on one connection, acquire + release, one run each, not
 * a bench row): 1 (no coalescing) 36k ops/s, 4 59k, 8 and 16 54–70k, a whole tick (~50) 36k.
 */
export const COALESCE_BATCH = 16

/**
 * On each socket, in the current tick: how many commands are held (0: one was written at once
 * and the socket is not corked). Absent: no command of ours went out on it in this tick. Shared
 * by every Locker on the client, so theirs are written together too. (A property of the socket,
 * not a WeakMap: it is read on every command.)
 */
const HELD = Symbol('fencelock.held')
type Tracked = Corkable & { [HELD]?: number | undefined }

/** The sockets written to in this tick, ended together by one `process.nextTick`. */
let touched: Tracked[] = []

function endOfTick(): void {
  const sockets = touched
  touched = []
  for (const socket of sockets) {
    const n = socket[HELD]
    socket[HELD] = undefined
    if (n !== undefined && n > 0) socket.uncork()
  }
}

/** The client's socket, if it is ready and of Node's kind. */
function socketOf(client: { readonly status: string }): Tracked | undefined {
  if (client.status !== 'ready') return undefined
  const stream = (client as { stream?: Partial<Corkable> }).stream
  if (stream == null || typeof stream.cork !== 'function' || typeof stream.uncork !== 'function') return undefined
  return stream as Tracked
}

/**
 * Called just before a batched command (an acquire's try, a release) is sent on `client` (an ioredis or
 * iovalkey `Redis`): arranges for it to be written with the tick's others. Does nothing while
 * the client is not ready (its commands then wait in ioredis's offline queue) or when it has no
 * socket of Node's kind.
 */
export function coalesceNextWrite(client: { readonly status: string }): void {
  const socket = socketOf(client)
  if (socket === undefined) return
  const n = socket[HELD]
  if (n === undefined) {
    // The tick's first: written at once.
    socket[HELD] = 0
    if (touched.push(socket) === 1) process.nextTick(endOfTick)
  } else if (n === 0) {
    socket[HELD] = 1
    socket.cork()
  } else if (n < COALESCE_BATCH) {
    socket[HELD] = n + 1
  } else {
    // Write the batch held so far, and hold this one with the next.
    socket.uncork()
    socket.cork()
    socket[HELD] = 1
  }
}

/**
 * Called just after any other command of the Locker was sent on `client` (a hand-on, a renewal):
 * what is held in its socket is written now, this command with it (one write) — it must not
 * wait for the rest of the tick, where the caller's own synchronous work may come (a semaphore's
 * holder busy right after `acquire()` returned would otherwise keep the queue's hand-on from the
 * next waiter). Later batched commands of the tick are held again.
 */
export function writeNow(client: { readonly status: string }): void {
  const socket = socketOf(client)
  if (socket === undefined) return
  const n = socket[HELD]
  if (n === undefined || n === 0) return
  socket[HELD] = 0
  socket.uncork()
}
