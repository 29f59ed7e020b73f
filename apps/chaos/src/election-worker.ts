/**
 * One candidate process of the election runs (election.ts): its own ioredis connection, Locker
 * and PostgreSQL pool. Talks to its parent over IPC.
 *
 * ELECTION_MODE=lead: campaigns with `locker.lead(name)`; while leading it writes the leader row
 * every 100 ms with its term (`ELECTION_FENCED=1`: through the database's fence guard, the token in
 * `fencelock.token`; else an unfenced UPDATE, the control), and reports `elected`, `demoted` and
 * each write. On `{ cmd: 'write', fenced }` it writes once more with the last term it was elected
 * with, whatever it knows about its term now (a leader that woke with a write in flight), and
 * answers with the outcome.
 *
 * ELECTION_MODE=run-once: schedules `locker.runOnce()` on key ELECTION_NAME; the job records its
 * tick in `job_runs` through the fence with the tick's token. At the tick of `{ cmd: 'pause-at' }` the
 * job tells the parent (`in-job`) and waits for `{ cmd: 'go' }` before it writes (the parent
 * freezes the first such runner with SIGSTOP in between).
 *
 * On `{ cmd: 'stop' }` it stops, sends its grant records (hammer-check.ts's GrantRecord) and exits.
 */
import { SET_FENCE_TOKEN_SQL } from '@fencelock/fencing/pg'
import { Locker, type Leadership, type Schedule } from '@fencelock/lock'
import { Redis } from 'ioredis'
import pg from 'pg'
import type { GrantRecord } from './hammer-check.js'

const env = (name: string): string => {
  const value = process.env[name]
  if (value === undefined || value === '') throw new Error(`${name} is not set`)
  return value
}
const mode = env('ELECTION_MODE')
const name = env('ELECTION_NAME')
const processNo = Number(env('ELECTION_PROCESS'))
const ttlMs = Number(env('ELECTION_TTL_MS'))
const fenced = process.env.ELECTION_FENCED === '1'
const schema = env('ELECTION_SCHEMA')

export type WorkerMessage =
  | { type: 'elected'; process: number; term: string; mono: string }
  | { type: 'demoted'; process: number; term: string; reason: string; mono: string }
  | { type: 'wrote'; process: number; term: string; outcome: 'accepted' | 'refused'; fenced: boolean }
  | { type: 'in-job'; process: number; tick: number }
  | { type: 'tick'; process: number; tick: number; outcome: string; refused: boolean; token?: string }
  | { type: 'records'; process: number; records: GrantRecord[] }
  | { type: 'ready'; process: number }
  | { type: 'lease-lost'; process: number; resource: string }
  | { type: 'quiet'; process: number }

export type ParentMessage =
  | { cmd: 'write'; fenced: boolean }
  | { cmd: 'go' }
  | { cmd: 'stop' }
  | { cmd: 'pause-at'; tick: number }
  | { cmd: 'quiet' }

const send = (message: WorkerMessage): void => {
  process.send?.(message)
}
const mono = (): bigint => process.hrtime.bigint()

const redis = new Redis(env('ELECTION_REDIS_URL'), { maxRetriesPerRequest: 1 })
redis.on('error', () => {})
const pool = new pg.Pool({
  connectionString: env('ELECTION_DATABASE_URL'),
  max: 2,
  options: `-c search_path=${schema}`,
})
pool.on('error', () => {})
const locker = new Locker(redis, { ttlMs, pollMs: 100, commandTimeoutMs: 500 })

/** One write transaction; `refused` when the fence guard refused it (SQLSTATE FL001). */
async function transaction(token: bigint, viaFence: boolean, body: (c: pg.PoolClient) => Promise<unknown>) {
  const c = await pool.connect()
  let broken: unknown
  try {
    await c.query('BEGIN')
    if (viaFence) await c.query(SET_FENCE_TOKEN_SQL, [token.toString()])
    await body(c)
    await c.query('COMMIT')
    return 'accepted' as const
  } catch (error) {
    await c.query('ROLLBACK').catch((e: unknown) => (broken = e))
    if ((error as { code?: string }).code === 'FL001') return 'refused' as const
    throw error
  } finally {
    c.release(broken === undefined ? undefined : true)
  }
}

/** The leader's write: the row says who leads with which term; the log keeps every accepted write in row order. */
async function leaderWrite(term: bigint, viaFence: boolean): Promise<'accepted' | 'refused'> {
  const outcome = await transaction(term, viaFence, async (c) => {
    await c.query('UPDATE leader_state SET leader = $1, term = $2 WHERE id = 1', [processNo, term.toString()])
    await c.query('INSERT INTO leader_writes (term, process, fenced) VALUES ($1, $2, $3)', [
      term.toString(),
      processNo,
      viaFence,
    ])
  })
  send({ type: 'wrote', process: processNo, term: term.toString(), outcome, fenced: viaFence })
  return outcome
}

