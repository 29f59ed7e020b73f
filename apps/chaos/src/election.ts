/**
 * Leader election and run-once jobs under real processes (issue 23): three candidate processes
 * (election-worker.ts), each its own Locker and connections, over a redis-server of their own
 * and a PostgreSQL schema of their own whose rows are guarded by the fencing package's database
 * guard (fenceGuardSql). The parent freezes processes with SIGSTOP; the checkers read what the
 * processes recorded on the machine's monotonic clock and what the database accepted.
 */
import { fork, type ChildProcess } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { fileURLToPath } from 'node:url'
import { connectDatabase, databaseTarget } from '@fencelock/devkit/database-url'
import { startRedisServer, type RedisServer } from '@fencelock/devkit/redis-server'
import { fenceGuardSql } from '@fencelock/fencing'
import pg from 'pg'
import { checkGrants, type GrantRecord, type HammerCheck } from './hammer-check.js'
import type { ParentMessage, WorkerMessage } from './election-worker.js'

const WORKER = fileURLToPath(new URL('./election-worker.ts', import.meta.url))

/** Options of {@link startElection}. */
export interface ElectionOptions {
  /** `lead`: the processes campaign with `locker.lead()`; `run-once`: they schedule `locker.runOnce()`. */
  readonly mode: 'lead' | 'run-once'
  /** Lead mode: the leader's writes go through the fence (true) or not (the control). Default true. */
  readonly fenced?: boolean
  /** The lease (`lead`'s ttlMs, `runOnce`'s leaseMs), ms. */
  readonly ttlMs: number
  /** run-once: the tick, ms. */
  readonly everyMs?: number
  /** Candidate processes. Default 3. */
  readonly processes?: number
}

/** A running election: its processes, what they said, the database. */
export interface Election {
  readonly processes: readonly ChildProcess[]
  readonly messages: readonly (WorkerMessage & { at: number })[]
  readonly db: pg.Client
  /** Resolves with the first message (already received or to come) that `match` accepts. */
  waitFor(match: (m: WorkerMessage) => boolean, what: string, timeoutMs?: number): Promise<WorkerMessage>
  send(i: number, message: ParentMessage): void
  /** SIGSTOP / SIGCONT of process i (a pid this run started). */
  freeze(i: number): void
  thaw(i: number): void
  /**
   * Stops every process (each resigns, closes and reports), reads what the database accepted,
   * then drops the schema and the redis-server.
   */
  stop(): Promise<ElectionEnd>
}

/** What a run left: the leaders' grants as recorded, and what the database accepted. */
export interface ElectionEnd {
  readonly records: GrantRecord[]
  readonly writes: WriteOrderCheck
  /** `job_runs`: one row per tick some runner wrote, with how many runs wrote it. */
  readonly jobRuns: readonly { tick: number; runs: number; process: number }[]
}

