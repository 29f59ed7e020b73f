/**
 * `locker.readWrite()` across processes (fixtures/read-write-worker.ts): 4 processes of 3 loops
 * each read and write one name and record their holds on the monotonic clock; an external check
 * finds no reader overlapping a writer's valid lease and no two writers overlapping. A process that
 * stops itself (SIGSTOP) while it writes loses its lease: the others go on, and only the part of its
 * hold within its valid lease counts — the part after it is what a fence must refuse. The control:
 * the same workers without the lock, and the check finds overlaps.
 */
import { spawn } from 'node:child_process'
import { dirname, join } from 'node:path'
import { createInterface } from 'node:readline'
import { fileURLToPath } from 'node:url'
import { beforeAll, describe, expect, it } from 'vitest'
import { unique } from '../support/connections.js'
import { startRedisServer, type RedisServer } from '../support/redis-server.js'

const here = dirname(fileURLToPath(import.meta.url))
/** One Redis, and 3 independent masters for quorum mode. */
const servers: RedisServer[] = []

beforeAll(async () => {
  for (let i = 0; i < 4; i++) servers.push(await startRedisServer())
})

/** Where the workers connect: one Redis, or quorum mode's 3 nodes (comma-separated). */
const TOPOLOGIES = {
  'one Redis': () => servers[0]!.url,
  'quorum mode, 3 nodes': () =>
    servers
      .slice(1)
      .map((s) => s.url)
      .join(','),
} as const
type Topology = keyof typeof TOPOLOGIES

interface Hold {
  kind: 'read' | 'write'
  pid: number
  start: bigint
  end: bigint
  validEnd: bigint
  token: bigint
}

/**
 * Runs one worker process to its end; `onStall` is told when it stops itself, `ready` once it waits
 * for the word to go (given by calling the function it gets).
 */
function worker(
  topology: Topology,
  name: string,
  mode: 'lock' | 'bypass',
  /** `self`: this worker stops itself; `other`: another one does (all poll fast then). */
  stall: 'none' | 'self' | 'other',
  onStall: (pid: number) => void,
  ready: (go: () => void) => void,
): Promise<Hold[]> {
  const child = spawn(
    process.execPath,
    [
      '--import',
      'tsx',
      join(here, '..', 'fixtures', 'read-write-worker.ts'),
      TOPOLOGIES[topology](),
      name,
      mode,
      '3',
      '25',
      // Stalled runs: a lease well below the stall. Others: far above a loaded machine's delays,
      // so that no lease lapses and the order of grants is the order of the recorded starts.
      stall === 'self' ? '500' : '3000',
      stall === 'self' ? '1' : stall === 'other' ? '2' : '0',
    ],
    { stdio: ['pipe', 'pipe', 'pipe'] },
  )
  let errors = ''
  child.stderr.on('data', (chunk: Buffer) => (errors += chunk.toString()))
  return new Promise((resolve, reject) => {
    let holds: Hold[] | undefined
    createInterface({ input: child.stdout }).on('line', (line) => {
      if (line === 'ready') ready(() => child.stdin.write('go\n'))
      else if (line === 'stalling') onStall(child.pid!)
      else if (line.startsWith('['))
        holds = (JSON.parse(line) as Record<string, string | number>[]).map((h) => ({
          kind: h.kind as Hold['kind'],
          pid: Number(h.pid),
          start: BigInt(h.start!),
          end: BigInt(h.end!),
          validEnd: BigInt(h.validEnd!),
          token: BigInt(h.token!),
        }))
    })
    child.on('exit', (code) => {
      if (code === 0 && holds) resolve(holds)
      else reject(new Error(`worker exited ${code}: ${errors}`))
    })
  })
}

/** Every pair of holds that must not overlap but does (a writer with anyone), each cut to its valid lease or not. */
function overlaps(holds: readonly Hold[], valid: boolean): [Hold, Hold][] {
  const end = (h: Hold): bigint => (valid && h.validEnd < h.end ? h.validEnd : h.end)
  const found: [Hold, Hold][] = []
  for (let i = 0; i < holds.length; i++) {
    for (let j = i + 1; j < holds.length; j++) {
      const x = holds[i]!
      const y = holds[j]!
      if (x.kind === 'read' && y.kind === 'read') continue
      if (x.start < end(y) && y.start < end(x)) found.push([x, y])
    }
  }
  return found
}