// Every lease this process lost (the parent tells a designed loss from a starved process's).
locker.listen((event) => {
  if (event.type === 'lost') send({ type: 'lease-lost', process: processNo, resource: event.resource })
})

// Connected to both stores before it says it is ready (a tick it schedules before is not counted).
await Promise.all([pool.query('SELECT 1'), redis.ping()])
send({ type: 'ready', process: processNo })

class FenceRefused extends Error {}

const records: GrantRecord[] = []
let lastTerm: bigint | undefined
let leadership: Leadership | undefined
let schedule: Schedule | undefined
let go: (() => void) | undefined

/**
 * `{ cmd: 'quiet' }`: the leader's own writes stop, and `quiet` is sent once none is in flight —
 * so that the parent can freeze it between two transactions (frozen inside one, it would hold the
 * row lock its successor's write waits for).
 */
let quiet = false
let writing: Promise<unknown> = Promise.resolve()

if (mode === 'lead') {
  let current: { term: bigint; grantedNs: number; validUntilNs: number } | undefined
  // The lease's validity, pushed on by every renewal: what the external checker holds it to.
  locker.listen((event) => {
    if (event.type === 'extended' && event.resource === name && current && leadership?.isLeader) {
      current.validUntilNs = Number(mono()) + leadership.remainingMs() * 1e6
    }
  })
  leadership = locker.lead(name, {
    onElected(term, signal) {
      const now = Number(mono())
      lastTerm = term
      // A new term writes: a `quiet` asked of an earlier term (then frozen) ends with it.
      quiet = false
      current = { term, grantedNs: now, validUntilNs: now + (leadership?.remainingMs() ?? 0) * 1e6 }
      send({ type: 'elected', process: processNo, term: term.toString(), mono: String(now) })
      void (async () => {
        while (!signal.aborted) {
          if (!quiet) {
            writing = leaderWrite(term, fenced).catch((error: unknown) => {
              if (process.env.ELECTION_DEBUG) console.error(error)
            })
            await writing
          }
          await new Promise((resolve) => setTimeout(resolve, 100))
        }
      })()
    },
    onDemoted(reason, term) {
      const now = Number(mono())
      if (current && current.term === term) {
        records.push({
          process: processNo,
          token: term.toString(),
          grantedNs: current.grantedNs,
          releasedNs: now,
          validUntilNs: current.validUntilNs,
        })
        current = undefined
      }
      send({ type: 'demoted', process: processNo, term: term.toString(), reason, mono: String(now) })
    },
  })
} else {
  let pauseTick = -1
  process.on('message', (message: ParentMessage) => {
    if (message.cmd === 'pause-at') pauseTick = message.tick
  })
  const everyMs = Number(env('ELECTION_EVERY_MS'))
  schedule = locker.runOnce(
    async ({ tick, token }) => {
      if (tick === pauseTick) {
        const told = new Promise<void>((resolve) => (go = resolve))
        send({ type: 'in-job', process: processNo, tick })
        await told
      }
      const outcome = await transaction(token, true, (c) =>
        c.query(
          `INSERT INTO job_runs (tick, process, runs) VALUES ($1, $2, 1)
           ON CONFLICT (tick) DO UPDATE SET process = EXCLUDED.process, runs = job_runs.runs + 1`,
          [tick, processNo],
        ),
      )
      if (outcome === 'refused') throw new FenceRefused(`tick ${tick}: the fence refused token ${token}`)
    },
    {
      key: name,
      everyMs,
      leaseMs: ttlMs,
      onTick: (r) =>
        send({
          type: 'tick',
          process: processNo,
          tick: r.tick,
          outcome: r.outcome,
          refused: r.error instanceof FenceRefused,
          ...(r.token === undefined ? {} : { token: r.token.toString() }),
        }),
    },
  )
}

process.on('message', (message: ParentMessage) => {
  if (message.cmd === 'go') go?.()
  else if (message.cmd === 'quiet') {
    quiet = true
    void writing.then(() => send({ type: 'quiet', process: processNo }))
  } else if (message.cmd === 'write') {
    if (lastTerm !== undefined) void leaderWrite(lastTerm, message.fenced).catch(() => {})
  } else if (message.cmd === 'stop') {
    void (async () => {
      await leadership?.stop()
      await schedule?.stop()
      await locker.close()
      await redis.quit().catch(() => {})
      await pool.end()
      send({ type: 'records', process: processNo, records })
      process.disconnect()
    })()
  }
})