/** Starts the redis-server, the schema with its guarded tables, and the processes. */
export async function startElection(options: ElectionOptions): Promise<Election> {
  const n = options.processes ?? 3
  const run = randomBytes(4).toString('hex')
  const schema = `chaos_election_${run}`
  const { connectionString } = databaseTarget()
  const db = new pg.Client({ connectionString })
  await connectDatabase(db, connectionString)
  let server: RedisServer | undefined
  const children: ChildProcess[] = []
  const messages: (WorkerMessage & { at: number })[] = []
  const waiters = new Set<() => void>()
  try {
    await db.query(`CREATE SCHEMA ${schema}`)
    await db.query(`SET search_path = ${schema}`)
    await db.query(`CREATE TABLE leader_state (id INT PRIMARY KEY, leader INT, term BIGINT, fence BIGINT NOT NULL DEFAULT 0);
      INSERT INTO leader_state (id) VALUES (1);
      CREATE TABLE leader_writes (seq BIGSERIAL PRIMARY KEY, term BIGINT NOT NULL, process INT NOT NULL, fenced BOOLEAN NOT NULL);
      CREATE TABLE job_runs (tick BIGINT PRIMARY KEY, process INT NOT NULL, runs INT NOT NULL, fence BIGINT NOT NULL DEFAULT 0);`)
    await db.query(fenceGuardSql({ table: 'leader_state', column: 'fence', key: 'id', schema }))
    await db.query(fenceGuardSql({ table: 'job_runs', column: 'fence', key: 'tick', schema }))
    server = await startRedisServer()
    const name = `election-${run}`
    for (let i = 0; i < n; i++) {
      const child = fork(WORKER, [], {
        execArgv: ['--import', 'tsx'],
        stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
        env: {
          ...process.env,
          ELECTION_MODE: options.mode,
          ELECTION_NAME: name,
          ELECTION_PROCESS: String(i),
          ELECTION_TTL_MS: String(options.ttlMs),
          ELECTION_FENCED: options.fenced === false ? '0' : '1',
          ELECTION_SCHEMA: schema,
          ELECTION_REDIS_URL: server.url,
          ELECTION_DATABASE_URL: connectionString,
          ELECTION_EVERY_MS: String(options.everyMs ?? 1_000),
        },
      })
      child.on('message', (m: WorkerMessage) => {
        messages.push({ ...m, at: performance.now() })
        for (const w of [...waiters]) w()
      })
      children.push(child)
    }
  } catch (error) {
    for (const c of children) c.kill('SIGKILL')
    await server?.dispose()
    await db.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`).catch(() => {})
    await db.end()
    throw error
  }
  const redisServer = server
  return {
    processes: children,
    messages,
    db,
    waitFor(match, what, timeoutMs = 15_000) {
      return new Promise((resolve, reject) => {
        const check = (): boolean => {
          const found = messages.find(match)
          if (!found) return false
          waiters.delete(check)
          clearTimeout(timer)
          resolve(found)
          return true
        }
        const timer = setTimeout(() => {
          waiters.delete(check)
          const seen = messages
            .filter((m) => m.type !== 'wrote' || m.outcome === 'refused')
            .map((m) => JSON.stringify(m))
          reject(new Error(`${what}: not within ${timeoutMs} ms; messages: ${seen.slice(-12).join(' ')}`))
        }, timeoutMs)
        if (!check()) waiters.add(check)
      })
    },
    send(i, message) {
      children[i]!.send(message)
    },
    freeze(i) {
      children[i]!.kill('SIGSTOP')
    },
    thaw(i) {
      children[i]!.kill('SIGCONT')
    },
    async stop() {
      const records: GrantRecord[] = []
      try {
        await Promise.all(
          children.map(
            (child, i) =>
              new Promise<void>((resolve, reject) => {
                const timer = setTimeout(() => {
                  child.kill('SIGKILL')
                  reject(new Error(`election process ${i} did not stop within 60 s`))
                }, 60_000)
                child.once('exit', () => {
                  clearTimeout(timer)
                  resolve()
                })
                child.kill('SIGCONT')
                child.send({ cmd: 'stop' } satisfies ParentMessage)
              }),
          ),
        )
        for (const m of messages) if (m.type === 'records') records.push(...m.records)
        const writes = await checkWriteOrder(db)
        const { rows } = await db.query<{ tick: string; runs: number; process: number }>(
          'SELECT tick, runs, process FROM job_runs ORDER BY tick',
        )
        return {
          records,
          writes,
          jobRuns: rows.map((r) => ({ tick: Number(r.tick), runs: r.runs, process: r.process })),
        }
      } finally {
        await redisServer.dispose()
        await db.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`).catch(() => {})
        await db.end()
      }
    },
  }
}

/**
 * Freezes (SIGSTOP) a leader that is writing: one with an accepted write of a term above `after`,
 * still leading once it is quiet — between two of its writes: frozen inside a transaction it would
 * hold the row lock its successor's write waits for, and a pause would test the database's lock
 * queue, not the fence. On a busy machine a short lease can be lost before the parent gets to the
 * leader (its term then writes no more): such a leader is passed over, not frozen, and the next
 * term is waited for.
 */
export async function freezeWritingLeader(
  election: Election,
  after: bigint,
): Promise<{ process: number; term: string }> {
  let last = after
  for (;;) {
    const wrote = await election.waitFor(
      (m) => m.type === 'wrote' && m.outcome === 'accepted' && BigInt(m.term) > last,
      'a write of a leader',
      60_000,
    )
    if (wrote.type !== 'wrote') continue
    last = BigInt(wrote.term)
    const demoted = (): boolean => election.messages.some((m) => m.type === 'demoted' && m.term === wrote.term)
    if (demoted()) continue
    const asked = election.messages.length
    election.send(wrote.process, { cmd: 'quiet' })
    await election.waitFor(
      (m) => election.messages.indexOf(m as never) >= asked && m.type === 'quiet' && m.process === wrote.process,
      'the leader quiet',
    )
    if (demoted()) continue
    election.freeze(wrote.process)
    return { process: wrote.process, term: wrote.term }
  }
}