async function run(topology: Topology, mode: 'lock' | 'bypass', stall: boolean): Promise<Hold[]> {
  const name = unique('rw-procs')
  const stalls: Promise<void>[] = []
  const onStall = (pid: number): void => {
    // Continued 4 s later: eight times its 500 ms lease. The others need part of that to get in:
    // the stalled process's other loops are frozen too, some perhaps as waiting writers at the head
    // of the line, whose places last 2.3 s (fixtures/read-write-worker.ts: pollMs 100); a clean-clone
    // CI run once saw no other hold start within 1.5 s, and under load 20 none within 3 s with the
    // default 5 s places.
    stalls.push(new Promise((resolve) => setTimeout(() => resolve(void process.kill(pid, 'SIGCONT')), 4_000)))
  }
  const gos: (() => void)[] = []
  const ready = (go: () => void): void => {
    gos.push(go)
    if (gos.length === 4) for (const g of gos) g()
  }
  const all = await Promise.all(
    [0, 1, 2, 3].map((i) =>
      worker(topology, name, mode, stall ? (i === 0 ? 'self' : 'other') : 'none', onStall, ready),
    ),
  )
  await Promise.all(stalls)
  return all.flat()
}

describe.each(Object.keys(TOPOLOGIES) as Topology[])('a read-write lock across 4 processes (%s)', (topology) => {
  it('no reader overlaps a writer, no two writers overlap; writer tokens increase in time order; readers carry the last write', async () => {
    const holds = await run(topology, 'lock', false)
    expect(holds.length).toBe(4 * 3 * 25)
    expect(holds.filter((h) => h.kind === 'write').length).toBeGreaterThan(0)
    expect(overlaps(holds, true)).toEqual([])
    const ordered = [...holds].sort((x, y) => (x.start < y.start ? -1 : 1))
    let lastWrite: bigint | undefined
    let readsSince: bigint[] = []
    for (const h of ordered) {
      if (h.kind === 'write') {
        if (lastWrite !== undefined) expect(h.token).toBeGreaterThan(lastWrite)
        // Above every read's before it.
        for (const read of readsSince) expect(h.token).toBeGreaterThan(read)
        lastWrite = h.token
        readsSince = []
      } else if (lastWrite !== undefined) {
        // One Redis: the last write's token. Quorum mode: at or above it (a node's counter may be
        // ahead of the majority's, docs/LOCK.md), and below the next write's (checked above).
        if (topology === 'one Redis') expect(h.token).toBe(lastWrite)
        else expect(h.token).toBeGreaterThanOrEqual(lastWrite)
        readsSince.push(h.token)
      }
    }
    // Readers did share: some two reads overlapped.
    const reads = holds.filter((h) => h.kind === 'read')
    expect(reads.some((x, i) => reads.some((y, j) => i !== j && x.start < y.end && y.start < x.end))).toBe(true)
  }, 120_000)

  it('a process stopped (SIGSTOP) while it writes loses its lease; the others go on, and within valid leases nothing overlaps', async () => {
    const holds = await run(topology, 'lock', true)
    expect(holds.length).toBe(4 * 3 * 25)
    // The stalled write ran past its lease, and others held during that time: the stall was real.
    const stalled = holds.filter((h) => h.end > h.validEnd)
    expect(stalled.length).toBeGreaterThanOrEqual(1)
    expect(overlaps(holds, false).length).toBeGreaterThan(0)
    // Within each hold's valid lease, the lock held.
    expect(overlaps(holds, true)).toEqual([])
  }, 120_000)

  it('control: the same workers without the lock overlap, and the check says so', async () => {
    const holds = await run(topology, 'bypass', false)
    expect(overlaps(holds, true).length).toBeGreaterThan(0)
  }, 120_000)
})