/** What the database accepted from the leaders, in the row's commit order. */
export interface WriteOrderCheck {
  readonly accepted: number
  /** Accepted writes whose term is below one accepted before them: a deposed leader overwrote its successor. */
  readonly outOfOrder: number
  readonly fencedOutOfOrder: number
}

/** Reads `leader_writes` in commit order (its sequence is drawn under the row's lock) and checks the terms. */
export async function checkWriteOrder(db: pg.Client): Promise<WriteOrderCheck> {
  const { rows } = await db.query<{ term: string; fenced: boolean }>(
    'SELECT term, fenced FROM leader_writes ORDER BY seq',
  )
  let highest = -1n
  let outOfOrder = 0
  let fencedOutOfOrder = 0
  for (const row of rows) {
    const term = BigInt(row.term)
    if (term < highest) {
      outOfOrder++
      if (row.fenced) fencedOutOfOrder++
    }
    if (term > highest) highest = term
  }
  return { accepted: rows.length, outOfOrder, fencedOutOfOrder }
}

/** The chaos scenario's result (one mode). */
export interface ElectionChaosResult {
  readonly fenced: boolean
  readonly pauses: number
  /** Pauses that froze the leader inside its transaction (its successor could not write until it woke). */
  readonly blocked: number
  readonly elections: number
  /** Leaders' valid leases, from the outside: never two at once. */
  readonly leases: HammerCheck
  /** Leaders as they believed (until told they were demoted): overlaps while one was frozen. */
  readonly believed: HammerCheck
  readonly writes: WriteOrderCheck
  readonly refused: number
  readonly seconds: number
}

/**
 * The election chaos scenario: 3 candidates; the current leader is frozen (SIGSTOP) for 1-3 × TTL,
 * `pauses` times; each time it wakes with a write in flight (the parent asks it to write once with
 * the term it was elected with, as a leader paused between deciding and writing would). The
 * leaders write their term to one row the whole time. Fenced, the database accepts no write of a
 * deposed leader after its successor's; unfenced (the control), it does.
 */
export async function runElectionChaos(options: {
  fenced: boolean
  pauses: number
  ttlMs?: number
}): Promise<ElectionChaosResult> {
  const began = performance.now()
  const ttlMs = options.ttlMs ?? 300
  const election = await startElection({ mode: 'lead', fenced: options.fenced, ttlMs })
  let pauses = 0
  let blocked = 0
  let end: ElectionEnd
  try {
    let last = -1n
    while (pauses < options.pauses) {
      const elected = await freezeWritingLeader(election, last)
      last = BigInt(elected.term)
      pauses++
      // A successor that cannot write within 15 s (counted as `blocked`; a successor waiting for
      // the frozen leader's row lock waits until it is woken) is reported, and the frozen leader is
      // woken all the same. 15 s, not a few leases: a starved machine delays an election by seconds.
      const successor = election
        .waitFor(
          (m) => m.type === 'wrote' && BigInt(m.term) > last && m.outcome === 'accepted',
          'a write of its successor',
          Math.max(10 * ttlMs, 15_000),
        )
        .then(
          () => true,
          () => false,
        )
      await new Promise((resolve) => setTimeout(resolve, ttlMs * (1 + 2 * Math.random())))
      if (!(await successor)) blocked++
      const before = election.messages.length
      election.thaw(elected.process)
      election.send(elected.process, { cmd: 'write', fenced: options.fenced })
      await election.waitFor(
        (m) => election.messages.indexOf(m as never) >= before && m.type === 'wrote' && m.process === elected.process,
        'the woken leader’s write',
      )
    }
  } finally {
    end = await election.stop()
  }
  const { records, writes } = end
  const elections = election.messages.filter((m) => m.type === 'elected').length
  const refused = election.messages.filter((m) => m.type === 'wrote' && m.outcome === 'refused').length
  return {
    fenced: options.fenced,
    pauses,
    blocked,
    elections,
    leases: checkGrants(records, 'validity'),
    believed: checkGrants(records, 'release'),
    writes,
    refused,
    seconds: (performance.now() - began) / 1000,
  }
}
